"""Several client processes deliver more chunks a second than one, where one is the limit.

A zero-work SSE server that writes each response whole (tests/support/bulk_sse.py: the paced
server of bench/perf/client_overhead.py, writing chunk by chunk, tops out near 57,000 chunks a
second on a core of this 2-core machine, less than one client process reads), pinned to a CPU of
its own, is driven by one client process on one CPU, then by two on two others; the client is
then what limits the chunk rate. With two
free cores, two processes must deliver at least 1.8 times one's rate (issue 16). How fast either
is depends on how idle the host is, so the test is marked `perf`, which CI deselects; it fails
printing both rates, and skips on a host with fewer than 3 CPUs.

    .venv/bin/python -m pytest tests/perf/test_client_procs_perf.py -m perf -p no:cacheprovider -s
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.core.level_run import LevelConfig, LevelRun
from bench.core.metrics import summarize_level
from bench.host.cpus import placement
from bench.load import run_level
from bench.load.procs import ProcPlan, run_level_procs
from tests.support.bulk_sse import MODEL, bulk_server
from tests.support.procs_driver import prompts

pytestmark = [pytest.mark.perf, pytest.mark.integration, pytest.mark.timeout(600)]
STREAMS, TOKENS, ROUNDS, REPEATS = 64, 2000, 3, 3
SPEEDUP = 1.8
SATURATED = 0.9  # the single process's CPU share, of a core, that says it was the limit


def delivered(run: LevelRun) -> tuple[float, float]:
    """(chunks/s over the level's wall time, the busiest client process's CPU share)."""
    s = summarize_level(run)
    assert s["failed"] == 0, s["errors"]
    return s["chunks_total"] / s["wall_time_s"], s["client"]["cpu_share"]


def test_two_client_processes_deliver_at_least_1_8_times_one(record_property):
    cpus = placement.usable_cpus()
    if not placement.supported() or len(cpus) < 3:
        pytest.skip(f"needs 3 CPUs (a server's and 2 free for the client); this host has {len(cpus)}")
    server, one, two = cpus[-1], cpus[0], cpus[1]
    with bulk_server(server) as base_url:
        cfg = LevelConfig(base_url=base_url, model=MODEL, concurrency=STREAMS, requests=STREAMS * ROUNDS, warmup=1,
                          extra_body={"stream_options": {"include_usage": True}})
        work, warm = prompts(STREAMS, TOKENS), prompts(1, 5, "w")
        single, split = [], []
        for _ in range(REPEATS):  # alternated, so that a change in the host's load meets both
            single.append(delivered(run_level(replace(cfg, client_cpus=(one,)), work, warm)))
            both = replace(cfg, client_cpus=(one, two))
            split.append(delivered(run_level_procs(both, work, warm, ProcPlan(2, ((one,), (two,)), "perf"))))
    rate_1, rate_2 = max(r for r, _ in single), max(r for r, _ in split)
    figures = (f"one process on CPU {one}: {rate_1:,.0f} chunks/s (runs: {[round(r) for r, _ in single]}, client "
               f"CPU {[round(c, 2) for _, c in single]}); two on CPUs {one},{two}: {rate_2:,.0f} chunks/s (runs: "
               f"{[round(r) for r, _ in split]}, busiest client CPU {[round(c, 2) for _, c in split]}); server on "
               f"CPU {server}; ratio {rate_2 / rate_1:.2f}")
    print(figures)
    record_property("chunks_per_s_one_process", round(rate_1))
    record_property("chunks_per_s_two_processes", round(rate_2))
    # Below about a core, something other than the client set the pace (a busy host, the server):
    # the ratio would not measure what a second process adds.
    assert max(c for _, c in single) >= SATURATED, f"one process was not saturated: {figures}"
    assert rate_2 >= SPEEDUP * rate_1, f"two processes delivered less than {SPEEDUP}x one: {figures}"
