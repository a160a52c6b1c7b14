"""The client roofline at a small scale: 5 streams x 100 chunks/s against the zero-work server
of bench/perf/client_overhead.py (a separate process). At 500 chunks/s the client must deliver
what is offered and keep its own delays far below the client_bound thresholds."""

from __future__ import annotations

import pytest

from bench.perf.client_overhead import measure


@pytest.mark.timeout(20)
def test_client_keeps_up_with_500_chunks_per_second():
    result = measure(concurrency=5, interval_ms=10.0, tokens=40, rounds=3, pin=False)
    assert (result["successful"], result["failed"]) == (15, 0)
    assert result["offered_chunks_per_s"] == 500.0
    assert result["delivered_fraction"] >= 0.95, result
    assert result["schedule_lag_ms"]["p99"] < 50.0, result  # the client_bound threshold
    assert 5.0 <= result["itl_ms"]["p50"] <= 20.0, result  # paced at 10 ms
    assert result["client_cpu_share"] < 0.8, result
    assert not result["client_bound"], result
