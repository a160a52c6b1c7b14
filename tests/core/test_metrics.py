"""The metric contract (docs/metrics.md) pinned on records with scripted times."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from bench.core import metrics
from bench.core.level_run import ClientHealth, LevelConfig, LevelRun
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.host.cpus.usage import CpuUse

CFG = LevelConfig(base_url="http://127.0.0.1:1", model="m", concurrency=2, requests=4)
HEALTHY = ClientHealth(cpu_share=0.1, loop_lag_p99_ms=1.0, schedule_lag_p99_ms=2.0)


def ok_record(
    index: int = 0,
    *,
    send: float = 0.0,
    chunks: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4),
    end: float | None = None,
    usage: int | None = None,
    prompt_tokens: int | None = None,
    first_byte: float | None = None,
    model: str | None = "m",
) -> RequestRecord:
    return RequestRecord(
        index=index,
        prompt_name=f"p{index}",
        t_sched=send - 0.001,
        t_send=send,
        t_first_byte=first_byte if first_byte is not None else chunks[0] - 0.01,
        t_first_token=chunks[0],
        t_first_answer=chunks[0],
        t_end=end if end is not None else chunks[-1] + 0.01,
        chunk_times=list(chunks),
        usage_completion_tokens=usage,
        usage_prompt_tokens=prompt_tokens,
        finish_reason="stop",
        served_model=model,
        http_status=200,
        done_marker=True,
    )


def failed_record(
    index: int, kind: ErrorType, message: str = "x", status: int | None = None, *, send: float = 0.0
) -> RequestRecord:
    return RequestRecord(
        index=index,
        prompt_name=f"p{index}",
        t_sched=send,
        t_send=send,
        t_end=send + 0.05,
        http_status=status,
        error=RequestError(kind, message, http_status=status, body_head="body" if status else None),
    )


def level(records, warmup=(), health=HEALTHY, cfg=CFG, **kw) -> LevelRun:
    span = metrics.wall_span(records) or (0.0, 0.0)
    return LevelRun(
        config=cfg,
        records=list(records),
        warmup_records=list(warmup),
        t_start=span[0],
        t_end=span[1],
        started_at=1_700_000_000.0,
        partial=kw.get("partial", False),
        stop_reason=kw.get("stop_reason"),
        client=health,
    )


# ------------------------------------------------------------------ per request


def test_request_latencies_from_stamps():
    r = ok_record(send=1.0, chunks=(1.25, 1.30, 1.40, 1.45), end=1.50, first_byte=1.05)
    assert metrics.ttft(r) == pytest.approx(0.25)
    assert metrics.ttfb(r) == pytest.approx(0.05)
    assert metrics.e2el(r) == pytest.approx(0.50)
    assert metrics.schedule_lag(r) == pytest.approx(0.001)
    assert metrics.itl(r) == pytest.approx([0.05, 0.10, 0.05])


def test_e2el_minus_ttft_equals_sum_of_itl_when_stream_ends_at_last_chunk():
    r = ok_record(send=0.0, chunks=(0.2, 0.27, 0.31, 0.5, 0.52), end=0.52)
    assert metrics.e2el(r) - metrics.ttft(r) == pytest.approx(sum(metrics.itl(r)))


def test_tpot_uses_token_count_and_needs_two_tokens():
    r = ok_record(send=0.0, chunks=(0.1, 0.2, 0.3, 0.4), end=0.5)
    assert metrics.tpot(r) == pytest.approx((0.5 - 0.1) / 3)  # chunk count: 4 tokens
    r.usage_completion_tokens = 9  # bundled: 9 tokens in 4 chunks
    assert metrics.tpot(r) == pytest.approx((0.5 - 0.1) / 8)
    one = ok_record(chunks=(0.1,), end=0.2)
    assert metrics.tpot(one) is None
    assert metrics.decode_rate(one) is None


def test_decode_rate_spans_first_token_to_last_chunk():
    r = ok_record(send=0.0, chunks=(0.1, 0.2, 0.3, 0.5), end=0.9, usage=5)
    assert metrics.decode_rate(r) == pytest.approx((5 - 1) / (0.5 - 0.1))  # the tail to [DONE] excluded
    same_read = ok_record(chunks=(0.1, 0.1), usage=2)
    assert metrics.decode_rate(same_read) is None


def test_token_counts_and_source():
    r = ok_record(chunks=(0.1, 0.2, 0.3))
    assert metrics.output_tokens(r) == (3, "chunks") and metrics.input_tokens(r) is None
    r.usage_completion_tokens, r.usage_prompt_tokens = 4, 17
    assert metrics.output_tokens(r) == (4, "usage") and metrics.input_tokens(r) == 17


# ------------------------------------------------------------------ statistics


def test_percentiles_are_numpy_linear_interpolation():
    block = metrics.stats_block(range(1, 101))
    assert block["p99"] == pytest.approx(99.01)  # nearest-rank would say 100
    assert block["p50"] == pytest.approx(50.5)
    assert block["p90"] == pytest.approx(90.1)
    assert block["p95"] == pytest.approx(95.05)
    assert (block["n"], block["min"], block["max"], block["mean"]) == (100, 1.0, 100.0, 50.5)
    assert block["stdev"] == pytest.approx(np.std(np.arange(1, 101)))


def test_stats_block_scale_skips_none_and_empty_is_none():
    assert metrics.stats_block([0.001, None, 0.003], 1000.0)["mean"] == pytest.approx(2.0)
    empty = metrics.stats_block([])
    assert empty["n"] == 0 and all(empty[k] is None for k in empty if k not in ("n", "ci95"))
    # no value bounds a percentile either: each interval's ends are null, beside the n it needs
    assert all(i["low"] is None and i["high"] is None and i["needs_n"] > 0 for i in empty["ci95"].values())


# ------------------------------------------------------------------ per level


def test_throughput_is_token_sum_over_wall_and_excludes_failures_and_warmup():
    a = ok_record(0, send=0.0, chunks=(0.1, 0.2, 0.3), end=1.0, usage=10, prompt_tokens=5)
    b = ok_record(1, send=0.5, chunks=(0.6, 0.7), end=2.0, usage=30, prompt_tokens=7)
    bad = failed_record(2, ErrorType.HTTP_5XX, status=500, send=0.2)
    warm = ok_record(0, send=-5.0, chunks=(-4.0, -3.0), end=-2.0, usage=1000)
    s = metrics.summarize_level(level([a, b, bad], warmup=[warm]))
    assert s["wall_time_s"] == pytest.approx(2.0)  # first t_send 0.0 .. last t_end 2.0
    assert s["output_tokens_total"] == 40
    assert s["output_throughput_tps"] == pytest.approx(40 / 2.0)
    assert s["request_throughput_rps"] == pytest.approx(2 / 2.0)
    assert s["input_tokens_total"] == 12
    assert s["input_throughput_tps"] == pytest.approx(6.0)
    assert s["total_token_throughput_tps"] == pytest.approx(26.0)
    assert (s["num_requests"], s["successful"], s["failed"]) == (3, 2, 1)
    assert s["ttft_ms"]["n"] == 2  # the failed request is not in the latency stats
    assert s["warmup"] == {"requests": 1, "successful": 1, "failed": 0, "wall_time_s": pytest.approx(3.0), "errors": {},
                           "error_samples": {}}


def test_usage_fallback_to_chunks_and_input_unknown():
    a = ok_record(0, chunks=(0.1, 0.2, 0.3), usage=3, prompt_tokens=5)
    b = ok_record(1, chunks=(0.1, 0.2), usage=None, prompt_tokens=None)
    s = metrics.summarize_level(level([a, b]))
    assert s["output_tokens_total"] == 5  # 3 from usage + 2 chunks
    assert s["usage_available"] is False
    assert s["input_tokens_total"] is None
    assert s["input_throughput_tps"] is None and s["total_token_throughput_tps"] is None


def test_tokens_per_chunk_and_itl_per_chunk_flag():
    bundled = [ok_record(i, chunks=(0.1, 0.2, 0.3, 0.4), usage=8) for i in range(3)]
    s = metrics.summarize_level(level(bundled))
    assert s["tokens_per_chunk"] == pytest.approx(2.0) and s["itl_per_chunk"] is True
    assert s["usage_available"] is True and s["chunks_total"] == 12
    plain = [ok_record(i, chunks=(0.1, 0.2, 0.3, 0.4), usage=4) for i in range(3)]
    assert metrics.summarize_level(level(plain))["itl_per_chunk"] is False


def test_chunk_divergence_warning_threshold():
    def run(divergent: int, total: int = 100):
        recs = [
            ok_record(i, chunks=tuple(0.1 * k for k in range(1, 21)), usage=24 if i < divergent else 20)
            for i in range(total)
        ]
        return metrics.chunk_divergence(recs)

    assert run(5) == {"fraction": 0.05, "warning": False}  # exactly 5%: not more than 5%
    assert run(6) == {"fraction": 0.06, "warning": True}
    # the band is inclusive: 21/20 = 1.05 does not diverge
    edge = [ok_record(0, chunks=tuple(0.1 * k for k in range(1, 21)), usage=21)]
    assert metrics.chunk_divergence(edge)["fraction"] == 0.0
    assert metrics.chunk_divergence([ok_record(0)]) == {"fraction": None, "warning": False}


def test_itl_pools_gaps_of_all_successful_requests():
    a = ok_record(0, chunks=(0.0, 0.01, 0.03))
    b = ok_record(1, chunks=(0.0, 0.04))
    s = metrics.summarize_level(level([a, b]))
    assert s["itl_ms"]["n"] == 3
    assert s["itl_ms"]["mean"] == pytest.approx((10 + 20 + 40) / 3)


def test_all_failed_level_gives_none_stats_and_dominant_error():
    recs = [failed_record(i, ErrorType.HTTP_4XX, f"HTTP 404 #{i}", 404, send=0.1 * i) for i in range(7)]
    recs.append(failed_record(7, ErrorType.CONNECT, "refused", send=0.8))
    s = metrics.summarize_level(level(recs))
    assert s["successful"] == 0 and s["failed"] == 8
    for key in ("ttft_ms", "ttfb_ms", "tpot_ms", "itl_ms", "e2el_ms", "decode_tps", "schedule_lag_ms"):
        assert s[key]["n"] == 0 and s[key]["p99"] is None and s[key]["mean"] is None
    assert s["output_throughput_tps"] == 0.0 and s["tokens_per_chunk"] is None
    assert s["usage_available"] is False and s["input_tokens_total"] is None
    assert s["errors"] == {"http_4xx": 7, "connect": 1}
    assert s["dominant_error"] == {"type": "http_4xx", "http_status": 404, "count": 7}
    assert len(s["error_samples"]["http_4xx"]) == 5  # capped
    assert s["error_samples"]["http_4xx"][0] == {
        "message": "HTTP 404 #0",
        "http_status": 404,
        "body_head": "body",
        "prompt_name": "p0",
    }
    assert s["error_samples"]["connect"][0]["message"] == "refused"


def test_empty_level_does_not_crash():
    s = metrics.summarize_level(level([]))
    assert s["num_requests"] == 0 and s["wall_time_s"] == 0.0
    assert s["output_throughput_tps"] is None and s["dominant_error"] is None
    assert s["warmup"]["requests"] == 0


def test_error_samples_keep_distinct_messages():
    recs = [failed_record(i, ErrorType.TIMEOUT, "timed out (request_timeout_s=300)") for i in range(4)]
    assert len(metrics.error_samples(recs)["timeout"]) == 1


def host(cpus_busy: float = 0.2, wait: float = 0.01, pinned_to: tuple[int, ...] | None = None) -> CpuUse:
    """How a 2-CPU host looked to the client over a level."""
    return CpuUse(cpu_share=0.0, host_cpus=2, host_busy=2 * cpus_busy, client_cpus=pinned_to or (0, 1),
                  client_cpus_busy=cpus_busy, run_queue_wait_share=wait, involuntary_switches=40,
                  cpu_pressure_some=0.5)


@pytest.mark.parametrize(
    "health, limited_by, reason",
    [
        (ClientHealth(0.10, 1.0, 2.0, host=host(0.99)), None, None),  # a busy host, a prompt client: fine
        (ClientHealth(0.85, 1.0, 2.0), "client", "client CPU 0.85"),
        (ClientHealth(0.93, 80.0, 60.0, host=host(0.99)), "client", "client CPU 0.93"),  # its own work first
        (ClientHealth(0.07, 775.0, 51.0, host=host(0.99)), "host", "schedule lag p99 51.0 ms"),  # not let run
        (ClientHealth(0.07, 775.0, 120.0, host=host(0.5, wait=0.3)), "host", "schedule lag p99 120.0 ms"),
        (ClientHealth(0.07, 775.0, 120.0, host=host(0.3)), "unknown", "schedule lag p99 120.0 ms"),
        (ClientHealth(0.07, 775.0, 120.0), "unknown", "schedule lag p99 120.0 ms"),  # no evidence: no claim
        (ClientHealth(0.10, 90.0, None), None, None),  # loop lag alone is reported, not a trigger
    ],
)
def test_a_late_client_is_told_apart_from_a_starved_one(health, limited_by, reason):
    """Saturated by its own work (CPU share above the limit) is `client_bound`; late with CPU to
    spare while its CPUs were busy or it waited on a run queue is `host`; late with no such sign
    is `unknown`. Every one is recorded with its evidence."""
    client = metrics.summarize_level(level([ok_record()], health=health))["client"]
    assert client["limited_by"] == limited_by
    assert client["client_bound"] is (limited_by == "client")
    assert (client["cpu_share"], client["loop_lag_p99_ms"], client["schedule_lag_p99_ms"]) == (
        health.cpu_share,
        health.loop_lag_p99_ms,
        health.schedule_lag_p99_ms,
    )
    if reason:
        assert any(reason in r for r in client["reasons"])
    else:
        assert client["reasons"] == []
    if health.host is not None:
        assert (client["cpus_busy"], client["host_cpu_busy"], client["host_cpus"]) == (
            health.host.client_cpus_busy, health.host.host_busy, 2)
        assert (client["run_queue_wait_share"], client["involuntary_switches"]) == (
            health.host.run_queue_wait_share, 40)


def test_the_client_block_says_where_the_client_ran():
    pinned = metrics.summarize_level(level([ok_record()], health=ClientHealth(0.1, 1.0, 2.0, pinned=True,
                                                                              host=host(pinned_to=(1,)))))
    assert (pinned["client"]["pinned"], pinned["client"]["cpus"]) == (True, [1])
    unknown = metrics.summarize_level(level([ok_record()]))["client"]
    assert unknown["pinned"] is False and unknown["cpus"] is None and unknown["host_cpu_busy"] is None


def test_client_limits_are_parameters():
    run = level([ok_record()], health=ClientHealth(0.5, 1.0, 20.0, host=host(0.99)))
    assert metrics.summarize_level(run)["client"]["limited_by"] is None
    assert metrics.summarize_level(run, client_cpu_limit=0.4)["client"]["limited_by"] == "client"
    assert metrics.summarize_level(run, schedule_lag_limit_ms=10.0)["client"]["limited_by"] == "host"


def named(*names: str) -> list[RequestRecord]:
    return [replace(ok_record(i), prompt_name=name) for i, name in enumerate(names)]


@pytest.mark.parametrize(
    "names, nonce, warmed_by, unique, repeats, may_hit",
    [
        (("a", "b", "c"), None, None, 3, 0, False),  # the default: each prompt once, a fresh server
        (("a", "b", "a", "b", "a"), None, None, 2, 3, True),  # --requests above the prompts
        (("a", "b", "c"), None, "an earlier level", 3, 0, True),  # --share-server, a later level
        (("a", "b", "a", "b"), "run c8", "an earlier level", 2, 2, False),  # --unique-prompts: nothing shared
    ],
)
def test_prompt_reuse_counts_what_a_cache_could_serve(names, nonce, warmed_by, unique, repeats, may_hit):
    cfg = replace(CFG, nonce=nonce, server_warmed=warmed_by)
    reuse = metrics.summarize_level(level(named(*names), cfg=cfg))["prompt_reuse"]
    assert reuse == {"requests": len(names), "unique_prompts": unique, "repeats": repeats,
                     "unique_prefixes": nonce is not None, "server_warmed": warmed_by is not None,
                     "warmed_by": warmed_by, "may_hit_cache": may_hit}


def test_summary_keys_served_models_and_partial():
    recs = [ok_record(0, model="b"), ok_record(1, model="a"), ok_record(2, model="b"), ok_record(3, model=None)]
    s = metrics.summarize_level(level(recs, partial=True, stop_reason="deadline"))
    assert list(s) == [
        "concurrency", "num_requests", "successful", "failed", "partial", "stop_reason", "wall_time_s", "started_at",
        "output_tokens_total", "input_tokens_total", "chunks_total", "output_throughput_tps", "request_throughput_rps",
        "input_throughput_tps", "total_token_throughput_tps", "tokens_per_chunk", "usage_available", "itl_per_chunk",
        "chunk_divergence", "audits", "ttft_ms", "ttfb_ms", "tpot_ms", "itl_ms", "e2el_ms", "decode_tps",
        "schedule_lag_ms", "prefix_cache", "errors", "error_samples", "dominant_error", "served_models", "client",
        "prompt_reuse", "warmup", "throughput_ci95", "uncertainty",
    ]  # fmt: skip
    assert s["served_models"] == ["a", "b"]
    assert s["partial"] is True and s["stop_reason"] == "deadline"
    assert s["concurrency"] == 2 and s["started_at"] == 1_700_000_000.0


def test_summary_is_json_ready():
    import json

    s = metrics.summarize_level(level([ok_record(0, usage=4, prompt_tokens=3), failed_record(1, ErrorType.TRUNCATED)]))
    decoded = json.loads(json.dumps(s, allow_nan=False))
    assert decoded["ttft_ms"]["p50"] == pytest.approx(s["ttft_ms"]["p50"])
    assert not any(isinstance(v, float) and math.isnan(v) for v in s.values())


# ------------------------------------------------------------------ reasoning models (bench.core.metrics.reasoning)


def thinking(index: int, answer_from: int | None, reasoning_tokens: int | None, send: float = 0.0) -> RequestRecord:
    """An ok record of four chunks whose answer starts at chunk `answer_from` (None: it never came)."""
    r = ok_record(index, send=send, chunks=(send + 0.1, send + 0.2, send + 0.3, send + 0.4), usage=6)
    r.t_first_answer = None if answer_from is None else r.chunk_times[answer_from]
    r.usage_reasoning_tokens = reasoning_tokens
    return r


def test_ttfa_is_the_first_answer_after_the_send_and_none_without_one():
    assert metrics.ttfa(thinking(0, 2, None, send=1.0)) == pytest.approx(0.3)
    assert metrics.ttfa(thinking(0, None, 4)) is None
    plain = ok_record(send=0.05)
    assert metrics.ttfa(plain) == metrics.ttft(plain) == pytest.approx(0.05)


def test_a_level_that_reasoned_gets_ttfa_and_reasoning_beside_ttft():
    records = [thinking(0, 2, 2), thinking(1, None, 4, send=1.0), thinking(2, 0, 0, send=2.0),
               failed_record(3, ErrorType.TRUNCATED)]
    s = metrics.summarize_level(level(records))
    keys = list(s)
    assert keys[keys.index("ttft_ms"):keys.index("ttft_ms") + 4] == ["ttft_ms", "ttfa_ms", "reasoning", "ttfb_ms"]
    assert s["ttfa_ms"]["n"] == 2 and s["ttfa_ms"]["mean"] == pytest.approx(200.0)  # 300 ms and 100 ms
    assert s["ttft_ms"]["n"] == 3 and s["ttft_ms"]["mean"] == pytest.approx(100.0)
    assert s["reasoning"] == {"requests": 2, "unanswered": 1, "chunks_total": 2 + 4, "answer_chunks_total": 2 + 4,
                              "tokens_total": 6, "tokens_mean": 2.0}
    assert s["successful"] == 3 and s["output_tokens_total"] == 18  # reasoning tokens are output tokens


def test_reasoning_tokens_total_needs_every_successful_request_to_report_them():
    s = metrics.summarize_level(level([thinking(0, 2, None), thinking(1, 1, 3, send=1.0)]))
    assert s["reasoning"]["tokens_total"] is None and s["reasoning"]["tokens_mean"] is None
    assert s["reasoning"]["chunks_total"] == 3 and s["reasoning"]["requests"] == 2


def test_a_level_without_reasoning_has_neither_block():
    s = metrics.summarize_level(level([ok_record(0, usage=4), thinking(1, 0, 0, send=1.0)]))
    assert "ttfa_ms" not in s and "reasoning" not in s
