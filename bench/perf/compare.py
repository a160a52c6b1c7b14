"""`cellbench perf compare`: cellbench's client beside the peers' (vLLM's, AIPerf, guidellm) on the
same zero-work SSE server.

    cellbench perf compare [--repeat 3] [--json] [--rates 5000,10000] [--peers vllm,aiperf,guidellm|none]
    cellbench perf compare --llama-server [--pairs 5]      (bench.perf.llama.compare)

A benchmark client must not be what it measures, and "ours is cheap" means little without the
clients everyone else uses on the same machine, the same server and the same bytes. So all run
here, one after the other (cellbench, then the peers; the order flips on every repeat), each a child
process pinned to one core while the null server (bench.perf.null_server.server, in a process of its
own) has the other, and for each the command prints one row:

- CPU per chunk, start-up cancelled: the client's CPU for N and for 3N requests of 100 chunks
  against the unpaced server, difference over difference in chunks (`client_figures.cpu_per_chunk`);
- chunks/s on one core: delivered chunks per second in the unpaced 3N run (`chunk_rate`), with
  the server's CPU share beside it, so a server-bound figure shows;
- timing error at each offered rate: the server paced to tens of microseconds (bench.perf.null_server.pacer:
  chunk k of a stream at receipt + first_ms + (k-1) x interval), p50/p99 of |TTFT - the server's
  own TTFT| and |ITL - the server's own gap| per request and chunk, from the server's log of
  when it read each request and wrote each chunk (`timing_error`); the TTFT bias says which way a
  client leans, and the server's lateness against its plan is printed beside.

The peers come from the framework cache (bench.perf.peers: `cellbench install vllm`, `aiperf`,
`guidellm` put them there; this command never installs); a missing one's row says why.
cellbench's client is driven through `bench.load.run_level` only, so the command measures
whichever transport is current. It runs twice: as its levels run by default, a connection per
request, and with `--keep-alive`, connections reused as vLLM's client reuses them: a connect
costs the client about a microsecond per chunk of a 100-chunk response, and only the second row
compares like with like.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.base import clock
from bench.base.flags import add_requests_per_stream
from bench.base.git import head_commit
from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from bench.perf.args import non_negative_float, peer_names, positive_float, positive_int, positive_ints
from bench.perf.client_figures import (
    ServerLog,
    Spread,
    TimingError,
    chunk_rate,
    cpu_per_chunk,
    cpu_share,
    timing_error,
)
from bench.perf.clients import CELLBENCH, CELLBENCH_KEEP_ALIVE, ClientRun, Workload, run_cellbench
from bench.perf.host import cores, host_lock, ms_between, steal_s
from bench.perf.null_server.server import MODEL, paced_server
from bench.perf.peers import Peer, peers
from bench.perf.rows import LEGEND, ClientRow, table
from bench.setup.installs.cache import Installation
from bench.setup.tinymodel import ensure_tiny_model

# At least 4 tokens of the tiny model's tokenizer: vLLM's client drops shorter prompts.
PROMPT = "Write a short story about a lighthouse keeper and the sea."

Runner = Callable[[Workload, Path, "int | None"], ClientRun]


@dataclass(frozen=True)
class Plan:
    streams: int = 32  # concurrent streams against the unpaced server
    tokens: int = 100  # token chunks per response
    requests: int = 2000  # N: the unpaced runs send N and 3N requests
    rates: tuple[int, ...] = (5000, 10000)  # offered chunks/s of the paced runs
    interval_ms: float = 10.0  # per-stream chunk interval of the paced runs
    first_ms: float = 20.0  # first-token delay of the paced runs
    rounds: int = 4  # requests per stream in a paced run (the first round opens all streams at once)
    repeat: int = 1
    pin: bool = True  # client on one core, server on another (when there are two)


@dataclass(frozen=True)
class Client:
    name: str
    version: str
    run: Runner


@dataclass
class Measured:
    """One client run and what the server did meanwhile."""

    client: str
    kind: str  # "unpaced N", "unpaced 3N", "paced <rate>"
    repeat: int
    run: ClientRun
    server_cpu_s: float
    server_late: dict[str, Any] = field(default_factory=dict)  # the pacer's lateness (paced runs)
    server_log: ServerLog = field(default_factory=dict)  # when it read and wrote each stream (paced runs)
    # The host meanwhile: CPU the hypervisor took (steal, every CPU) and the server's preemptions.
    host: dict[str, float | None] = field(default_factory=dict)


def _kinds(plan: Plan) -> Iterator[tuple[str, dict[str, Any], int, int]]:
    """(kind, server options, concurrency, requests) of every run one repeat makes per client."""
    unpaced = {"interval_ms": 0.0, "first_ms": 0.0, "precise": False}
    yield "unpaced N", unpaced, plan.streams, plan.requests
    yield "unpaced 3N", unpaced, plan.streams, 3 * plan.requests
    for rate in plan.rates:
        streams = _streams(rate, plan)
        # the opening round's streams start spread; later ones keep their slot's phase (`spread`)
        paced = {"interval_ms": plan.interval_ms, "first_ms": plan.first_ms, "precise": True, "spread": streams}
        yield f"paced {rate}", paced, streams, streams * plan.rounds


def _streams(rate: int, plan: Plan) -> int:
    """Streams that offer `rate` chunks/s at one chunk per interval each."""
    return max(1, round(rate * plan.interval_ms / 1000.0))


def measure(plan: Plan, clients: list[Client], folder: Path, say: Callable[[str], None]) -> list[Measured]:
    """Every run of the plan: per repeat, per kind, each client on a fresh server, the clients'
    order flipped on odd repeats."""
    client_cpu, server_cpu = cores(plan.pin)
    tokenizer = str(ensure_tiny_model().hf_dir)
    done: list[Measured] = []
    for rep in range(plan.repeat):
        order = clients if rep % 2 == 0 else clients[::-1]
        for kind, server, concurrency, requests in _kinds(plan):
            for client in order:
                say(f"[{rep + 1}/{plan.repeat}] {kind}: {client.name} ({requests} requests)")
                with paced_server(core=server_cpu, **server) as (url, proc):
                    work = Workload(base_url=url, model=MODEL, concurrency=concurrency, requests=requests,
                                    prompts=(PROMPT,), max_tokens=plan.tokens, tokenizer=tokenizer,
                                    detail=server["precise"])
                    before, switched, stolen = proc.cpu_times(), proc.num_ctx_switches().involuntary, steal_s()
                    run = client.run(work, folder, client_cpu)
                    after = proc.cpu_times()
                    host = {"steal_ms": ms_between(stolen, steal_s()),
                            "server_preempted": proc.num_ctx_switches().involuntary - switched}
                    late = _server_json(url, "/stats") if server["precise"] else {}
                    log = _server_json(url, "/log") if server["precise"] else {}
                spent = (after.user + after.system) - (before.user + before.system)
                done.append(Measured(client.name, kind, rep, run, spent, late, log, host))
    return done


def _server_json(url: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + path, timeout=30) as answer:
        found: dict[str, Any] = json.loads(answer.read())
    return found


def row(client: Client, measured: list[Measured], plan: Plan) -> ClientRow:
    """The client's row: its figures over the repeats (runs of one repeat paired for the CPU)."""
    mine = [m for m in measured if m.client == client.name]
    small = {m.repeat: m for m in mine if m.kind == "unpaced N"}
    large = {m.repeat: m for m in mine if m.kind == "unpaced 3N"}
    paired = [(small[r].run, large[r]) for r in sorted(small) if r in large]
    per_chunk = [c * 1e6 for s, big in paired if (c := cpu_per_chunk(s, big.run)) is not None]
    rates = [r for _, big in paired if (r := chunk_rate(big.run)) is not None]
    per_s = [big.run.ok / big.run.duration_s for _, big in paired if big.run.duration_s > 0]
    shares = [big.server_cpu_s / big.run.duration_s for _, big in paired if big.run.duration_s > 0]
    busy = [c for s, big in paired if (c := cpu_share(s, big.run)) is not None]
    out = ClientRow(client.name, client.version, Spread.of(per_chunk), Spread.of(rates), Spread.of(per_s),
                    Spread.of(busy), Spread.of(shares))
    for rate in plan.rates:
        paced = [m for m in mine if m.kind == f"paced {rate}"]
        out.timing.append(timing_error([(m.run, m.server_log) for m in paced], rate, _streams(rate, plan)))
        late = [float(m.server_late["p99_us"]) for m in paced if "p99_us" in m.server_late]
        if late:
            out.server_late_p99_us[str(rate)] = max(late)
    out.requests = sum(m.run.ok + m.run.failed for m in mine)
    out.failed = sum(m.run.failed for m in mine)
    return out


def available_clients(wanted: tuple[str, ...] | None = None) -> tuple[list[Client], list[ClientRow]]:
    """cellbench's client and every peer in `wanted` (None: all) that is installed; a ClientRow
    saying why for each wanted peer that is not."""
    clients = [Client(CELLBENCH, _cellbench_version(), run_cellbench)]
    missing: list[ClientRow] = []
    for peer in peers():
        if wanted is not None and peer.name not in wanted:
            continue
        why = peer.unavailable()
        install = None if why else peer.find()
        if install is None:
            missing.append(ClientRow(peer.name, "-", missing=why or f"not installed ({peer.install_hint})"))
            continue
        clients.append(Client(peer.name, install.version, _runner(peer, install)))
    return clients, missing


def _runner(peer: Peer, install: Installation) -> Runner:
    return lambda work, folder, cpu: peer.run(install, work, folder, cpu)


def _cellbench_version() -> str:
    commit = head_commit(PROJECT_ROOT)
    return f"git {commit[:9]}" if commit else "-"


def report(rows: list[ClientRow], measured: list[Measured], plan: Plan, argv: list[str],
           started: str) -> dict[str, Any]:
    m = detect()
    return {
        "command": "cellbench perf compare " + " ".join(argv),
        "started_at": started,
        "finished_at": clock.now_iso(),
        "machine": {"slug": m.slug, "cpu": m.cpu, "cores": m.cores, "os": m.os},
        "cpus": dict(zip(("client", "server"), cores(plan.pin), strict=True)),
        "load_average": os.getloadavg(),
        "plan": asdict(plan),
        "rows": [asdict(r) for r in rows],
        "runs": [{"client": x.client, "kind": x.kind, "repeat": x.repeat, "ok": x.run.ok, "failed": x.run.failed,
                  "chunks": x.run.chunks, "duration_s": round(x.run.duration_s, 4), "cpu_s": round(x.run.cpu_s, 4),
                  "wall_s": round(x.run.wall_s, 3), "server_cpu_s": round(x.server_cpu_s, 4),
                  "server_late": x.server_late, "errors": x.run.errors,
                  # a paced run's own timing errors: whether the tail holds in every repeat, not only pooled
                  **({"timing": asdict(_run_timing(x, plan)), "host": {**x.host, **x.run.evidence}}
                     if x.server_log else {})} for x in measured],
    }


def _run_timing(x: Measured, plan: Plan) -> TimingError:
    rate = int(x.kind.removeprefix("paced "))
    return timing_error([(x.run, x.server_log)], rate, _streams(rate, plan))


def say(text: str) -> None:
    """Progress, on stderr: stdout is the table or the JSON."""
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["ceiling"]:
        from bench.perf.ceiling import main as ceiling

        return ceiling(given[1:])
    if argv is not None and given[:1] != ["compare"]:  # from `cellbench perf ...`
        print("usage: cellbench perf compare|ceiling [options] (see cellbench perf compare --help)", file=sys.stderr)
        return 2
    if given[:1] == ["compare"]:
        given = given[1:]
    ap = argparse.ArgumentParser(prog="cellbench perf compare", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the whole report as JSON instead of the table")
    ap.add_argument("--repeat", type=positive_int, default=Plan.repeat, help="repeats of every run [%(default)s]")
    ap.add_argument("--streams", type=positive_int, default=Plan.streams, help="unpaced streams [%(default)s]")
    ap.add_argument("--tokens", type=positive_int, default=Plan.tokens, help="chunks per response [%(default)s]")
    ap.add_argument("--requests", type=positive_int, default=Plan.requests, help="N of the unpaced runs [%(default)s]")
    ap.add_argument("--rates", type=positive_ints, default=Plan.rates, help="paced offered chunks/s [5000,10000]")
    ap.add_argument("--interval-ms", type=positive_float, default=Plan.interval_ms,
                    help="paced chunk interval [%(default)s]")
    ap.add_argument("--first-ms", type=non_negative_float, default=Plan.first_ms,
                    help="paced first-token delay [%(default)s]")
    add_requests_per_stream(ap, type=positive_int, default=Plan.rounds, help="requests per paced stream [%(default)s]")
    ap.add_argument("--no-pin", action="store_true", help="leave client and server unpinned")
    ap.add_argument("--peers", type=peer_names, default=None,
                    help="the peers' clients to run beside cellbench's, comma-separated, or none [every installed one]")
    ap.add_argument("--host-lock-timeout", type=non_negative_float, default=1800.0,
                    help="wait this long for the host lock that keeps cells off the machine [%(default)s s]")
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs' files (logs, vLLM's results) here")
    ap.add_argument("--llama-server", action="store_true",
                    help="instead: every client on the cached llama-server, runs alternated (bench.perf.llama.compare)")
    ap.add_argument("--pairs", type=positive_int, default=5, help="with --llama-server: A B pairs [%(default)s]")
    ap.add_argument("--concurrency", type=positive_int, default=4, help="with --llama-server: in flight [%(default)s]")
    ap.add_argument("--llama-requests", type=positive_int, default=40,
                    help="with --llama-server: requests per run [%(default)s]")
    args = ap.parse_args(given)
    started = clock.now_iso()
    clients, missing = available_clients(args.peers)
    if not args.llama_server:  # beside the default, cellbench as the peers connect: kept alive
        clients.insert(1, Client(CELLBENCH_KEEP_ALIVE, clients[0].version,
                                 lambda w, f, c: run_cellbench(replace(w, keep_alive=True), f, c)))
    with tempfile.TemporaryDirectory(prefix="cellbench-perf-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.llama_server:
            from bench.perf.llama.compare import LlamaPlan, compare_on_llama

            plan_l = LlamaPlan(args.pairs, args.concurrency, args.llama_requests, args.tokens)
            with host_lock(args.host_lock_timeout):
                return compare_on_llama(plan_l, clients, missing, folder, say, args.json, given, started)
        plan = Plan(args.streams, args.tokens, args.requests, args.rates, args.interval_ms, args.first_ms,
                    args.requests_per_stream, args.repeat, not args.no_pin)
        with host_lock(args.host_lock_timeout):
            measured = measure(plan, clients, folder, say)
    rows = [row(c, measured, plan) for c in clients] + missing
    doc = report(rows, measured, plan, given, started)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    m = doc["machine"]
    cpus = doc["cpus"]
    print(f"{doc['finished_at'][:10]}, {m['cpu']} ({m['cores']} cores, {m['slug']}); client on CPU {cpus['client']}, "
          f"server on CPU {cpus['server']}; load average {', '.join(f'{x:.2f}' for x in doc['load_average'])}")
    print(table(rows, plan.rates))
    print(LEGEND.format(n=plan.requests, n3=3 * plan.requests, streams=plan.streams, tokens=plan.tokens,
                        first=plan.first_ms, interval=plan.interval_ms, rounds=plan.rounds))
    for r in rows:
        if r.server_late_p99_us:
            late = ", ".join(f"{rate}/s {us / 1e3:.3f} ms" for rate, us in r.server_late_p99_us.items())
            print(f"server lateness p99 during {r.client}'s paced runs (worst run): {late}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
