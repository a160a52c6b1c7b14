"""A level's audits (docs/metrics.md, Audits) on hand-built records: each outcome of the token
accounting and the output length audit, the caching audit's decision on hand-built TTFTs, the
annotations they give the cell (never a verdict change), and the lines the reports print."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest

from bench.core import metrics
from bench.core.level_run import LevelConfig
from bench.core.metrics import audits
from bench.core.metrics.stats.intervals import t_quantile
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.core.verdicts import Evidence, Verdict, classify
from tests.core.test_metrics import CFG, level

EOS = replace(CFG, extra_body={"ignore_eos": True})


def rec(i: int, *, chunks: int = 8, usage: int | None = 8, max_tokens: int | None = 8,
        finish: str | None = "length", failed: bool = False) -> RequestRecord:
    times = [0.1 + 0.01 * k for k in range(chunks)]
    return RequestRecord(index=i, prompt_name=f"p{i}", t_sched=0.0, t_send=0.0, t_first_byte=0.05,
                         t_first_token=times[0] if times else None, t_end=(times[-1] if times else 0.1) + 0.01,
                         chunk_times=times, usage_completion_tokens=usage, finish_reason=finish, http_status=200,
                         done_marker=True, max_tokens=max_tokens,
                         error=RequestError(ErrorType.TIMEOUT, "timed out after 1 s") if failed else None)


def audited(records: list[RequestRecord], cfg: LevelConfig = EOS, **kw) -> audits.Audits:
    return metrics.summarize_level(level(records, cfg=cfg), **kw)["audits"]


# ------------------------------------------------------------------ token accounting


def test_token_accounting_passes_when_usage_matches_the_chunks():
    block = audited([rec(i) for i in range(20)])["token_accounting"]
    assert block == {"outcome": "pass", "requests": 20, "diverging": 0, "fraction": 0.0, "usage_tokens": 160,
                     "chunks": 160, "note": None}


def test_one_diverging_request_in_twenty_is_within_the_threshold():
    records = [rec(i) for i in range(19)] + [rec(19, usage=16)]  # 5%: not above 5%
    block = audited(records)["token_accounting"]
    assert block["outcome"] == "pass" and block["diverging"] == 1 and block["fraction"] == 0.05


def test_token_accounting_diverges_with_its_share_and_what_stays_comparable():
    records = [rec(i) for i in range(6)] + [rec(i, chunks=2, usage=8) for i in range(6, 10)]
    lv = metrics.summarize_level(level(records, cfg=EOS))
    block = lv["audits"]["token_accounting"]
    assert block["outcome"] == "diverges" and block["requests"] == 10 and block["diverging"] == 4
    assert block["fraction"] == 0.4 and block["usage_tokens"] == 80 and block["chunks"] == 56
    assert block["note"] == ("4 of 10 successful requests (40%) report usage.completion_tokens outside 0.95-1.05x "
                             "their chunks (80 tokens in 56 chunks): per-request ITL is per chunk and not comparable "
                             "across frameworks; TTFT, TPOT and throughput are (TPOT and throughput count usage "
                             "tokens)")
    assert lv["chunk_divergence"] == {"fraction": 0.4, "warning": True}  # the same requests, the same share


def test_token_accounting_says_when_no_usage_came():
    block = audited([rec(i, usage=None) for i in range(4)])["token_accounting"]
    assert block["outcome"] == "no usage" and block["requests"] == 0 and block["fraction"] is None
    assert "output tokens are chunk counts" in (block["note"] or "")


def test_failed_requests_are_not_audited():
    records = [rec(0), rec(1, chunks=2, usage=8, failed=True)]
    block = audited(records)["token_accounting"]
    assert block["outcome"] == "pass" and block["requests"] == 1


# ------------------------------------------------------------------ output length


def test_output_length_is_honoured_when_every_request_reached_its_max_tokens():
    records = [rec(i, chunks=n, usage=n, max_tokens=n) for i, n in enumerate((64, 256, 64, 256))]
    block = audited(records)["output_length"]
    assert block == {"outcome": "honoured", "ignore_eos": True, "requests": 4, "short": 0, "max_tokens_min": 64,
                     "max_tokens_max": 256, "short_min_tokens": None, "short_median_tokens": None,
                     "short_finish_reasons": {}, "tokens_source": "usage", "note": None}


def test_output_length_counts_the_requests_that_stopped_short_and_by_how_much():
    records = [rec(0), rec(1, chunks=2, usage=2, finish="stop"), rec(2), rec(3, chunks=5, usage=5, finish="stop"),
               rec(4, chunks=3, usage=3, finish="stop")]
    block = audited(records)["output_length"]
    assert block["outcome"] == "stopped short" and (block["short"], block["requests"]) == (3, 5)
    assert block["short_min_tokens"] == 2 and block["short_median_tokens"] == 3.0
    assert block["short_finish_reasons"] == {"stop": 3}
    assert block["note"] == ("3 of 5 successful requests stopped short of max_tokens (8) though ignore_eos was sent: "
                             "fewest 2 output tokens, median 3 (by usage; finish_reason stop x3)")


def test_output_length_counts_chunks_without_usage_and_uses_each_requests_own_max_tokens():
    records = [rec(0, chunks=4, usage=None, max_tokens=4), rec(1, chunks=4, usage=None, max_tokens=16)]
    block = audited(records)["output_length"]
    assert block["outcome"] == "stopped short" and block["short"] == 1 and block["tokens_source"] == "chunks"
    assert (block["max_tokens_min"], block["max_tokens_max"]) == (4, 16) and "max_tokens (4-16)" in block["note"]


def test_output_length_does_not_apply_without_ignore_eos_and_says_why():
    block = audited([rec(0, chunks=2, usage=2)], cfg=CFG)["output_length"]
    assert block["outcome"] == "not applicable" and not block["ignore_eos"] and block["short"] == 0
    assert block["note"] == audits.NOT_SENT and "differ by design" in block["note"]
    why = "ignore_eos not sent: the x adapter does not declare that its server honours it"
    assert audited([rec(0)], cfg=CFG, not_sent=why)["output_length"]["note"] == why


def test_output_length_does_not_apply_without_a_recorded_max_tokens_or_a_success():
    assert audited([rec(0, max_tokens=None)])["output_length"]["note"] == (
        "no successful request recorded the max_tokens it asked for")
    block = audited([rec(0, failed=True)])["output_length"]
    assert block["outcome"] == "not applicable" and block["note"] == "no successful request"


def test_a_record_knows_its_max_tokens_and_its_sidecar_line_says_it():
    assert rec(0, max_tokens=64).to_json()["max_tokens"] == 64
    assert "max_tokens" not in rec(0, max_tokens=None).to_json()  # an earlier record's line is as it was


# ------------------------------------------------------------------ the cell: annotations, never a verdict


def test_fired_audits_annotate_the_cell_and_leave_its_verdict():
    fine = [rec(i) for i in range(10)]
    ok = classify(Evidence(levels=(metrics.summarize_level(level(fine, cfg=EOS)),)))
    bundled = [rec(i, chunks=2, usage=8) for i in range(10)]
    short = [rec(i, chunks=3, usage=3, finish="stop") for i in range(10)]
    for records, note in ((bundled, audits.TOKEN_ACCOUNTING), (short, audits.SHORT_OUTPUT)):
        got = classify(Evidence(levels=(metrics.summarize_level(level(records, cfg=EOS)),)))
        assert got.verdict is Verdict.OK == ok.verdict and note in got.annotations
    assert not {audits.TOKEN_ACCOUNTING, audits.SHORT_OUTPUT} & set(ok.annotations)


def test_an_earlier_level_without_audits_annotates_nothing():
    lv = metrics.summarize_level(level([rec(i, chunks=2, usage=8) for i in range(4)], cfg=EOS))
    del lv["audits"]
    assert audits.fired([lv]) == () and audits.audit_lines([lv]) == []


def test_the_reports_lines_name_each_fired_level_and_group_what_was_not_audited():
    short = metrics.summarize_level(level([rec(0), rec(1, chunks=2, usage=2, finish="stop")], cfg=EOS))
    plain = [metrics.summarize_level(level([rec(0)], cfg=replace(CFG, concurrency=c))) for c in (4, 8)]
    failed = metrics.summarize_level(level([rec(0, failed=True)], cfg=replace(CFG, concurrency=16)))
    lines = audits.audit_lines([short, *plain, failed])  # c=16 had no success: nothing audited there
    assert lines == [f"c=2: output length stopped short: {short['audits']['output_length']['note']}",
                     f"c=4, 8: output length not applicable: {audits.NOT_SENT}"]


# ------------------------------------------------------------------ the caching audit (--cache-audit)


FIRST = [0.100, 0.200, 0.050, 0.120, 0.080, 0.150, 0.060, 0.090]  # s, each prompt's first TTFT


def test_repeats_well_below_their_first_ttft_are_cached_with_the_paired_interval():
    ratios = [0.50, 0.40, 0.60, 0.45, 0.55, 0.50, 0.35, 0.65]
    block = audits.cache_audit(FIRST, [f * r for f, r in zip(FIRST, ratios, strict=True)])
    logs = [math.log(r) for r in ratios]
    half = t_quantile(7) * statistics.stdev(logs) / math.sqrt(8)
    assert block["outcome"] == "cached" and (block["prompts"], block["pairs"]) == (8, 8)
    assert block["ratio"] == pytest.approx(math.exp(statistics.fmean(logs)))
    assert block["ratio_ci95"] == pytest.approx({"low": math.exp(statistics.fmean(logs) - half),
                                                 "high": math.exp(statistics.fmean(logs) + half)})
    assert block["first_ttft_ms"] == pytest.approx([f * 1000 for f in FIRST])
    assert block["first_median_ms"] == pytest.approx(95.0) and "measures the cache" in block["note"]


def test_the_rule_is_the_intervals_upper_end_not_the_point():
    # the geometric mean is 0.84 (16% faster), but two prompts came back slower: chance explains it
    ratios = [0.5, 1.3, 0.6, 1.2, 0.7, 0.9, 0.8, 1.0]
    block = audits.cache_audit(FIRST, [f * r for f, r in zip(FIRST, ratios, strict=True)])
    assert block["ratio"] < audits.CACHE_RATIO < block["ratio_ci95"]["high"]
    assert block["outcome"] == "no cache seen" and "not shown to be at least 10% faster" in block["note"]
    steady = audits.cache_audit(FIRST, [f * 0.85 for f in FIRST])  # every prompt 15% faster: no doubt left
    assert steady["outcome"] == "cached" and steady["ratio_ci95"]["high"] == pytest.approx(0.85)
    same = audits.cache_audit(FIRST, [f * 0.95 for f in FIRST])
    assert same["outcome"] == "no cache seen" and same["ratio"] == pytest.approx(0.95)


def test_a_failed_request_leaves_its_prompt_out_and_too_few_pairs_decide_nothing():
    repeat = [f / 2 for f in FIRST]
    some = audits.cache_audit([None, *FIRST[1:]], [*repeat[:7], None])  # prompts 0 and 7 lack a pair
    assert (some["outcome"], some["pairs"], some["first_ttft_ms"][0], some["repeat_ttft_ms"][7]) == (
        "cached", 6, None, None)
    few = audits.cache_audit(FIRST[:4] + [None] * 4, repeat[:3] + [None] * 5)
    assert (few["outcome"], few["pairs"], few["ratio"], few["ratio_ci95"]) == ("not run", 3, None, None)
    assert few["note"] == "3 of 8 prompts had a TTFT both times; the audit needs 4"
    assert few["repeat_ttft_ms"][:3] == pytest.approx([50.0, 100.0, 25.0])  # what was measured stays


def test_cached_annotates_the_cell_never_its_verdict_and_each_outcome_has_its_line():
    lv = metrics.summarize_level(level([rec(i) for i in range(10)], cfg=EOS))
    plain = classify(Evidence(levels=(lv,)))
    blocks = {"cached": audits.cache_audit(FIRST, [f / 2 for f in FIRST]),
              "no cache seen": audits.cache_audit(FIRST, FIRST),
              "not run": audits.cache_not_run("the cell stopped before its last level ended: capped")}
    for outcome, block in blocks.items():
        got = classify(Evidence(levels=({**lv, "audits": {**lv["audits"], "cache": block}},)))
        assert got.verdict is plain.verdict and (audits.CACHED in got.annotations) is (outcome == "cached")
        assert audits.audit_lines([{**lv, "audits": {**lv["audits"], "cache": block}}]) == [
            f"c=2: cache audit {outcome}: {block['note']}"]
    assert audits.CACHED not in plain.annotations
