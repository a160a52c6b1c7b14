"""A level's audits (docs/metrics.md, Audits) on hand-built records: each outcome of the token
accounting and the output length audit, the annotations they give the cell (never a verdict
change), and the lines the reports print."""

from __future__ import annotations

from dataclasses import replace

from bench.core import metrics
from bench.core.level_run import LevelConfig
from bench.core.metrics import audits
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
