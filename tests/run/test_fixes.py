"""`fixed` needs evidence on both sides: an earlier failure of the same cell in this run's day, a
different adapter or profile digest, and an upstream reference; one fix attempt per cell per run;
the journal keeps the day's fixes and links the run's HTML pages."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bench.core.result.files import cell_paths
from bench.core.verdicts import CellVerdict, Verdict
from bench.reports.journal import CellEntry, Journal, write_index
from bench.run.cell_result import CellHistory
from bench.run.fixes import FIX_REFERENCE_ENV, attempt_refusal, reference_problem, verified_fix
from tests.support.results import Spec, put, synthetic_result

OLD, NEW = "a" * 64, "b" * 64
DAY = "2026-11-30"
REF = "https://github.com/ggml-org/llama.cpp/pull/11500"


@pytest.fixture(autouse=True)
def _reference(monkeypatch):
    """The weekly run's --fix-ref reaches the cells as this variable."""
    monkeypatch.setenv(FIX_REFERENCE_ENV, REF)


def _pair(tmp_path: Path, *, was: str = "failed", before: str | None = OLD, after: str | None = NEW,
          failed_at: str = "2026-11-30T09:00:00+00:00"):
    """A failing earlier result and an ok re-run of the llamacpp chat cell, with adapter digests."""
    earlier = synthetic_result(Spec(run_id="20261130T085900Z-aaaa", finished_at=failed_at))
    earlier["verdict"] = {"verdict": was, "reason": "server exited with code 1 while starting", "annotations": []}
    if before:
        earlier["harness"]["adapter"] = {"file": "adapters/llamacpp.py", "sha256": before}
    rerun = synthetic_result(Spec(run_id="20261130T100000Z-bbbb"))
    if after:
        rerun["harness"]["adapter"] = {"file": "adapters/llamacpp.py", "sha256": after}
    paths = cell_paths(tmp_path, "tiny", rerun["machine"]["slug"], "chat", "llamacpp", rerun["run_id"])
    put(paths.split_dir, earlier)
    return CellHistory.read(paths.split_dir).previous(paths.result, rerun), rerun


def test_an_ok_rerun_after_an_adapter_edit_is_fixed_and_says_what_it_answered(tmp_path):
    previous, rerun = _pair(tmp_path)
    fix = verified_fix(previous, rerun, DAY)
    assert fix is not None and fix.verdict == "failed" and (fix.sha256_before, fix.sha256_after) == (OLD, NEW)
    verdict = fix.verdict_after(CellVerdict(Verdict.OK, "8/8 requests ok", ("uncertain",)))
    assert verdict.verdict is Verdict.FIXED and verdict.annotations == ("uncertain",)
    assert verdict.reason.startswith(f"ok after an edit of adapters/llamacpp.py (upstream: {REF}); it was failed at ")
    assert verdict.reason.endswith("(run 20261130T085900Z-aaaa): server exited with code 1 while starting")
    assert fix.to_json()["from_result"] == "llamacpp_20261130T085900Z-aaaa.json"
    assert fix.to_json()["reference"] == REF


def test_without_an_upstream_reference_the_rerun_stays_ok(tmp_path, monkeypatch):
    previous, rerun = _pair(tmp_path)
    monkeypatch.delenv(FIX_REFERENCE_ENV)
    assert verified_fix(previous, rerun, DAY) is None
    assert verified_fix(previous, rerun, DAY, reference="it works now") is None, "not a reference"
    assert verified_fix(previous, rerun, DAY, reference="ggml-org/llama.cpp@3f2a9c1").reference.endswith("3f2a9c1")


@pytest.mark.parametrize("text, ok", [
    ("https://github.com/vllm-project/vllm/issues/123", True),
    ("3f2a9c1d", True),
    ("ggml-org/llama.cpp@3f2a9c1", True),
    ("CHANGELOG.md 0.8.2: renamed --no-webui", True),
    ("release notes of b11500", True),
    ("fixed it", False),
    ("", False),
])
def test_what_counts_as_an_upstream_reference(text, ok):
    assert (reference_problem(text) is None) is ok


def test_an_edit_of_the_model_profile_counts_as_an_adapter_edit(tmp_path):
    previous, rerun = _pair(tmp_path, after=OLD)  # the adapter is the same on both sides
    previous.data["harness"]["profile"] = {"file": "models/tiny.yaml", "sha256": "c" * 64}
    rerun["harness"]["profile"] = {"file": "models/tiny.yaml", "sha256": "d" * 64}
    fix = verified_fix(previous, rerun, DAY)
    assert fix is not None and fix.adapter_file == "models/tiny.yaml"
    rerun["harness"]["profile"] = {"file": "models/tiny.yaml", "sha256": "c" * 64}
    assert verified_fix(previous, rerun, DAY) is None, "neither file changed: a retry"


def test_a_second_fix_attempt_of_a_cell_is_refused_saying_how_the_first_ended():
    assert attempt_refusal("llamacpp/chat", None) is None
    first = {"at": "2026-11-30T10:00:00+00:00", "edited": "adapters/llamacpp.py", "outcome": "failed"}
    refusal = attempt_refusal("llamacpp/chat", first)
    assert refusal is not None and "second fix attempt" in refusal and "ended failed" in refusal


@pytest.mark.parametrize("case, changes", [
    ("the adapter did not change: a retry", {"after": OLD}),
    ("an OOM: no adapter edit gives a machine memory", {"was": "oom"}),
    ("the earlier cell was skipped, not failed", {"was": "skipped"}),
    ("the failure was last week's", {"failed_at": "2026-11-23T09:00:00+00:00"}),
    ("the earlier result predates adapter digests", {"before": None}),
])
def test_no_fix_without_evidence_on_both_sides(tmp_path, case, changes):
    previous, rerun = _pair(tmp_path, **changes)
    assert verified_fix(previous, rerun, DAY) is None, case


def test_a_killed_runs_unfinished_result_is_no_failure_a_fix_answered(tmp_path):
    previous, rerun = _pair(tmp_path, was="capped")
    assert verified_fix(previous, rerun, DAY) is not None, "a capped cell can be fixed"
    previous.data["verdict"]["reason"] = "unfinished: written after 1 of 2 levels; ..."
    previous.data["unfinished"] = {"pid": 42, "host": "h", "updated_at": "2026-11-30T09:00:00+00:00",
                                   "levels_done": 1}
    assert verified_fix(previous, rerun, DAY) is None


def test_a_rerun_that_is_not_ok_or_has_no_predecessor_is_no_fix(tmp_path):
    previous, rerun = _pair(tmp_path)
    degraded = copy.deepcopy(rerun)
    degraded["verdict"]["verdict"] = "degraded"
    assert verified_fix(previous, degraded, DAY) is None
    assert verified_fix(None, rerun, DAY) is None


def _fixed_entry() -> CellEntry:
    fix = {"from_verdict": "failed", "from_reason": "exited", "from_result": "llamacpp_x.json",
           "from_run_id": "20261130T085900Z-aaaa", "adapter": "adapters/llamacpp.py", "run_id": "20261130T100000Z-bbbb",
           "what": "drop `--no-such-flag`"}
    return CellEntry("llamacpp", "chat", "fixed", "ok after an edit of adapters/llamacpp.py; ...",
                     "/r/llamacpp_y.json", evidence={"fix": fix})


def test_the_journal_keeps_a_fix_when_a_later_run_replaces_the_cell(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    journal.record(_fixed_entry())
    journal.record(CellEntry("llamacpp", "chat", "capped", "cell budget of 20 s reached at c=1"))
    journal.finish(interrupted=False)
    text = Journal.open(tmp_path, model="tiny", machine="m", day=DAY).md_path.read_text()
    fixes = text[text.index("## Auto-Fixes"):text.index("## Failures")]
    assert "### llamacpp / chat\n- What: drop `--no-such-flag`\n- Why: it was failed in run 20261130T085900Z" in fixes
    assert "- Since then: a later run of the cell ended capped (cell budget of 20 s reached at c=1)" in fixes
    assert "| llamacpp | capped |" in text


def test_a_day_with_a_fix_and_nothing_failing_is_completed_with_fixes(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    journal.record(_fixed_entry())
    journal.record(CellEntry("vllm", "chat", "ok", "8/8 requests ok"))
    journal.finish(interrupted=False)
    assert journal.status == "completed_with_fixes"
    assert "## Auto-Fixes\n\nNone." not in journal.md_path.read_text()


def test_the_index_links_each_split_page_and_the_journal_links_them_all(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day=DAY)
    journal.record(_fixed_entry())
    journal.record(CellEntry("llamacpp", "agent", "failed", "no request was measured <script>"))
    index = write_index(journal, {"chat": f"weekly_{DAY}_chat.html", "agent": f"weekly_{DAY}_agent.html"})
    html = index.read_text()
    assert index.name == f"weekly_{DAY}.html"
    assert html.index("<h2>chat</h2>") < html.index("<h2>agent</h2>")
    assert f'<a href="weekly_{DAY}_agent.html">pytest-html report</a>' in html and 'href="agent/REPORT.md"' in html
    assert "no request was measured &lt;script&gt;" in html  # reasons carry server text: escaped
    assert (f"- HTML: [chat](weekly_{DAY}_chat.html), [agent](weekly_{DAY}_agent.html), [index](weekly_{DAY}.html)"
            in journal.md_path.read_text())
