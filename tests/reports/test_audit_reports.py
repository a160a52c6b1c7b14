"""Where a level's audits (bench.core.metrics.audits) show: REPORT.md's Audits section, the journal's
Audits section and the HTML row (its annotation's tooltip and the expanded summary)."""

from __future__ import annotations

import json

from bench.core.metrics import audit_lines
from bench.core.metrics.audits import (
    CACHED,
    NOT_SENT,
    SHORT_OUTPUT,
    TOKEN_ACCOUNTING,
    cache_audit,
    output_length,
    token_accounting,
)
from bench.core.records import RequestRecord
from bench.core.verdicts import Evidence, classify
from bench.reports.comparison import build_comparison
from bench.reports.journal import CellEntry, Journal
from bench.reports.markdown import render_report
from bench.reports.review import columns
from tests.support.results import write_cell


def _rec(i: int, tokens: int, chunks: int, max_tokens: int = 8) -> RequestRecord:
    return RequestRecord(index=i, prompt_name=f"p{i}", chunk_times=[0.1 * k for k in range(chunks)],
                         usage_completion_tokens=tokens, finish_reason="stop", max_tokens=max_tokens)


SHORT = output_length([_rec(0, 8, 8), _rec(1, 2, 2)], ignore_eos=True)
BUNDLED = token_accounting([_rec(0, 8, 2), _rec(1, 8, 2)])
FIRED_LEVEL = {"concurrency": 4, "successful": 2, "audits": {"token_accounting": BUNDLED, "output_length": SHORT}}


def test_report_md_has_a_line_per_framework_and_level_where_an_audit_fired(tmp_path):
    path = write_cell(tmp_path / "results")
    result = json.loads(path.read_text())
    result["levels"][0]["audits"] = {"token_accounting": BUNDLED, "output_length": SHORT}
    path.write_text(json.dumps(result))
    report = render_report(build_comparison(path.parent, machine=result["machine"]["slug"]), [])
    section = report.split("## Audits\n", 1)[1].split("\n## ", 1)[0]
    level = f"c={result['levels'][0]['concurrency']}"
    assert f"- llamacpp: {level}: token accounting diverges: {BUNDLED['note']}" in section
    assert f"- llamacpp: {level}: output length stopped short: {SHORT['note']}" in section
    assert "output length not applicable: " + NOT_SENT in section  # the other levels: ignore_eos not sent


def test_report_md_says_none_when_every_audited_level_passed(tmp_path):
    path = write_cell(tmp_path / "results")
    result = json.loads(path.read_text())
    for lv in result["levels"]:
        lv["audits"]["output_length"] = output_length([_rec(0, 8, 8)], ignore_eos=True)
    path.write_text(json.dumps(result))
    report = render_report(build_comparison(path.parent, machine=result["machine"]["slug"]), [])
    assert "## Audits\n\nNone: every level audited passed token accounting" in report


def test_the_journal_lists_each_cells_audit_lines(tmp_path):
    lines = audit_lines([FIRED_LEVEL])
    j = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    j.record(CellEntry("openai", "chat", "ok", "18/18 requests ok", "r.json", [TOKEN_ACCOUNTING, SHORT_OUTPUT],
                       {"audits": lines}))
    text = j.md_path.read_text()
    assert "| openai | ok | 18/18 requests ok (token-accounting, short-output) |" in text
    assert f"## Audits\n\n- openai / chat: {lines[0]}\n- openai / chat: {lines[1]}\n" in text


def test_the_html_row_explains_the_annotation_and_the_summary_lists_the_audits():
    lines = audit_lines([FIRED_LEVEL])
    data = {"verdict": "ok", "reason": "fine", "annotations": [SHORT_OUTPUT], "evidence": {"audits": lines}}
    verdict_cell = columns.row_cells(data)[0]
    assert 'title="c=4: output length stopped short: 1 of 2 successful requests stopped short' in verdict_cell
    summary = columns.summary_html(data, {}, [])  # a cell without a result
    assert "<p>audits:</p><ul><li>c=4: token accounting diverges: 2 of 2" in summary


def test_a_cached_cell_says_so_in_report_md_the_journal_and_the_html_tooltip(tmp_path):
    cached = cache_audit([0.1] * 8, [0.04] * 8)  # every repeat 60% faster
    path = write_cell(tmp_path / "results")
    result = json.loads(path.read_text())
    result["levels"][-1]["audits"]["cache"] = cached
    path.write_text(json.dumps(result))
    assert CACHED in classify(Evidence(levels=tuple(result["levels"]))).annotations
    report = render_report(build_comparison(path.parent, machine=result["machine"]["slug"]), [])
    section = report.split("## Audits\n", 1)[1].split("\n## ", 1)[0]
    line = f"c={result['levels'][-1]['concurrency']}: cache audit cached: {cached['note']}"
    assert f"- llamacpp: {line}" in section and "0.40x their first [0.40, 0.40]" in line
    j = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    j.record(CellEntry("llamacpp", "chat", "ok", "4/4 requests ok", "r.json", [CACHED], {"audits": [line]}))
    assert f"## Audits\n\n- llamacpp / chat: {line}\n" in j.md_path.read_text()
    data = {"verdict": "ok", "reason": "fine", "annotations": [CACHED], "evidence": {"audits": [line]}}
    assert f'title="{line}"' in columns.row_cells(data)[0].replace("&#x27;", "'")
