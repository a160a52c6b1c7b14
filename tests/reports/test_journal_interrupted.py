"""A killed run's cell in the journal: recorded as `interrupted` by the session that found it, in the
journal its own session was writing, kept when a later run of the cell replaces it, and recorded once."""

from __future__ import annotations

import json
from datetime import datetime

from bench.reports.journal import CellEntry, Journal
from bench.reports.journal.state import killed_cell_day


def _killed(path: str = "/r/tiny/m/chat/llamacpp_20261204T100000Z-ab12.json") -> CellEntry:
    return CellEntry("llamacpp", "chat", "interrupted", "killed after 1 of 2 levels (pid 42, last written "
                     "2026-12-04T10:01:00+00:00): kept c=1 (4 of 4 requests ok), 5 request records", path,
                     finished_at="2026-12-04T10:01:00+00:00")


def test_the_killed_sessions_running_journal_lists_the_cell_as_interrupted_and_closes_partial(tmp_path):
    killed_session = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-04",
                                  started_at="2026-12-04T09:59:00+00:00")
    killed_session.record(CellEntry("vllm", "chat", "ok", "fine", finished_at="2026-12-04T10:00:00+00:00"))
    assert json.loads(killed_session.state_path.read_text())["status"] == "running"  # then SIGKILL

    assert killed_cell_day(tmp_path, "2026-12-04T10:00:30+00:00") == "2026-12-04"
    later = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-04")
    assert later.record_interrupted(_killed()) is True
    state = json.loads(later.state_path.read_text())
    assert state["status"] == "partial" and state["finished_at"] == "2026-12-04T10:01:00+00:00"
    assert [(c["framework"], c["verdict"]) for c in state["cells"]] == [("llamacpp", "interrupted"), ("vllm", "ok")]
    assert [e["result_path"] for e in state["interrupted"]] == [_killed().result_path]
    page = later.md_path.read_text()
    assert "| llamacpp | interrupted | killed after 1 of 2 levels" in page
    assert f"- llamacpp / chat interrupted: {_killed().reason}" in page

    again = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-04")
    assert again.record_interrupted(_killed()) is False, "recorded once: the next session does not name it again"


def test_a_later_run_of_the_cell_replaces_it_in_the_table_but_not_in_the_record(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-04")
    journal.record_interrupted(_killed())
    journal.record(CellEntry("llamacpp", "chat", "ok", "resumed and measured again"))
    journal.finish(interrupted=False)
    state = json.loads(journal.state_path.read_text())
    assert [c["verdict"] for c in state["cells"]] == ["ok"]
    assert [e["verdict"] for e in state["interrupted"]] == ["interrupted"]
    assert f"llamacpp / chat interrupted: {_killed().reason}" in state["notes"]


def test_a_closed_journal_keeps_its_status_and_a_newer_entry_of_the_cell_stays(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-04")
    journal.record(CellEntry("llamacpp", "chat", "ok", "a later run", finished_at="2026-12-04T11:00:00+00:00"))
    journal.finish(interrupted=False)
    status = json.loads(journal.state_path.read_text())["status"]
    reopened = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-04")
    reopened.record_interrupted(_killed())
    state = json.loads(reopened.state_path.read_text())
    assert state["status"] == status and [c["verdict"] for c in state["cells"]] == ["ok"]


def test_a_killed_cell_without_a_running_journal_goes_to_its_own_day(tmp_path):
    local_day = datetime.fromisoformat("2026-12-04T10:00:00+00:00").astimezone().date().isoformat()
    assert killed_cell_day(tmp_path, "2026-12-04T10:00:00+00:00") == local_day
    done = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01", started_at="2026-12-01T09:00:00+00:00")
    done.record(CellEntry("vllm", "chat", "ok", "fine"))  # left running: a weekly run's --date of its own
    assert killed_cell_day(tmp_path, "2026-12-04T10:00:00+00:00") == "2026-12-01"
    assert killed_cell_day(tmp_path, "2026-11-30T10:00:00+00:00") != "2026-12-01", "that journal began after it"
