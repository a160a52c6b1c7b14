"""Benchmark of the whole client's CPU per chunk: `run_level` (whatever transport it uses) against
the unpaced null server of bench/perf/client_overhead.py, in a process of its own.

The timer is this process's CPU time (`time.process_time`: every thread of the client, none of
the server's), so a busy host slows the round but hardly changes the figure. It fails on nothing
about speed: pytest-benchmark keeps the figures, and comparing them against a saved run is opt-in:

    pytest tests/perf/test_client_benchmark.py -p no:cacheprovider --benchmark-autosave         # a baseline
    pytest tests/perf/test_client_benchmark.py -p no:cacheprovider --benchmark-compare \\
        --benchmark-compare-fail=median:15%                                                  # against it

The second test runs the same level with the cells' server-metrics scraper in the process (off,
every 2 s, every 50 ms) against vLLM's own /metrics text: its CPU counts, as in a cell.

`extra_info.us_per_chunk_median` is the round's CPU over its chunks, the level's fixed cost (its
event loop, session, warm-up request, samplers) included; `cellbench perf compare` has the figure
with start-up cancelled out, beside vLLM's client.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from adapters import vllm
from bench.host.ports import free_port
from bench.load import LevelConfig, run_level
from bench.perf.null_server.server import MODEL, paced_server
from bench.run.scrape.scraper import Scraper
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


@pytest.fixture(scope="module")
def metrics_page(tmp_path_factory):
    """vLLM 0.32.0's own /metrics text (600 lines), served by a process of its own so that serving
    it costs this process nothing: only the scraper's fetch and read count."""
    root = tmp_path_factory.mktemp("metrics")
    (root / "metrics").write_text((Path(__file__).parent.parent / "data" / "server-metrics" /
                                   "vllm-0.32.0-cpu.txt").read_text())
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                             str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("interval_s", [None, 2.0, 0.05], ids=["off", "every-2s", "every-50ms"])
@pytest.mark.benchmark(group="client-scraping", timer=time.process_time)
def test_client_cpu_per_chunk_while_the_server_is_scraped(benchmark, record_property, metrics_page, interval_s,
                                                          tmp_path):
    """The same level as above with the cell's scraper thread in the process, as a cell runs it:
    off, at the cells' 2 s, and at 50 ms (40 times as often). The CPU per chunk with scraping on
    should be within noise of off; the figures go in extra_info for the comparison."""
    prompts = [Prompt(name=f"p{i}", messages=({"role": "user", "content": "go"},), max_tokens=TOKENS)
               for i in range(STREAMS)]

    def level(cfg: LevelConfig) -> Any:
        if interval_s is None:
            return run_level(cfg, prompts, prompts[:1])
        declared = vllm.ADAPTER.server_metrics
        assert declared is not None
        with Scraper(metrics_page, declared, tmp_path / "s.jsonl", interval_s=interval_s) as s:
            s.mark()
            run = run_level(cfg, prompts, prompts[:1])
            s.mark()
        assert s.errors == [] and len(s.scrapes) >= 2, s.errors
        return run

    with paced_server(0.0, first_ms=0.0) as (url, _):
        cfg = LevelConfig(base_url=url, model=MODEL, concurrency=STREAMS, requests=STREAMS * ROUNDS, warmup=1,
                          extra_body={"stream_options": {"include_usage": True}})
        run = benchmark.pedantic(level, args=(cfg,), rounds=7, warmup_rounds=1)
    assert all(r.ok for r in run.records) and [r.n_chunks for r in run.records] == [TOKENS] * (STREAMS * ROUNDS)
    if benchmark.stats is None:
        return
    chunks = STREAMS * ROUNDS * TOKENS
    benchmark.extra_info["us_per_chunk_median"] = round(benchmark.stats.stats.median / chunks * 1e6, 2)
    benchmark.extra_info["us_per_chunk_min"] = round(benchmark.stats.stats.min / chunks * 1e6, 2)
    record_property(f"client_cpu_us_per_chunk_scraped_{interval_s}", benchmark.extra_info["us_per_chunk_median"])
