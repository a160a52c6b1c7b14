"""What `cellbench weekly` settles before its first cell, and when it stops early."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from bench.base.git import GitError
from bench.base.paths import PROJECT_ROOT
from bench.cli.weekly.start import all_failed, claim_branch, kept_awake, setup_problem
from bench.host.machine import detect
from bench.reports.journal import CellEntry
from tests.support.gitrepo import run_git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("/results/\n")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "start")
    return repo


def test_the_branch_is_claimed_from_head_or_found(repo):
    head = run_git(repo, "rev-parse", "--short", "HEAD")
    assert claim_branch(repo, "weekly/2026-12-01") == f"weekly/2026-12-01 (new, from {head})"
    assert run_git(repo, "rev-parse", "weekly/2026-12-01") == run_git(repo, "rev-parse", "HEAD")
    assert claim_branch(repo, "weekly/2026-12-01") == "weekly/2026-12-01 (exists; this run adds to it)"
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main", "the checkout never moves"


def test_a_branch_that_cannot_be_made_says_why(repo, tmp_path):
    run_git(repo, "branch", "weekly")  # a branch named `weekly` leaves no room for weekly/<date>
    with pytest.raises(GitError, match=r"cannot create weekly/2026-12-01 in .*: .*weekly"):
        claim_branch(repo, "weekly/2026-12-01")
    with pytest.raises(GitError, match="refusing to commit results to main"):
        claim_branch(repo, "main")
    with pytest.raises(GitError, match="cannot create"):
        claim_branch(tmp_path / "not-a-repo-at-all", "weekly/x")


def test_something_keeps_the_machine_awake_or_the_journal_says_why_not():
    with kept_awake() as how:
        assert how.endswith("keeps the machine awake") or how.startswith("nothing keeps the machine awake: ")
        if how.startswith("nothing"):
            assert "(" in how or "installed" in how, "the reason, not just the fact"


def test_a_set_up_that_can_run_no_cell_names_the_fix():
    assert setup_problem(["omlx"], [], []).startswith("none of omlx runs on this machine: `cellbench doctor`")
    failed = [{"framework": "llamacpp", "before": None, "after": None, "error": "cmake not found"}]
    assert setup_problem([], ["llamacpp"], failed) == (
        "no framework could be installed (llamacpp: cmake not found); fix: `cellbench install llamacpp`")
    assert setup_problem([], ["llamacpp", "vllm"], [*failed, {"framework": "vllm", "after": "0.32.0"}]) is None
    assert setup_problem([], ["llamacpp"], []) is None, "--no-update: the cells say what is missing"


def _cell(fw: str, verdict: str, reason: str) -> CellEntry:
    return CellEntry(framework=fw, split="chat", verdict=verdict, reason=reason)


def test_every_chat_cell_failing_the_same_way_is_said_once():
    same = [_cell("llamacpp", "failed", "prompts file /a/chat.json: not valid JSON at line 3"),
            _cell("vllm", "failed", "prompts file /b/chat.json: not valid JSON at line 3"),
            _cell("mlx_lm", "skipped", "runs on darwin-arm64")]
    assert all_failed(same) == ("every chat cell (2) failed the same way: "
                                "prompts file /a/chat.json: not valid JSON at line 3")
    named = [_cell("llamacpp", "failed", "llamacpp: server exited with code 1 while starting"),
             _cell("vllm", "failed", "vllm: server exited with code 1 while starting")]
    assert all_failed(named) is not None, "the framework's own name does not make a reason its own"


def test_every_chat_cell_failing_bails_out_whatever_the_reasons():
    """SiliconBench's runbook stops when all frameworks fail: something systemic is wrong."""
    mixed = [_cell("vllm", "oom", "killed for memory (kernel log)"),
             _cell("llamacpp", "failed", "server exited with code 1"),
             _cell("mlx_lm", "all-failed", "8/8 requests failed: HTTP 500"),
             _cell("hf_transformers", "wrong-model", "the server lists other-model, not tiny"),
             _cell("omlx", "skipped", "runs on darwin-arm64")]
    assert all_failed(mixed) == (
        "every chat cell that ran (4) failed: hf_transformers wrong-model (the server lists other-model, not tiny); "
        "llamacpp failed (server exited with code 1); mlx_lm all-failed (8/8 requests failed: HTTP 500); "
        "vllm oom (killed for memory (kernel log))")


@pytest.mark.parametrize("cells", [
    [_cell("llamacpp", "failed", "server exited with code 1"), _cell("vllm", "ok", "")],
    [_cell("llamacpp", "failed", "server exited with code 1"), _cell("vllm", "degraded", "30% of requests failed")],
    [_cell("llamacpp", "failed", "server exited with code 1"), _cell("vllm", "capped", "cell budget reached")],
    [_cell("llamacpp", "skipped", "not installed")],
    [_cell("llamacpp", "failed", "server exited with code 1"), _cell("omlx", "skipped", "runs on darwin-arm64")],
    [],
])
def test_a_cell_that_measured_one_cell_alone_or_nothing_run_is_no_bail_out(cells):
    assert all_failed(cells) is None


def _weekly(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli.main", "weekly", f"--repo={repo}", "--no-update", *args],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.session
def test_weekly_stops_before_any_cell_when_its_branch_cannot_be_made(repo):
    run_git(repo, "branch", "weekly")
    done = _weekly(repo)
    assert done.returncode == 6, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"cannot create weekly/{date.today().isoformat()}" in done.stderr and "nothing was run" in done.stderr
    assert "pytest" not in done.stdout, "no session started"


@pytest.mark.session
def test_weekly_that_can_run_no_cell_stops_with_the_fix_in_the_journal(repo):
    done = _weekly(repo, "--frameworks", "omlx")
    assert done.returncode == 6, done.stdout[-2000:] + done.stderr[-2000:]
    assert "none of omlx runs on this machine" in done.stderr
    scoped = repo / "results" / "tiny" / detect().slug
    state = json.loads((scoped / f"weekly_{date.today().isoformat()}.journal.json").read_text())
    assert state["notes"][0].startswith(f"Branch: weekly/{date.today().isoformat()} (new, from ")
    assert any(note.startswith("Awake: ") for note in state["notes"])
    assert state["session_failures"] == ["set-up: none of omlx runs on this machine: `cellbench doctor` lists "
                                         "where each runs"]
    assert state["cells"] == [] and state["status"] == "failed"


def test_edits_outside_adapters_made_during_the_run_are_named(repo):
    from bench.cli.weekly.start import edited_outside_adapters, tree_snapshot

    (repo / "adapters").mkdir()
    (repo / "adapters" / "demo.py").write_text("PORT = 2\n")  # edited before the run: not the run's business
    (repo / "bench.py").write_text("ENGINE = 1\n")
    before = tree_snapshot(repo)
    (repo / "adapters" / "demo.py").write_text("PORT = 3\n")  # a fix, the allowed kind
    (repo / "bench.py").write_text("ENGINE = 2\n")
    (repo / "prompts.json").write_text("[]\n")
    (repo / "results").mkdir()
    (repo / "results" / "r.json").write_text("{}\n")
    assert edited_outside_adapters(before, tree_snapshot(repo)) == ["bench.py", "prompts.json"]
    assert edited_outside_adapters(before, before) == []


@pytest.mark.integration
def test_weekly_refuses_by_name_an_engine_edit_made_while_it_ran(repo, tmp_path):
    """A pytest plugin stands in for the agent: while the chat session runs, it fixes an adapter
    (allowed) and edits the engine (refused, named, not committed)."""
    (repo / "adapters").mkdir()
    (repo / "adapters" / "demo.py").write_text("PORT = 1\n")
    (repo / "engine.py").write_text("TOUCHED = False\n")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "an adapter and the engine")
    plugin = tmp_path / "plugins" / "edit_during_run.py"
    plugin.parent.mkdir()
    plugin.write_text(f"""from pathlib import Path
def pytest_sessionstart(session):
    Path({str(repo / 'adapters' / 'demo.py')!r}).write_text("PORT = 9\\n")
    Path({str(repo / 'engine.py')!r}).write_text("TOUCHED = True\\n")
""")
    done = subprocess.run([sys.executable, "-m", "bench.cli.main", "weekly", f"--repo={repo}", "--no-update",
                           "--splits", "chat", "--", "-p", "edit_during_run", "-k", "no_such_cell"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(plugin.parent)})
    assert done.returncode != 0
    assert "edited during the run outside adapters/ and models/, not committed: engine.py" in done.stderr
    branch = f"weekly/{date.today().isoformat()}"
    committed = run_git(repo, "log", "--name-only", "--format=", f"main..{branch}").split()
    assert "engine.py" not in committed and "adapters/demo.py" in committed
