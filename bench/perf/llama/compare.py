"""`cellbench perf compare --llama-server`: cellbench's client and the peers' (vLLM's, AIPerf,
guidellm: whichever are installed) on the same llama-server, with the same prompts, runs
alternated A B C ... then in reverse.

The end-to-end check of the null-server comparison: on a real server, do the clients report
the same throughput, TPOT, ITL and TTFT? Every run gets a fresh llama-server (the cached build
and the built-in tiny model, started exactly as a chat cell starts it), because a server that
has seen a prompt answers it from its prompt cache; alternating the clients spreads the host's
drift over all. All send the chat split's prompts that vLLM's client accepts (4 to 1024 tokens:
it drops the others), request i the i-th of them, as one user message, the tiny profile's
sampling, `ignore_eos` and the same `max_tokens`, with the same concurrency in a closed loop.
Per client: the median over its runs of each figure as the client itself reports it, under
cellbench's name for it (each peer's own name beside, from bench.core.crosswalk), the range
(lowest-highest) over the runs, and its failed requests; beside them the server's own output
tok/s in the same runs, from its log (bench.perf.llama.log; not for a run that failed a
request), and each run's reported throughput over the server's minus one. That last tells a
client that mis-reads the stream (far from 0) from one that slowed the server it measured (near
0, however low both are). Then, because one run on a shared host varies by more than the
clients differ, each peer is paired with cellbench: per round, cellbench's figure over the
peer's minus one, and the median of those with a distribution-free
95% confidence interval (`paired_difference`). A round's runs are seconds apart, so the host's
drift over the hour cancels; the order flips every round, so going first or last does too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from math import comb
from pathlib import Path
from typing import Any

import adapters
from bench.base import clock
from bench.host.machine import detect
from bench.host.ports import free_port
from bench.perf.client_figures import Spread
from bench.perf.clients import ClientRun, Workload
from bench.perf.llama.log import server_throughput
from bench.run.cell import bind
from bench.run.server.launch import launching
from bench.setup import profiles
from bench.setup.adapter import ServeContext
from bench.setup.prompt_files import load_split
from bench.setup.tinymodel import ensure_tiny_model

HOST = "127.0.0.1"
FIGURES = ("output_throughput_tps", "tpot_p50_ms", "itl_p50_ms", "ttft_p50_ms")
# Each figure's key in bench.core.crosswalk, where every peer's own name for it is declared.
CROSSWALK_KEYS = {"output_throughput_tps": "output_throughput_tps", "tpot_p50_ms": "tpot_ms", "itl_p50_ms": "itl_ms",
                  "ttft_p50_ms": "ttft_ms"}
LABELS = {"output_throughput_tps": "output tok/s", "tpot_p50_ms": "TPOT p50", "itl_p50_ms": "ITL p50",
          "ttft_p50_ms": "TTFT p50"}
MAX_PROMPT_TOKENS = 1024  # vLLM's client drops longer prompts (and shorter than 4 tokens)


@dataclass(frozen=True)
class LlamaPlan:
    pairs: int = 5  # A B pairs
    concurrency: int = 4  # the CPU llama-server's slots
    requests: int = 40
    max_tokens: int = 128


@dataclass(frozen=True)
class Served:
    base_url: str
    model: str  # the id requests name
    version: str


@contextmanager
def llama_server(concurrency: int, log: Path) -> Iterator[Served]:
    """A fresh llama-server from the cache serving the tiny model, as `cellbench serve llamacpp` starts
    it; stopped (its whole process group) when the block ends. Raises NotInstalled when not cached."""
    adapter = adapters.get("llamacpp")
    tag = adapter.platform_here()
    if tag is None:
        raise RuntimeError("llama.cpp does not run on this platform")
    adapter, install, model = bind(adapter, tag, profiles.load_profile("tiny"), None, False)
    port = free_port(HOST)
    command = adapter.serve(ServeContext(install, model, HOST, port, "chat", concurrency, tag))
    with launching() as launch:
        server = launch(command, adapter, HOST, port, log)
        yield Served(server.base_url, model.served_id, install.version)


def request_extras() -> dict[str, Any]:
    """What a tiny-model chat cell adds to every llamacpp request: the profile's sampling and,
    the profile asking for it and llama-server honouring it, `ignore_eos`."""
    profile, adapter = profiles.load_profile("tiny"), adapters.get("llamacpp")
    extra: dict[str, Any] = dict(profile.sampling)
    if profile.ignore_eos and adapter.capabilities.ignore_eos:
        extra["ignore_eos"] = True
    return extra


def fitting_prompts(tokenizer_dir: Path, max_tokens: int) -> tuple[str, ...]:
    """The chat split's prompts (their one user message) that vLLM's client sends unchanged: 4 to
    1024 tokens of the model's tokenizer, and at most 2048 with the output."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    texts = [str(p.messages[-1]["content"]) for p in load_split("chat").prompts]
    return tuple(t for t in texts
                 if 4 <= (n := len(tok.encode(t).ids)) <= MAX_PROMPT_TOKENS and n + max_tokens <= 2048)


def alternate(plan: LlamaPlan, runners: list[tuple[str, Callable[[Workload, Path, int | None], ClientRun]]],
              folder: Path, say: Callable[[str], None]) -> tuple[list[tuple[str, ClientRun]], list[float | None], str]:
    """`plan.pairs` rounds of every client in turn (A B, then B A, ...), each run on a fresh
    server; the runs in order, the server's own output tok/s in each (from its log), and the
    server's version."""
    model = ensure_tiny_model()
    prompts = fitting_prompts(model.hf_dir, plan.max_tokens)
    extra = request_extras()
    runs: list[tuple[str, ClientRun]] = []
    server: list[float | None] = []
    version = "-"
    for pair in range(plan.pairs):
        for name, run in runners if pair % 2 == 0 else runners[::-1]:
            say(f"[{pair + 1}/{plan.pairs}] llama-server: {name} ({plan.requests} requests at c={plan.concurrency})")
            log = folder / f"llama-server-{pair}-{name}.log"
            with llama_server(plan.concurrency, log) as served:
                work = Workload(base_url=served.base_url, model=served.model, concurrency=plan.concurrency,
                                requests=plan.requests, prompts=prompts, max_tokens=plan.max_tokens,
                                extra=extra, tokenizer=str(model.hf_dir))
                runs.append((name, run(work, folder, None)))
                version = served.version
            # The log is complete once the server stopped. A run with a failed request has no
            # server figure: the log cannot say which requests a failed one was (some never reached it).
            server.append(None if runs[-1][1].failed else server_throughput(log, plan.requests))
    return runs, server, version


def summary(runs: list[tuple[str, ClientRun]], name: str, server: list[float | None] | None = None) -> dict[str, Any]:
    """One client's figures over its runs: each a Spread of the per-run values it reported, and
    its failed requests of all sent; with `server` (the server's own tok/s per run, as `runs`),
    its Spread over this client's runs and of the client's throughput over it minus one."""
    mine = [r for n, r in runs if n == name]
    own = [s for (n, _), s in zip(runs, server or [None] * len(runs), strict=True) if n == name]
    out: dict[str, Any] = {"client": name, "runs": len(mine), "failed": sum(r.failed for r in mine),
                           "requests": sum(r.ok + r.failed for r in mine)}
    for key in FIGURES:
        values = [float(v) for r in mine if (v := r.reported.get(key)) is not None]
        spread = Spread.of(values)
        out[key] = None if spread is None else asdict(spread)
    seen = Spread.of([s for s in own if s])
    out["server_tps"] = None if seen is None else asdict(seen)
    reads = Spread.of([float(t) / s - 1 for r, s in zip(mine, own, strict=True)
                       if s and (t := r.reported.get("output_throughput_tps")) is not None])
    out["vs_server"] = None if reads is None else asdict(reads)
    out["errors"] = [e for r in mine for e in r.errors][:5]
    out["own_names"] = own_names(name)  # the peer's names for the same figures (bench.core.crosswalk)
    return out


@dataclass(frozen=True)
class Paired:
    """One figure, A against B over the pairs: the median of A/B - 1 and its 95% interval."""

    median: float
    low: float  # the interval's bounds: order statistics of the n differences
    high: float
    coverage: float  # the interval's exact coverage (at least 0.95 where n >= 6)
    n: int


def paired_difference(a: list[float], b: list[float]) -> Paired | None:
    """d_i = a_i / b_i - 1 over n pairs; the median of the d_i and the distribution-free
    confidence interval of the median [d_(j+1), d_(n-j)] (sorted, 1-based), j the largest with
    coverage 1 - 2 P(X <= j) >= 0.95 for X ~ Binomial(n, 1/2) (j = 0 below 6 pairs: the whole
    range, its coverage said). Assumes only that the pairs are independent."""
    d = sorted(x / y - 1.0 for x, y in zip(a, b, strict=True) if y)
    n = len(d)
    if not n:
        return None

    def below(j: int) -> float:  # P(X <= j)
        return sum(comb(n, i) for i in range(j + 1)) / 2**n

    j = 0
    while j + 1 < n - j - 1 and 1 - 2 * below(j + 1) >= 0.95:
        j += 1
    mid = (d[(n - 1) // 2] + d[n // 2]) / 2
    return Paired(mid, d[j], d[n - 1 - j], 1 - 2 * below(j), n)


def paired(runs: list[tuple[str, ClientRun]], a: str, b: str, *, clean: bool = False) -> dict[str, Any]:
    """Every figure's `paired_difference` of client `a` against `b`, pair by pair (the k-th run of
    each), over the pairs in which both reported it; `clean`: only the pairs in which neither
    client failed a request (a failed request sends no tokens: the throughput it lowers is the
    client's loss, not a different measurement of the server)."""
    mine = [r for n, r in runs if n == a]
    theirs = [r for n, r in runs if n == b]
    out: dict[str, Any] = {"a": a, "b": b, "clean": clean}
    for key in FIGURES:
        both = [(x, y) for r, q in zip(mine, theirs, strict=False)
                if (x := r.reported.get(key)) is not None and (y := q.reported.get(key)) is not None
                and not (clean and (r.failed or q.failed))]
        found = paired_difference([float(x) for x, _ in both], [float(y) for _, y in both])
        out[key] = None if found is None else asdict(found)
    return out


def own_names(client: str) -> dict[str, str] | None:
    """A peer's own name for each figure (bench.core.crosswalk), "no equivalent" where it has none,
    with how close its definition is; None for cellbench's own client."""
    from bench.core.crosswalk import TOOLS, likeness, peer_name

    if client not in TOOLS:
        return None
    out = {}
    for key in FIGURES:
        name = peer_name(client, CROSSWALK_KEYS[key])
        out[key] = "no equivalent" if name is None else f"{name} ({likeness(client, CROSSWALK_KEYS[key])})"
    return out


def table(rows: list[dict[str, Any]], *pairings: dict[str, Any]) -> str:
    """Markdown: per client, the median (lowest-highest) of each figure, and the failed requests;
    a last row: cellbench's median over vLLM's, minus one."""
    head = ["client", "output tok/s", "TPOT p50 (ms)", "ITL p50 (ms)", "TTFT p50 (ms)", "failed",
            "server's own tok/s (its log)", "client's tok/s / server's - 1"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["client"]]
        for key in FIGURES:
            s = r[key]
            cells.append("-" if s is None else f"{s['median']:.2f} ({s['low']:.2f}-{s['high']:.2f})")
        cells.append(f"{r['failed']} of {r['requests']}")
        s, v = r.get("server_tps"), r.get("vs_server")
        cells.append("-" if s is None else f"{s['median']:.2f} ({s['low']:.2f}-{s['high']:.2f})")
        cells.append("-" if v is None else f"{v['median']:+.1%} ({v['low']:+.1%} to {v['high']:+.1%})")
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) == 2 and all(rows[0][k] and rows[1][k] for k in FIGURES):
        diff = [f"{rows[0][k]['median'] / rows[1][k]['median'] - 1:+.1%}" for k in FIGURES]
        lines.append(f"| {rows[0]['client']} vs {rows[1]['client']}, medians | " + " | ".join(diff) + " | | | |")
    for pairs in pairings:
        if not all(pairs[k] for k in FIGURES):
            continue
        cells = [f"{pairs[k]['median']:+.1%} ({pairs[k]['low']:+.1%} to {pairs[k]['high']:+.1%})" for k in FIGURES]
        n, coverage = pairs[FIGURES[0]]["n"], pairs[FIGURES[0]]["coverage"]
        which = " in which neither failed a request" if pairs["clean"] else ""
        lines.append(f"| {pairs['a']} / {pairs['b']} - 1, median of {n} pairs{which} ({coverage:.0%} interval) | "
                     + " | ".join(cells) + " | | | |")
    return "\n".join(lines)


def compare_on_llama(plan: LlamaPlan, clients: list[Any], missing: list[Any], folder: Path,
                     say: Callable[[str], None], as_json: bool, argv: list[str], started: str) -> int:
    """The `--llama-server` mode of `cellbench perf compare`: runs, then the table or JSON."""
    runs, server, version = alternate(plan, [(c.name, c.run) for c in clients], folder, say)
    rows = [summary(runs, c.name, server) for c in clients]
    pairings = [paired(runs, clients[0].name, peer.name, clean=clean)  # every peer against cellbench's client
                for peer in clients[1:] for clean in (False, True)]
    m = detect()
    doc: dict[str, Any] = {"command": "cellbench perf compare " + " ".join(argv), "started_at": started,
           "finished_at": clock.now_iso(), "machine": {"slug": m.slug, "cpu": m.cpu, "cores": m.cores},
           "llama_server": version, "plan": asdict(plan), "rows": rows, "paired": pairings,
           "missing": [{"client": r.client, "why": r.missing} for r in missing],
           "runs": [{"client": n, "ok": r.ok, "failed": r.failed, "duration_s": round(r.duration_s, 3),
                     **{k: r.reported.get(k) for k in FIGURES}, "server_tps": s}
                    for (n, r), s in zip(runs, server, strict=True)]}
    if as_json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{str(doc['finished_at'])[:10]}, {m.cpu} ({m.cores} cores, {m.slug}); llama-server {version}, tiny model, "
          f"{plan.pairs} x {len(clients)} runs alternated, {plan.requests} requests each at c={plan.concurrency}, "
          f"max_tokens {plan.max_tokens}")
    print(table(rows, *pairings))
    for r in rows:
        if names := own_names(r["client"]):
            print(f"{r['client']} reports these under its own names: "
                  + "; ".join(f"{LABELS[k]} = {names[k]}" for k in FIGURES))
    for r in missing:
        print(f"{r.client}: {r.missing}")
    return 0
