"""`cellbench perf ceiling`: how many chunks and requests a second cellbench's client delivers
against a server that does no work, at each concurrency, on one client process (or several).

    cellbench perf ceiling [--concurrency 32,128,512] [--tokens 100] [--requests-per-stream 4]
                           [--client-procs N] [--json]

The zero-work SSE server (bench.perf.null_server.server, unpaced: each stream's chunks written as
fast as it can) runs pinned to the last usable CPU; the client's level (`run_level`, through
`run_level_procs` with `--client-procs`) runs on the others, one process per CPU. Per
concurrency: delivered chunks/s and requests/s over the level's wall time, the busiest client
process's CPU share and the server's: a share near 1.0 says which of the two was the limit. On
a host with two CPUs the server gets one and the client one, so a figure whose server share is
near 1.0 is the server's ceiling as much as the client's (the row's "limited by" says which). Short
responses (`--tokens 1`) measure requests/s, long ones chunks/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass

from bench.base import clock
from bench.base.flags import add_requests_per_stream
from bench.core.level_run import LevelConfig
from bench.core.metrics import summarize_level
from bench.host.machine import detect
from bench.load.procs import ProcPlan, run_level_procs
from bench.perf.args import positive_int, positive_ints
from bench.perf.null_server.server import MODEL, paced_server
from bench.setup.prompts import Prompt

BOUND = 0.9  # a CPU share above this: that process was the limit


@dataclass(frozen=True)
class Ceiling:
    concurrency: int
    procs: int
    requests: int
    failed: int
    chunks_per_s: float
    requests_per_s: float
    client_cpu_share: float | None  # the busiest client process's, of one core
    server_cpu_share: float
    limited_by: str  # "client", "server", "client and server" or "neither" (the host, or both below BOUND)


def measure(concurrency: int, tokens: int, rounds: int, procs: int) -> Ceiling:
    """One level of `concurrency` x `rounds` requests of `tokens` chunks against a fresh unpaced server."""
    usable = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpus = usable[-1], usable[:-1] or usable
    if procs > len(client_cpus):
        raise SystemExit(f"cellbench perf ceiling: --client-procs {procs} needs {procs + 1} CPUs (one for the "
                         f"server); this host lets us use {len(usable)}")
    prompts = [Prompt(name="p0", messages=({"role": "user", "content": "go"},), max_tokens=tokens)]
    plan = ProcPlan(procs, tuple((c,) for c in client_cpus[:procs]), "perf ceiling")
    with paced_server(0.0, core=server_cpu, first_ms=0.0) as (url, server):
        cfg = LevelConfig(base_url=url, model=MODEL, concurrency=concurrency, requests=concurrency * rounds,
                          warmup=1, extra_body={"stream_options": {"include_usage": True}},
                          client_cpus=tuple(client_cpus[:procs]))
        before = server.cpu_times()
        run = run_level_procs(cfg, prompts, prompts, plan)
        after = server.cpu_times()
    s = summarize_level(run)
    wall = s["wall_time_s"] or float("nan")
    server_share = ((after.user + after.system) - (before.user + before.system)) / wall
    client_share = s["client"].get("cpu_share")
    bound = [who for who, share in (("client", client_share or 0.0), ("server", server_share)) if share > BOUND]
    limited = " and ".join(bound) or "neither"  # both near a core: a faster client would meet a saturated server
    return Ceiling(concurrency, procs, s["num_requests"], s["failed"], s["chunks_total"] / wall,
                   s["request_throughput_rps"] or 0.0, client_share, server_share, limited)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cellbench perf ceiling", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=positive_ints, default=(32, 128, 512), help="streams [32,128,512]")
    ap.add_argument("--tokens", type=positive_int, default=100, help="chunks per response [%(default)s]")
    add_requests_per_stream(ap, type=positive_int, default=4, help="requests per stream [%(default)s]")
    ap.add_argument("--client-procs", type=positive_int, default=1, help="client processes [%(default)s]")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    rows = []
    for c in args.concurrency:
        print(f"c={c}: {c * args.requests_per_stream} requests of {args.tokens} chunks", file=sys.stderr, flush=True)
        rows.append(measure(c, args.tokens, args.requests_per_stream, args.client_procs))
    m = detect()
    if args.json:
        print(json.dumps({"finished_at": clock.now_iso(), "machine": {"cpu": m.cpu, "cores": m.cores},
                          "load_average": os.getloadavg(), "tokens": args.tokens, "rows": [asdict(r) for r in rows]},
                         indent=1))
        return 0
    print(f"{clock.now_iso()[:10]}, {m.cpu} ({m.cores} cores); load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.tokens} chunks a response")
    print("| concurrency | client processes | chunks/s | requests/s | CPU share: client / server | limited by "
          "| failed |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        share = "-" if r.client_cpu_share is None else f"{r.client_cpu_share:.2f}"
        print(f"| {r.concurrency} | {r.procs} | {r.chunks_per_s:,.0f} | {r.requests_per_s:,.0f} | "
              f"{share} / {r.server_cpu_share:.2f} | {r.limited_by} | {r.failed} of {r.requests} |")
    return 0
