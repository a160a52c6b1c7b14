"""The load generator against the zero-work, paced SSE server of bench/perf/client_overhead.py
(a separate process): 5 streams x 40 chunks, 10 ms apart, three rounds.

What is checked holds however busy the host is: every chunk arrives and is timed, in order,
within its request's stamps, and the counts are exact. How fast the client keeps up (delivered
share of the offered chunks/s, its CPU, schedule and loop lag) depends on the host: those
figures are reported (`record_property`, and `python -m bench.perf.client_overhead` at full
scale), never asserted.
"""

from __future__ import annotations

import pytest

from bench.perf.client_overhead import figures, run_paced

STREAMS, TOKENS, ROUNDS = 5, 40, 3


@pytest.mark.timeout(120)
def test_every_paced_chunk_arrives_timed_and_in_order(record_property):
    paced = run_paced(concurrency=STREAMS, interval_ms=10.0, tokens=TOKENS, rounds=ROUNDS, pin=False)
    run = paced.run
    assert [r.index for r in run.records] == list(range(STREAMS * ROUNDS))
    assert all(r.ok for r in run.records), [r.error for r in run.records if not r.ok]
    assert not run.partial and len(run.warmup_records) == 1 and run.warmup_records[0].ok
    for r in run.records:
        assert r.n_chunks == r.usage_completion_tokens == TOKENS and r.usage_prompt_tokens == 1
        assert r.done_marker and r.finish_reason == "length" and r.served_model == "perf-model"
        assert r.chunk_times == sorted(r.chunk_times)
        assert r.t_sched <= r.t_send <= r.t_first_byte <= r.t_first_token == r.chunk_times[0]
        assert r.chunk_times[-1] <= r.t_end
    sends = sorted(r.t_send for r in run.records)
    assert run.t_start == sends[0] and run.t_end == max(r.t_end for r in run.records)

    result = figures(paced)
    assert (result["successful"], result["failed"]) == (STREAMS * ROUNDS, 0)
    assert result["offered_chunks_per_s"] == 500.0
    assert result["config"]["tokens_per_response"] == TOKENS and result["config"]["server_core"] is None
    assert result["delivered_chunks_per_s"] > 0 and result["itl_ms"]["p50"] > 0
    for key in ("delivered_fraction", "client_cpu_share", "loop_lag_p99_ms"):
        record_property(key, result[key])
    record_property("schedule_lag_p99_ms", result["schedule_lag_ms"]["p99"])
    record_property("itl_p50_ms", result["itl_ms"]["p50"])
