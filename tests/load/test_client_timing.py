"""The client's timing error at 10,000 chunks/s offered on one client process (issue 16).

The paced null server of bench/perf/client_overhead.py, in its precise mode (bench.perf.null_server.pacer),
streams 100 responses at once, a chunk every 10 ms each (the opening round's streams started
spread over a stream's length, later ones keeping their slot's phase, so that 10,000 chunks/s is
what the server writes, checked against its log), and logs the moment it handed each chunk
to the kernel (`GET /log`, on the same CLOCK_MONOTONIC as the client's perf_counter); a stream's
first chunk names the stream, which ties a record to its log. Against those moments:

- stamp delay = a chunk's stamp - its write: how late the client saw it (loopback included);
- ITL error   = |client's gap - server's gap| between two chunks of a stream: what the client
                adds to an ITL, the figure issue 16 bounds at 0.5 ms p99;
- TTFT error  = |client's TTFT - (first write - request read)|: what it adds to a TTFT,
                the request's own trip to the server included, and the server's wait to accept
                and read it;
- client's TTFT error = (t_written - t_send) + (first chunk's stamp - its write): what the client
                itself adds to a TTFT, its connect and send path and its stamp of the first
                chunk; the goal of issue 16 bounds it at 0.5 ms p99 after the opening round (in
                which all 100 streams are sent at once, and the last waits for 99 connects).

A busy host makes any client late, so the test is marked `perf`, which `make test`,
`make test-fast` and CI leave out; it fails printing what it measured:

    .venv/bin/python -m pytest tests/load/test_client_timing.py -m perf -p no:cacheprovider -s
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
from typing import NamedTuple
from urllib.parse import urlsplit

import pytest

from bench.core.metrics import percentile, summarize_level
from bench.core.records import RequestRecord
from bench.host.cpus import placement
from bench.load import LevelConfig, run_level
from bench.perf.client_figures import steady_write_rate
from bench.perf.null_server.server import MODEL, paced_server
from bench.setup.prompts import Prompt

pytestmark = [pytest.mark.perf, pytest.mark.integration, pytest.mark.timeout(300)]
STREAMS, INTERVAL_MS, FIRST_MS, TOKENS, ROUNDS = 100, 10.0, 20.0, 200, 6
ITL_P99_LIMIT_MS = TTFT_P99_LIMIT_MS = 0.5
OFFERED = STREAMS * 1000 / INTERVAL_MS  # chunks/s
KEPT = 0.95  # the server must write at least this share of OFFERED, or the run is not at that rate


def server_get(base_url: str, path: str) -> dict:
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    try:
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


class Errors(NamedTuple):
    """Milliseconds, each list sorted."""

    delays: list[float]  # every chunk's stamp delay
    itl: list[float]  # every gap's ITL error
    ttft: list[float]  # every request's TTFT error after the opening round, against the server's log
    own: list[float]  # the same requests' client's TTFT error
    opening: list[float]  # the opening round's client's TTFT error


def errors(records: list[RequestRecord], log: dict[str, list[float]]) -> Errors:
    """Every chunk of every record against the server's log of its stream."""
    e = Errors([], [], [], [], [])
    for r in records:
        found = re.match(r" #(\d+)", r.output_text_head)
        assert found, f"record {r.index} names no stream: {r.output_text_head[:40]!r}"
        received, *writes = log[found.group(1)]
        assert len(writes) == len(r.chunk_times), (r.index, len(writes), len(r.chunk_times))
        assert r.t_send is not None and r.t_written is not None and r.t_first_token is not None, r.index
        late = [(t - w) * 1e3 for t, w in zip(r.chunk_times, writes, strict=True)]
        e.delays.extend(late)
        e.itl.extend(abs(b - a) for a, b in itertools.pairwise(late))
        own = (r.t_written - r.t_send) * 1e3 + late[0]
        if r.index < STREAMS:
            e.opening.append(own)
        else:
            e.ttft.append(abs((r.t_first_token - r.t_send) - (writes[0] - received)) * 1e3)
            e.own.append(own)
    for values in e:
        values.sort()
    return e


def test_itl_and_ttft_error_p99_at_10000_chunks_per_s_are_under_half_a_millisecond(record_property):
    cpus = placement.usable_cpus() if placement.supported() else []
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs: the server's and the client's")
    server_cpu, client_cpus = cpus[-1], tuple(cpus[:-1])
    prompts = [Prompt(name=f"p{i}", messages=({"role": "user", "content": "go"},), max_tokens=TOKENS)
               for i in range(STREAMS)]
    warm = [Prompt(name="warm", messages=({"role": "user", "content": "go"},), max_tokens=5)]
    with paced_server(INTERVAL_MS, server_cpu, first_ms=FIRST_MS, precise=True, spread=STREAMS) as (base_url, _):
        cfg = LevelConfig(base_url=base_url, model=MODEL, concurrency=STREAMS, requests=STREAMS * ROUNDS, warmup=1,
                          extra_body={"stream_options": {"include_usage": True}}, client_cpus=client_cpus)
        run = run_level(cfg, prompts, warm)
        lateness, log = server_get(base_url, "/stats"), server_get(base_url, "/log")
    assert all(r.ok and r.n_chunks == TOKENS for r in run.records), [r.error for r in run.records if not r.ok][:3]
    e = errors(run.records, log)
    s = summarize_level(run)
    delivered = s["chunks_total"] / s["wall_time_s"]
    itl_p99, own_p99 = percentile(e.itl, 99), percentile(e.own, 99)
    wrote = steady_write_rate(log, STREAMS) or 0.0

    def p(values: list[float]) -> str:
        return f"{percentile(values, 50):.3f}/{percentile(values, 99):.3f} ms"

    figures = (f"ITL error p50/p99 {p(e.itl)} over {len(e.itl)} gaps; stamp delay p50/p99 {p(e.delays)}; client's "
               f"TTFT error p50/p99 {p(e.own)} over {len(e.own)} requests (opening round: {p(e.opening)}); TTFT "
               f"error against the server's read {p(e.ttft)}; the server wrote {wrote:,.0f} chunks/s once every "
               f"stream ran ({OFFERED:,.0f} offered; {delivered:,.0f} delivered over the level's wall time, ramps "
               f"included); client CPU {s['client']['cpu_share']:.2f} of a core on CPUs {client_cpus}, loop lag p99 "
               f"{s['client']['loop_lag_p99_ms']:.2f} ms; server on CPU {server_cpu}, late on its schedule by p99 "
               f"{lateness.get('p99_us')} us; host load {os.getloadavg()[0]:.2f}")
    print(figures)
    record_property("itl_error_p99_ms", round(itl_p99, 3))
    record_property("server_chunks_per_s", round(wrote))
    record_property("ttft_error_p99_ms", round(percentile(e.ttft, 99), 3))
    record_property("client_ttft_error_p99_ms", round(own_p99, 3))
    assert wrote >= KEPT * OFFERED, f"the run was not at {OFFERED:,.0f} chunks/s: {figures}"
    assert itl_p99 < ITL_P99_LIMIT_MS, f"ITL error p99 {itl_p99:.3f} ms >= {ITL_P99_LIMIT_MS} ms: {figures}"
    assert own_p99 < TTFT_P99_LIMIT_MS, \
        f"client's TTFT error p99 {own_p99:.3f} ms >= {TTFT_P99_LIMIT_MS} ms: {figures}"
