"""One fix attempt per cell per run: the weekly run's plan records a failed cell's re-run with an
edited adapter or profile as its attempt, settles how it ended, and refuses a second one; a
prior skip is held while nothing moved and lapses with a new release; an oom cell is not re-run
the same day; which failures are transient enough for the one retry."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.cli.weekly.after.retry import transient_failure
from bench.cli.weekly.cells import plan_cells, settle_cells
from bench.reports.journal import CellEntry, Journal
from tests.support.results import Spec, synthetic_result

DAY = "2026-11-30"
PROFILE = PROJECT_ROOT / "models" / "tiny.yaml"
FAILED_RUN, RERUN = "20261130T085900Z-aaaa", "20261130T100000Z-bbbb"


def _failed(tmp_path: Path, journal: Journal, *, adapter_sha: str, profile_sha: str, attempt: str = "") -> None:
    path = tmp_path / "chat" / f"llamacpp_{FAILED_RUN}{attempt}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"harness": {"adapter": {"file": "adapters/llamacpp.py", "sha256": adapter_sha},
                                            "profile": {"file": "models/tiny.yaml", "sha256": profile_sha}}}))
    journal.record(CellEntry("llamacpp", "chat", "failed", "server exited with code 1 while starting", str(path)))


def _plan(journal: Journal, reference: str | None = None):
    return plan_cells(journal, ["llamacpp"], ["chat"], [], PROJECT_ROOT, PROFILE, [], reference)


def test_a_rerun_with_nothing_edited_is_its_one_retry_not_an_attempt(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    unchanged = {"adapter_sha": adapters.source("llamacpp")["sha256"],
                 "profile_sha": hashlib.sha256(PROFILE.read_bytes()).hexdigest()}
    _failed(tmp_path, journal, **unchanged)
    plan = _plan(journal)
    assert plan.left_out("chat") == [] and journal.fix_attempts == {}
    assert journal.retries["llamacpp/chat"]["edited"] == "nothing"
    journal.record(CellEntry("llamacpp", "chat", "failed", "server exited with code 1 while starting",
                             str(tmp_path / "chat" / f"llamacpp_{RERUN}.json")))
    settle_cells(journal, plan, RERUN)
    text = journal.md_path.read_text()
    assert "- llamacpp/chat: retry, nothing edited: now failed (server exited with code 1 while starting)" in text
    assert "- Decision: skip — its one retry of the run ended failed too" in text
    _failed(tmp_path, journal, **unchanged)
    assert _plan(journal).left_out("chat") == ["llamacpp"], "a second retry is refused"
    assert "- refused: llamacpp/chat: a second retry this run (its first, at " in journal.md_path.read_text()


def test_an_edited_profile_makes_the_rerun_the_cells_one_attempt_and_a_second_is_refused(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    _failed(tmp_path, journal, adapter_sha=adapters.source("llamacpp")["sha256"], profile_sha="0" * 64)
    plan = _plan(journal)
    assert plan.left_out("chat") == []
    attempt = journal.fix_attempts["llamacpp/chat"]
    assert (attempt["edited"], attempt["from_verdict"], attempt["from_run_id"]) == \
        ("models/tiny.yaml", "failed", FAILED_RUN)

    # the re-run passes, but no upstream reference was given: ok, not fixed, and the journal says why
    rerun = str(tmp_path / "chat" / f"llamacpp_{RERUN}.json")
    journal.record(CellEntry("llamacpp", "chat", "ok", "8/8 requests ok", rerun))
    settle_cells(journal, plan, RERUN)
    assert journal.fix_attempts["llamacpp/chat"]["outcome"] == "ok"
    text = journal.md_path.read_text()
    assert "- llamacpp/chat: models/tiny.yaml: ok, but not `fixed`: no upstream reference was given" in text

    # it fails again later that day and is edited once more: refused, not run, journaled
    _failed(tmp_path, journal, adapter_sha="1" * 64, profile_sha="0" * 64)
    again = _plan(Journal.open(tmp_path, model="tiny", machine="m", day=DAY))
    assert again.left_out("chat") == ["llamacpp"]
    text = journal.md_path.read_text()
    section = text.split("## Fix Attempts\n\n", 1)[1].split("\n\n", 1)[0]
    assert "- refused: llamacpp/chat: a second fix attempt this run (its first, at " in section
    assert "editing models/tiny.yaml, ended ok); one fix attempt per cell per run" in section


def test_an_attempt_files_run_id_is_the_run_id_without_the_attempts_number(tmp_path):
    """A second attempt of a run id (a resume of a killed cell) is `<fw>_<run id>-2.json`: the
    attempt records the run, not "<run id>-2"."""
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    _failed(tmp_path, journal, adapter_sha=adapters.source("llamacpp")["sha256"], profile_sha="0" * 64, attempt="-2")
    _plan(journal)
    assert journal.fix_attempts["llamacpp/chat"]["from_run_id"] == FAILED_RUN


def test_a_failed_attempt_makes_the_triage_say_skip(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    _failed(tmp_path, journal, adapter_sha="1" * 64, profile_sha=hashlib.sha256(PROFILE.read_bytes()).hexdigest())
    plan = _plan(journal, "https://github.com/ggml-org/llama.cpp/pull/11500")
    assert journal.fix_attempts["llamacpp/chat"]["edited"] == "adapters/llamacpp.py"
    journal.record(CellEntry("llamacpp", "chat", "failed", "server exited with code 2 while starting",
                             str(tmp_path / "chat" / f"llamacpp_{RERUN}.json")))
    settle_cells(journal, plan, RERUN)
    decision = next(line for line in journal.md_path.read_text().splitlines() if line.startswith("- Decision:"))
    assert decision.startswith("- Decision: skip — its one fix attempt of the run (adapters/llamacpp.py) ended failed")


def test_a_prior_skip_is_held_while_nothing_moved_and_lapses_with_a_new_release(tmp_path):
    text = (PROJECT_ROOT / "tests" / "data" / "siliconbench" / "weekly_2026-11-24.journal.md").read_text()
    extra = "### nosuch_fw (chat)\n- **Why skipped**: a framework cellbench has no adapter for\n\n## OOM Cells"
    (tmp_path / "weekly_2026-11-24.journal.md").write_text(text.replace("## OOM Cells", extra, 1))
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    same = [{"framework": "llamacpp", "before": "b7000", "after": "b7000"}]
    assert _plan(journal).left_out("chat") == ["llamacpp"]
    assert plan_cells(journal, ["llamacpp"], ["chat"], same, PROJECT_ROOT, PROFILE, [], None).left_out("chat") == \
        ["llamacpp"]
    assert "still holds: llamacpp is still b7000" in journal.md_path.read_text()

    later = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    moved = [{"framework": "llamacpp", "before": "b7000", "after": "b7100"}]
    plan = plan_cells(later, ["llamacpp"], ["chat"], moved, PROJECT_ROOT, PROFILE, [], None)
    assert plan.left_out("chat") == [] and plan.lapsed == ["llamacpp/chat"]
    assert any(n.startswith("llamacpp/chat: the skip of 2026-11-24 (llama-server rejects --jinja") and
               n.endswith("no longer holds: llamacpp moved from b7000 to b7100 this run; the cell runs")
               for n in later.notes)
    assert any(n.startswith("prior skips of frameworks with no cellbench adapter, not carried: ")
               and "nosuch_fw/chat" in n for n in later.notes)


def test_an_oom_cell_is_not_run_again_the_same_day(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    journal.record(CellEntry("llamacpp", "agent", "oom", "killed for memory (kernel log): Killed process 42",
                             finished_at=f"{DAY}T02:14:07+00:00"))
    plan = plan_cells(journal, ["llamacpp"], ["chat", "agent"], [], PROJECT_ROOT, PROFILE, [], None)
    assert plan.left_out("agent") == ["llamacpp"] and plan.left_out("chat") == []
    assert journal.fix_attempts == {} and journal.retries == {}, "neither an attempt nor a retry"
    (refused,) = journal.refused
    assert refused == ("llamacpp/agent: it ended oom at 02:14 today (killed for memory (kernel log): Killed process "
                       "42); an oom cell is not re-run the same day: the machine lacked memory, which a re-run does "
                       "not add (see OOM Cells for the mitigation)")
    later = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    assert plan_cells(later, ["llamacpp"], ["agent"], [], PROJECT_ROOT, PROFILE, [], None).left_out("agent") == [], \
        "the next day it runs"


def _with_errors(verdict: str, errors: dict[str, list[dict]], **server_exit) -> dict:
    result: dict = json.loads(json.dumps(synthetic_result(Spec(levels=(1,)))))  # a plain dict, as read from disk
    result["verdict"]["verdict"] = verdict
    result["levels"][0]["errors"] = {kind: len(samples) for kind, samples in errors.items()}
    result["levels"][0]["error_samples"] = errors
    result["servers"][0]["exit"] = {**result["servers"][0]["exit"], **server_exit}
    return result


HTTP_500 = {"message": "HTTP 500 Internal Server Error", "http_status": 500}
HTTP_503 = {"message": "HTTP 503 Service Unavailable", "http_status": 503}
RESET = {"message": "ConnectionResetError mid-stream after 3 output chunks: [Errno 104] Connection reset by peer"}
GZIP_CUT = {"message": "the body ended inside its gzip stream, after 120 bytes"}
REFUSED = {"message": "ConnectionRefusedError before a response: [Errno 111] Connection refused"}
TIMEOUT = {"message": "timed out after 300.00 s (request_timeout_s=300); no response headers"}


@pytest.mark.parametrize("verdict, errors, said", [
    ("all-failed", {"http_5xx": [HTTP_500, HTTP_503]}, "2 http_5xx (HTTP 500, 503)"),
    ("degraded", {"http_5xx": [HTTP_500], "connect": [REFUSED], "timeout": [TIMEOUT]},
     "1 http_5xx (HTTP 500), 1 connect, 1 timeout"),
    ("failed", {"truncated": [RESET, RESET]}, "2 truncated"),
])
def test_connection_refused_or_reset_5xx_and_timeouts_are_transient(verdict, errors, said):
    assert transient_failure(_with_errors(verdict, errors)) == said


@pytest.mark.parametrize("verdict, errors, server_exit", [
    ("oom", {"http_5xx": [HTTP_500]}, {}),
    ("wrong-model", {"http_5xx": [HTTP_500]}, {}),
    ("capped", {"timeout": [TIMEOUT]}, {}),
    ("all-failed", {"http_5xx": [HTTP_500], "http_4xx": [{"message": "HTTP 400", "http_status": 400}]}, {}),
    ("all-failed", {"truncated": [RESET, GZIP_CUT]}, {}),
    ("failed", {"connect": [REFUSED]}, {"returncode": 1, "signal": None, "stopped_by_us": False}),
    ("degraded", {}, {}),
])
def test_oom_wrong_model_a_crash_or_any_other_failure_is_not(verdict, errors, server_exit):
    assert transient_failure(_with_errors(verdict, errors, **server_exit)) is None
