"""The journal: written after every cell, continued by a second session, skips carried over."""

from __future__ import annotations

import json

import pytest

from bench.reports.journal import JOURNAL_DAY_ENV, CellEntry, Journal


def journal(tmp_path, day="2026-11-29"):
    return Journal.open(tmp_path, model="tiny", machine="intelxeonprocessor", day=day)


def test_written_after_every_cell_so_a_killed_run_leaves_one(tmp_path):
    j = journal(tmp_path)
    j.record(CellEntry("llamacpp", "chat", "ok", "20/20 requests ok; c=1: 400.0 tok/s"))
    text = (tmp_path / "weekly_2026-11-29.journal.md").read_text()
    assert "- Status: running" in text and "(still running, or killed)" in text
    assert "| llamacpp | ok | 20/20 requests ok; c=1: 400.0 tok/s |" in text
    j.record(CellEntry("omlx", "chat", "skipped", "omlx runs on darwin-arm64; this is linux-x86_64"))
    assert "| omlx | skipped |" in (tmp_path / "weekly_2026-11-29.journal.md").read_text()


def test_failures_carry_their_evidence(tmp_path):
    j = journal(tmp_path)
    j.record(CellEntry("ollama", "agent", "wrong-model", "every request answered HTTP 404", "r.json",
                       evidence={"dominant_error": {"type": "http_4xx", "http_status": 404, "count": 300},
                                 "server_logs": ["logs/ollama_c1.server.log"]}))
    j.finish(interrupted=False)
    text = j.md_path.read_text()
    assert "### ollama / agent: wrong-model" in text
    assert "- Dominant error: http_4xx, HTTP 404 (300x)" in text and "logs/ollama_c1.server.log" in text
    assert "- Status: completed_with_failures" in text


def test_second_session_same_day_continues_the_journal(tmp_path):
    first = journal(tmp_path)
    first.record(CellEntry("llamacpp", "chat", "ok", "fine"))
    first.finish(interrupted=False)
    second = journal(tmp_path)
    second.record(CellEntry("llamacpp", "agent", "ok", "fine too"))
    second.finish(interrupted=False)
    text = second.md_path.read_text()
    assert "## Frameworks — chat split" in text and "## Frameworks — agent split" in text
    assert "- Splits run: chat, agent" in text
    assert second.started_at == first.started_at
    assert len(json.loads(second.state_path.read_text())["cells"]) == 2


def test_skip_for_the_same_reason_is_carried_with_its_first_date(tmp_path):
    reason = "omlx runs on darwin-arm64; this is linux-x86_64"
    for day in ("2026-11-15", "2026-11-22", "2026-11-29"):
        j = journal(tmp_path, day)
        j.record(CellEntry("omlx", "chat", "skipped", reason))
        j.finish(interrupted=False)
    assert j.cells[("omlx", "chat")].carried_from == "2026-11-15"
    assert f"still skipped since 2026-11-15: {reason}" in j.md_path.read_text()
    other = journal(tmp_path, "2026-12-06")
    other.record(CellEntry("omlx", "chat", "skipped", "a different reason"))
    assert other.cells[("omlx", "chat")].carried_from is None


def test_status_values(tmp_path):
    j = journal(tmp_path)
    j.record(CellEntry("a", "chat", "ok", "x"))
    j.finish(interrupted=True)
    assert j.status == "partial"
    j.record(CellEntry("b", "chat", "skipped", "y"))
    j.finish(interrupted=False)
    assert j.status == "completed_with_skips"
    j.record(CellEntry("c", "chat", "oom", "killed"))
    j.finish(interrupted=False)
    assert j.status == "completed_with_oom"


def test_suspicious_cells_are_listed_for_review_whatever_their_verdict(tmp_path):
    j = journal(tmp_path)
    reason = "output throughput against run 20261122T100000Z-aaaa: c=8: 40.0 tok/s vs 410.0 tok/s (10.2x lower)"
    j.record(CellEntry("vllm", "chat", "ok", "300/300 requests ok", "r.json", ["suspicious"], {"suspicious": reason}))
    j.record(CellEntry("llamacpp", "chat", "ok", "300/300 requests ok"))
    j.finish(interrupted=False)
    text = j.md_path.read_text()
    assert "| vllm | ok | 300/300 requests ok (suspicious) |" in text
    assert f"## Suspicious Results\n\n- vllm / chat: {reason}\n\n## Notes" in text
    assert j.status == "completed", "suspicious is an annotation, not a failure"


def test_the_day_can_be_fixed_by_the_caller(tmp_path, monkeypatch):
    monkeypatch.setenv(JOURNAL_DAY_ENV, "2026-11-29")  # a weekly run that started before midnight
    j = Journal.open(tmp_path, model="tiny", machine="m")
    assert j.day == "2026-11-29" and j.md_path.name == "weekly_2026-11-29.journal.md"
    assert Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-06").day == "2026-12-06"
    monkeypatch.setenv(JOURNAL_DAY_ENV, "next monday")
    with pytest.raises(ValueError):
        Journal.open(tmp_path, model="tiny", machine="m")


def test_a_session_that_ran_no_cell_is_a_failure_of_the_run(tmp_path):
    j = journal(tmp_path)
    j.record(CellEntry("llamacpp", "chat", "ok", "fine"))
    reason = "pytest -m agent exited 4 (usage error): ERROR: --concurrency levels must be >= 1, got '0'"
    j.session_failures.append(reason)
    j.finish(interrupted=False)
    again = journal(tmp_path)  # kept across sessions, as the cells are
    assert again.session_failures == [reason]
    text = j.md_path.read_text()
    assert "- Status: failed" in text
    assert f"## Failures\n\n### the run itself failed\n- Reason: {reason}\n" in text
