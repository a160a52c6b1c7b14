"""Reasoning models: TTFA beside TTFT, reasoning tokens and chunks, per request and per level.

Scripted SSE streams through `ChatStream` (exact stamps), a level summary, the schema and the
reports; then a real cell against the suite's fault server in its `reasoning` mode (reasoning
deltas, then the answer, usage counting the reasoning tokens), in both of test_faults.py's forms.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import get_type_hints

import psutil
import pytest

from bench.core import metrics
from bench.core.metrics.reasoning import Reasoning, reasoning_chunks
from bench.core.records import RequestRecord
from bench.core.result.files import read_result, validate
from bench.core.result.model import Level
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.markdown import ROWS, write_report
from bench.reports.review import columns
from tests.core.test_metrics import level
from tests.core.test_result_model import _at
from tests.core.test_sse import DONE, ROLE, chunk, content, drive, event
from tests.reports.test_report import table
from tests.run.test_faults import (
    FORMS,
    LEVELS,
    REQUESTS,
    RESULTS_NAME,
    Case,
    check_error_samples,
    check_journal,
    check_nothing_left,
    check_verdict,
    run_case,
    tagged_processes,
)
from tests.support.faultserver import DEFAULT_TOKENS, REASONING_TOKENS
from tests.support.results import cell_dir, put, variant, write_cell

THINKING_KEYS = ("reasoning_content", "reasoning")  # llama-server, SGLang, older vLLM; newer vLLM


def thought(text: str, key: str = "reasoning_content", **kw) -> dict:
    return chunk({key: text}, **kw)


# ------------------------------------------------------------------ one request, from its stream


@pytest.mark.parametrize("key", THINKING_KEYS)
def test_ttft_ends_at_the_first_reasoning_delta_and_ttfa_at_the_first_answer(key):
    rec = drive([
        (0.1, event(ROLE)),
        (0.2, event(thought("Let me", key))),
        (0.3, event(thought(" think.", key))),
        (0.5, event(content("Paris"))),
        (0.6, event(content(".", finish="stop"))),
        (0.7, event(chunk(usage={"prompt_tokens": 9, "completion_tokens": 4,
                                 "completion_tokens_details": {"reasoning_tokens": 2}})) + DONE),
    ])
    assert rec.ok
    assert metrics.ttft(rec) == 0.2 and metrics.ttfa(rec) == 0.5
    assert rec.usage_reasoning_tokens == 2 and rec.output_tokens == 4  # reasoning tokens are output tokens
    assert reasoning_chunks(rec) == 2 and rec.n_chunks == 4


def test_a_request_that_only_reasoned_succeeds_without_a_ttfa():
    rec = drive([(0.1, event(thought("hmm"))), (0.2, event(thought("...", finish="length"))), (0.3, DONE)])
    assert rec.ok and rec.finish_reason == "length"
    assert metrics.ttft(rec) == 0.1 and metrics.ttfa(rec) is None
    assert reasoning_chunks(rec) == rec.n_chunks == 2


def test_without_reasoning_ttfa_is_ttft_and_the_record_line_is_as_before():
    rec = drive([(0.1, event(content("a"))), (0.2, event(content("b", finish="stop"))),
                 (0.3, event(chunk(usage={"completion_tokens": 2, "prompt_tokens": 3})) + DONE)])
    assert metrics.ttfa(rec) == metrics.ttft(rec) == 0.1
    assert reasoning_chunks(rec) == 0 and rec.usage_reasoning_tokens is None
    assert "usage_reasoning_tokens" not in rec.to_json()  # a sidecar line of such a request is as it always was


@pytest.mark.parametrize("usage, expected", [
    ({"completion_tokens": 5}, None),  # llama-server: no completion_tokens_details at all
    ({"completion_tokens": 5, "completion_tokens_details": None}, None),
    ({"completion_tokens": 5, "completion_tokens_details": {}}, None),
    ({"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": None}}, None),
    ({"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": "3"}}, None),
    ({"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 3}}, 3),
    ({"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 0}}, 0),
], ids=["absent", "null", "empty", "null-count", "string-count", "three", "zero"])
def test_reasoning_tokens_are_kept_only_as_usage_reports_them(usage, expected):
    rec = drive([(0.1, event(thought("x"))), (0.2, event(content("y", finish="stop"))),
                 (0.3, event(chunk(usage=usage)) + DONE)])
    assert rec.ok and rec.usage_completion_tokens == 5 and rec.usage_reasoning_tokens == expected
    assert ("usage_reasoning_tokens" in rec.to_json()) is (expected is not None)


def test_a_repeated_growing_usage_keeps_the_last_reasoning_count():
    """vLLM's continuous usage stats: every chunk carries the count so far."""
    def step(delta: dict, n: int, thinking: int) -> bytes:
        return event({**chunk(delta), "usage": {"completion_tokens": n,
                                                "completion_tokens_details": {"reasoning_tokens": thinking}}})
    rec = drive([(0.1, step({"reasoning": "a"}, 1, 1)), (0.2, step({"reasoning": "b"}, 2, 2)),
                 (0.3, step({"content": "c"}, 3, 2)), (0.4, event(chunk({}, finish="stop")) + DONE)])
    assert rec.usage_reasoning_tokens == 2 and rec.usage_completion_tokens == 3
    assert metrics.ttfa(rec) == 0.3


def test_reasoning_that_shares_a_read_with_the_first_answer_counts_as_answer():
    """Chunks are stamped per read: a coalesced read makes the chunk count a lower bound."""
    rec = drive([(0.1, event(thought("a"))), (0.2, event(thought("b")) + event(content("c"))),
                 (0.3, event(content("d", finish="stop")) + DONE)])
    assert metrics.ttfa(rec) == 0.2 and reasoning_chunks(rec) == 1 and rec.n_chunks == 4


# ------------------------------------------------------------------ the schema and the reports


def test_the_reasoning_typed_dict_names_the_schemas_keys():
    block = _at("#/$defs/level/properties/reasoning")
    assert set(get_type_hints(Reasoning)) == set(block["properties"]) == Reasoning.__required_keys__
    assert set(block["required"]) == Reasoning.__required_keys__ and block["additionalProperties"] is False


def thinking_record(index: int, *, send: float, answer_after: int | None, tokens: int | None) -> RequestRecord:
    """Four chunks 0.1 s apart from send + 0.1; the answer from chunk `answer_after` (None: never)."""
    chunks = [send + 0.1 * (k + 1) for k in range(4)]
    return RequestRecord(index=index, prompt_name=f"p{index}", t_sched=send, t_send=send, t_first_byte=chunks[0],
                         t_first_token=chunks[0], t_first_answer=None if answer_after is None else chunks[answer_after],
                         t_end=chunks[-1] + 0.01, chunk_times=chunks, usage_completion_tokens=4,
                         usage_reasoning_tokens=tokens, finish_reason="stop", served_model="m", http_status=200,
                         done_marker=True)


def reasoning_level() -> Level:
    return metrics.summarize_level(level([thinking_record(0, send=0.0, answer_after=3, tokens=3),
                                          thinking_record(1, send=1.0, answer_after=1, tokens=1)]))


def test_the_reasoning_rows_stand_beside_ttft_where_a_level_reasoned(tmp_path):
    template = read_result(write_cell(tmp_path / "cell"))
    d = cell_dir(tmp_path / "results", template)
    put(d, template)
    thinking = variant(template, framework="vllm")  # the same run: both stand ok, in that order
    summary = reasoning_level()
    thinking["levels"][0].update(ttfa_ms=summary["ttfa_ms"], reasoning=summary["reasoning"])  # c=1 reasoned, c=2 not
    validate(thinking)
    put(d, thinking)
    report = write_report(d, read_comparison(write_comparison(d, machine=template["machine"]["slug"]))).read_text()
    c1, c2 = table(report, "Concurrency 1"), table(report, "Concurrency 2")
    labels = [label for label, _ in ROWS]
    after = labels.index("TTFT p99 (ms)") + 1
    assert list(c1)[1:] == [*labels[:after], "TTFA avg (ms)", "TTFA p50 (ms)", "TTFA p99 (ms)",
                            "Reasoning tokens avg", "Reasoning / answer chunks", *labels[after:]]
    # the p99 of a few requests carries the n that could bound it (docs/metrics.md, How sure a percentile is)
    assert c1["TTFA avg (ms)"] == ["N/A", "300.0"] and c1["TTFA p99 (ms)"] == ["N/A", "398.0 (n<299)"]
    assert c1["Reasoning tokens avg"] == ["N/A", "2.0"] and c1["Reasoning / answer chunks"] == ["N/A", "4 / 4"]
    assert list(c2)[1:] == labels  # no level of that table reasoned


def test_the_html_level_table_shows_ttfa_for_a_reasoning_model():
    plain = metrics.summarize_level(level([thinking_record(0, send=0.0, answer_after=0, tokens=None)]))
    assert "ttfa_ms" not in plain and "reasoning" not in plain
    html = columns._level_table([{**plain, "concurrency": 1}, {**reasoning_level(), "concurrency": 2}])
    assert "<th>TTFA p50 (ms)</th>" in html and "<td>300.0 (n&lt;6)</td>" in html  # fewer than 6: no interval
    assert "TTFA" not in columns._level_table([{**plain, "concurrency": 1}])


# ------------------------------------------------------------------ a real cell against the fault server


@pytest.fixture
def cases(tmp_path: Path):
    """Cases run one at a time here; whatever a case's processes left is killed after its test saw it."""
    made: list[Case] = []
    sessions: dict = {}
    lock = threading.Lock()

    def run(form: str) -> Case:
        case = Case("reasoning", form, tmp_path / form)
        made.append(case)
        return run_case(case, sessions, lock)

    yield run
    for leftover in tagged_processes({c.tag for c in made}):
        with contextlib.suppress(psutil.Error):
            leftover.kill()


def split_dir(case: Case) -> Path:
    (path,) = sorted(case.results.glob(f"{RESULTS_NAME}/*/chat/openai_*.json"))
    return path.parent


@pytest.mark.integration
@pytest.mark.parametrize("form", FORMS)
def test_a_reasoning_server_gets_ttfa_and_its_reasoning_tokens(form, cases):
    case = cases(form)
    check_nothing_left(case)
    result = case.result()
    check_verdict(case, result)
    check_error_samples(result)
    check_journal(case, result)
    assert case.fault.check is not None
    case.fault.check(case, result)  # test_faults.py's own expectation: every request answered, usage's counts
    lines = [json.loads(line) for line in (split_dir(case) / result["requests_file"]).read_text().splitlines()]
    report = (split_dir(case) / "REPORT.md").read_text()  # the session's own report of the split
    assert [lv["concurrency"] for lv in result["levels"]] == LEVELS
    for lv in result["levels"]:
        measured = [r for r in lines if r["concurrency"] == lv["concurrency"] and not r["warmup"]]
        assert len(measured) == lv["successful"] == REQUESTS
        # what the server sent: REASONING_TOKENS reasoning deltas, then the answer, in usage too
        assert lv["reasoning"]["tokens_total"] == REQUESTS * REASONING_TOKENS
        assert lv["reasoning"]["tokens_mean"] == REASONING_TOKENS
        assert lv["reasoning"]["requests"] == REQUESTS and lv["reasoning"]["unanswered"] == 0
        assert lv["output_tokens_total"] == lv["chunks_total"] == REQUESTS * DEFAULT_TOKENS
        assert lv["reasoning"]["chunks_total"] + lv["reasoning"]["answer_chunks_total"] == lv["chunks_total"]
        assert lv["reasoning"]["chunks_total"] <= REQUESTS * REASONING_TOKENS
        for r in measured:  # TTFT at the first reasoning chunk, TTFA at the first answer chunk
            assert r["usage_reasoning_tokens"] == REASONING_TOKENS
            assert r["t_first_token"] == r["chunk_times"][0]
            assert r["t_first_answer"] == r["chunk_times"][REASONING_TOKENS]
        expected = metrics.stats_block([r["t_first_answer"] - r["t_send"] for r in measured], 1000.0)
        got = dict(lv["ttfa_ms"])  # pytest.approx takes no nested dict: each interval on its own
        assert got.pop("ci95") == {q: pytest.approx(i) for q, i in expected.pop("ci95").items()}
        assert got == pytest.approx(expected)
        for stat in ("min", "mean", "p50", "p90", "p99", "max"):  # the answer comes in the same read or later
            assert lv["ttfa_ms"][stat] >= lv["ttft_ms"][stat]
        rows = table(report, f"Concurrency {lv['concurrency']}")
        assert rows["TTFA avg (ms)"] == [f"{lv['ttfa_ms']['mean']:.1f}"]
        assert rows["Reasoning tokens avg"] == [f"{REASONING_TOKENS:.1f}"]
