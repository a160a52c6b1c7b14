"""Benchmark of the whole client's CPU per chunk: `run_level` (whatever transport it uses) against
the unpaced null server of bench/perf/client_overhead.py, in a process of its own.

The timer is this process's CPU time (`time.process_time`: every thread of the client, none of
the server's), so a busy host slows the round but hardly changes the figure. It fails on nothing
about speed: pytest-benchmark keeps the figures, and comparing them against a saved run is opt-in:

    pytest tests/perf/test_client_benchmark.py -p no:cacheprovider --benchmark-autosave         # a baseline
    pytest tests/perf/test_client_benchmark.py -p no:cacheprovider --benchmark-compare \\
        --benchmark-compare-fail=median:15%                                                  # against it

`extra_info.us_per_chunk_median` is the round's CPU over its chunks, the level's fixed cost (its
event loop, session, warm-up request, samplers) included; `cellbench perf compare` has the figure
with start-up cancelled out, beside vLLM's client.
"""

from __future__ import annotations

import time

import pytest

from bench.load import LevelConfig, run_level
from bench.perf.client_overhead import MODEL, paced_server
from bench.setup.prompts import Prompt

STREAMS, TOKENS, ROUNDS = 16, 100, 4  # 6,400 chunks a round


@pytest.mark.benchmark(group="client", timer=time.process_time)
def test_client_cpu_per_chunk(benchmark, record_property):
    prompts = [Prompt(name=f"p{i}", messages=({"role": "user", "content": "go"},), max_tokens=TOKENS)
               for i in range(STREAMS)]
    with paced_server(0.0, first_ms=0.0) as (url, _):
        cfg = LevelConfig(base_url=url, model=MODEL, concurrency=STREAMS, requests=STREAMS * ROUNDS, warmup=1,
                          extra_body={"stream_options": {"include_usage": True}})
        run = benchmark.pedantic(run_level, args=(cfg, prompts, prompts[:1]), rounds=5, warmup_rounds=1)
    assert all(r.ok for r in run.records), [r.error for r in run.records if not r.ok]
    assert [r.n_chunks for r in run.records] == [TOKENS] * (STREAMS * ROUNDS)
    if benchmark.stats is None:  # --benchmark-disable, or under xdist: ran once, not timed
        return
    chunks = STREAMS * ROUNDS * TOKENS
    per_chunk_us = benchmark.stats.stats.median / chunks * 1e6
    benchmark.extra_info["us_per_chunk_median"] = round(per_chunk_us, 2)
    benchmark.extra_info["us_per_chunk_min"] = round(benchmark.stats.stats.min / chunks * 1e6, 2)
    record_property("client_cpu_us_per_chunk_median", round(per_chunk_us, 2))
