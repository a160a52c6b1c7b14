"""`cellbench weekly` on this machine: real cells, then the weekly/<date> branch holds the truth (a
cell this busy host's client limited is `degraded`, and the run says so); a pytest session that
runs no cell fails the weekly run with its reason."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from fnmatch import fnmatch
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from tests.support.busy import assert_ok_unless_client_limited
from tests.support.gitrepo import run_git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout on main with one adapter edited and not committed (an adapter fix made this week)."""
    repo = tmp_path / "repo"
    (repo / "adapters").mkdir(parents=True)
    (repo / ".gitignore").write_text("/results/\n")
    (repo / "adapters" / "demo.py").write_text("PORT = 1\n")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "start")
    (repo / "adapters" / "demo.py").write_text("PORT = 2\n")
    return repo


@pytest.mark.integration
def test_weekly_leaves_a_branch_whose_last_commit_holds_results_reports_and_journal(repo, llama_server):
    main_head = run_git(repo, "rev-parse", "main")
    cmd = [sys.executable, "-m", "bench.cli.main", "weekly", f"--repo={repo}", "--no-update", "--",
           "-k", "llamacpp", "--requests", "2", "--concurrency", "1", "--warmup", "0", "--port", "0"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    told = done.stdout[-3000:] + done.stderr[-2000:]
    machine = detect().slug
    scoped = f"results/tiny/{machine}"
    verdicts = {}  # ok, or degraded because this busy host starved the client: the run says so, and fails
    for split in ("chat", "agent"):
        (result,) = (repo / scoped / split).glob("llamacpp_*.json")
        verdicts[split] = assert_ok_unless_client_limited(json.loads(result.read_text())["verdict"], split)
    not_ok = [f"llamacpp/{split}: {v}" for split, v in sorted(verdicts.items()) if v != "ok"]
    assert done.returncode == (1 if not_ok else 0), told
    summary = json.loads(done.stdout[done.stdout.rindex("\n{") + 1:])
    branch = f"weekly/{date.today().isoformat()}"
    assert summary["branch"] == branch and summary["not_ok"] == not_ok

    # The user's checkout never moved: still main, main untouched, results still on disk.
    assert run_git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert run_git(repo, "rev-parse", "main") == main_head

    log = run_git(repo, "log", "--format=%s", f"main..{branch}").splitlines()
    assert log[0].startswith(f"results: weekly run {date.today().isoformat()} (chat + agent)")
    assert log[1] == "adapter edit(demo): `PORT = 1` -> `PORT = 2` in adapters/demo.py"  # no cell it fixed
    assert "Not a verified fix: no cell failed and then passed with it" in run_git(repo, "log", "-1", "--format=%b",
                                                                                f"{branch}~1")
    assert run_git(repo, "show", f"{branch}:adapters/demo.py") == "PORT = 2"
    files = run_git(repo, "show", "--name-only", "--format=", branch).splitlines()
    for split in ("chat", "agent"):
        assert f"{scoped}/{split}/comparison.json" in files and f"{scoped}/{split}/REPORT.md" in files
        assert any(f.startswith(f"{scoped}/{split}/llamacpp_") and f.endswith(".json") for f in files)
    assert f"{scoped}/weekly_{date.today().isoformat()}.journal.md" in files
    for split in ("chat", "agent"):  # one pytest-html page per split, neither overwriting the other
        page = f"{scoped}/weekly_{date.today().isoformat()}_{split}.html"
        assert page in files and f"test_cell[llamacpp-{split}]" in run_git(repo, "show", f"{branch}:{page}")
    journal = run_git(repo, "show", f"{branch}:{scoped}/weekly_{date.today().isoformat()}.journal.md")
    assert f"Branch: {branch}" in journal and "pytest -m agent: exit 0" in journal
    assert all(f"| llamacpp | {v} |" in journal for v in verdicts.values()), journal
    assert "adapters/demo.py" not in files  # the adapter fix is its own commit, not mixed with results


@pytest.mark.parametrize("pytest_args, code, reason", [
    pytest.param(["--concurrency", "0"], 4,
                 "pytest -m chat exited 4 (usage error): ERROR: --concurrency levels must be >= 1, got '0'",
                 id="usage-error"),
    pytest.param(["-k", "no-such-cell"], 5, "pytest -m chat exited 5 (no tests collected): *deselected in *s",
                 id="no-tests"),
])
@pytest.mark.session
def test_a_session_that_runs_no_cell_fails_the_weekly_run_with_its_reason(repo, pytest_args, code, reason):
    cmd = [sys.executable, "-m", "bench.cli.main", "weekly", f"--repo={repo}", "--no-update", "--splits", "chat", "--",
           *pytest_args]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-2000:]
    assert fnmatch(done.stderr.strip().splitlines()[-1], f"cellbench weekly: {reason}")
    (failure,) = json.loads(done.stdout[done.stdout.rindex("\n{") + 1:])["sessions_failed"]
    assert fnmatch(failure, reason)
    journal = (repo / "results" / "tiny" / detect().slug / f"weekly_{date.today().isoformat()}.journal.md").read_text()
    assert "- Status: failed" in journal
    assert f"- Reason: {failure} (log weekly_{date.today().isoformat()}.log)" in journal
    assert f"pytest -m chat: exit {code}" in journal
