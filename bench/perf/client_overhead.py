"""How much the load generator costs per SSE chunk, against a server that costs nothing.

    python -m bench.perf.client_overhead [--concurrency 50 --interval-ms 10 --tokens 200 --rounds 3]

A zero-work SSE server runs in a separate process (its CPU is not the client's), pinned to the
last core when there are two or more, while this process takes the others. Every response
streams `--tokens` content chunks, one per `--interval-ms` on an absolute schedule per stream, so
the offered rate is concurrency / interval chunks/s (default 50 x 100/s = 5,000/s). The real
`run_level` drives it; the script prints JSON: offered and delivered chunks/s, client CPU per
chunk and share of a core, schedule lag, loop lag and ITL against the paced interval. Delivered
below ~95% of offered, or ITL p99 well above the interval, means the client distorts timings at
that rate.

The server is bench.perf.null_server.server.
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Any

from bench.base.flags import add_requests_per_stream
from bench.core.metrics import summarize_level
from bench.load import EVENT_LOOP, LevelConfig, LevelRun, run_level
from bench.perf.args import non_negative_float, positive_int
from bench.perf.null_server.server import MODEL, paced_server, serve
from bench.setup.prompts import Prompt

# ------------------------------------------------------------------ the client (this process)


@dataclass
class PacedRun:
    """One level against the paced server, and what it cost the server."""

    run: LevelRun
    interval_ms: float
    tokens: int  # content chunks per response
    cpus: int  # CPUs this process could use before the server took one
    server_core: int | None  # the CPU the server was pinned to
    server_cpu_s: float  # the server process's CPU seconds over the level


def run_paced(concurrency: int = 50, interval_ms: float = 10.0, tokens: int = 200, rounds: int = 3,
              pin: bool = True) -> PacedRun:
    """Run one closed-loop level of concurrency x rounds requests against the paced server, the
    server on the last CPU and this process on the others when `pin` and there are two or more."""
    cpus = sorted(os.sched_getaffinity(0))
    server_core = cpus[-1] if pin and len(cpus) >= 2 else None
    prompts = [
        Prompt(name=f"p{i}", messages=({"role": "user", "content": "go"},), max_tokens=tokens)
        for i in range(concurrency)
    ]
    warm = [Prompt(name="warm", messages=({"role": "user", "content": "go"},), max_tokens=5)]
    if server_core is not None:
        os.sched_setaffinity(0, set(cpus[:-1]))
    try:
        with paced_server(interval_ms, server_core) as (base_url, server):
            cfg = LevelConfig(
                base_url=base_url,
                model=MODEL,
                concurrency=concurrency,
                requests=concurrency * rounds,
                warmup=1,
                extra_body={"stream_options": {"include_usage": True}},
            )
            cpu0 = server.cpu_times()
            run = run_level(cfg, prompts, warm)
            cpu1 = server.cpu_times()
    finally:
        if server_core is not None:
            os.sched_setaffinity(0, set(cpus))
    server_cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    return PacedRun(run, interval_ms, tokens, len(cpus), server_core, server_cpu)


def figures(paced: PacedRun) -> dict[str, Any]:
    """The figures of a paced run: offered and delivered chunks/s, client CPU per chunk and share
    of a core, the server's share, schedule lag, loop lag, ITL against the paced interval, TTFT."""
    run, interval_ms = paced.run, paced.interval_ms
    concurrency = run.config.concurrency
    s = summarize_level(run)
    wall = s["wall_time_s"]
    chunks = s["chunks_total"]
    client = s["client"]
    offered = concurrency * 1000.0 / interval_ms
    return {
        "config": {
            "concurrency": concurrency,
            "interval_ms": interval_ms,
            "tokens_per_response": paced.tokens,
            "requests": run.config.requests,
            "loop": EVENT_LOOP,
            "cpus": paced.cpus,
            "server_core": paced.server_core,
        },
        "successful": s["successful"],
        "failed": s["failed"],
        "wall_time_s": round(wall, 3),
        "offered_chunks_per_s": offered,
        "delivered_chunks_per_s": round(chunks / wall, 1) if wall else None,
        "delivered_fraction": round(chunks / wall / offered, 4) if wall else None,
        "client_cpu_us_per_chunk": round(client["cpu_share"] * wall / chunks * 1e6, 1) if chunks else None,
        "client_cpu_share": round(client["cpu_share"], 3),
        "server_cpu_share": round(paced.server_cpu_s / wall, 3) if wall else None,
        "schedule_lag_ms": {"p50": _r(s["schedule_lag_ms"]["p50"]), "p99": _r(s["schedule_lag_ms"]["p99"])},
        "loop_lag_p99_ms": _r(client["loop_lag_p99_ms"]),
        "itl_ms": {"paced": interval_ms, "p50": _r(s["itl_ms"]["p50"]), "p99": _r(s["itl_ms"]["p99"])},
        "ttft_ms": {"p50": _r(s["ttft_ms"]["p50"]), "p99": _r(s["ttft_ms"]["p99"])},
        "client_bound": client["client_bound"],
        "client_bound_reasons": client["reasons"],
    }


def measure(
    concurrency: int = 50, interval_ms: float = 10.0, tokens: int = 200, rounds: int = 3, pin: bool = True
) -> dict[str, Any]:
    """`figures` of one `run_paced` level."""
    return figures(run_paced(concurrency, interval_ms, tokens, rounds, pin))


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=positive_int, default=50)
    ap.add_argument("--interval-ms", type=non_negative_float, default=10.0, help="per-stream token interval")
    ap.add_argument("--tokens", type=positive_int, default=200, help="content chunks per response")
    add_requests_per_stream(ap, type=positive_int, default=3, help="requests per stream")
    ap.add_argument("--no-pin", action="store_true", help="do not pin server and client to separate cores")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--core", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--first-ms", type=non_negative_float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--precise", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--spread", type=positive_int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.serve and args.interval_ms == 0:  # the server's own mode takes 0: unpaced, as fast as it can
        ap.error(f"argument --interval-ms: takes a number above 0 (the offered rate is concurrency / interval), "
                 f"got {args.interval_ms:g}")
    if args.serve:
        first = None if args.first_ms is None else args.first_ms / 1000.0
        serve(args.interval_ms / 1000.0, args.core, first, args.precise, args.spread)
        return
    result = measure(args.concurrency, args.interval_ms, args.tokens, args.requests_per_stream, pin=not args.no_pin)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
