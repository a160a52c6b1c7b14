"""The seed's weekly rules, each through `cellbench weekly` on a temporary git repository, with the
suite's fault server as the framework (the generic `openai` cell, started by the model profile):

- a cell whose requests all failed with HTTP 500 is retried once and both attempts are kept: two
  result files on the branch, the journal naming the first beside the second;
- a cell whose failures are not transient (HTTP 400) is not retried;
- a fix attempt that did not make its cell pass is reverted (`git checkout`), its edit kept as a
  patch, the cell given the runbook's skip block, and nothing of it committed as an edit;
- Ctrl-C's sibling SIGTERM during a session leaves the journal `partial` and commits nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from tests.support.gitrepo import run_git

pytestmark = pytest.mark.integration

TODAY = date.today().isoformat()
BRANCH = f"weekly/{TODAY}"
RESULTS_NAME = "flaky"
CELL_ARGS = ["--concurrency", "1", "--requests", "4", "--warmup", "0", "--port", "0", "--ready-timeout", "60"]
REF = "https://github.com/ggml-org/llama.cpp/pull/11500"


def _profile(command: list[str]) -> str:
    return "\n".join([f"name: {RESULTS_NAME}", f"results_name: {RESULTS_NAME}", "builtin: tiny",
                      "formats: {gguf: {served_id: tiny}}", "openai:", f"  command: {json.dumps(command)}",
                      f"  env: {{PYTHONPATH: {json.dumps(str(PROJECT_ROOT))}}}", "  served_id: tiny"]) + "\n"


def _fault(mode: str) -> list[str]:
    return [sys.executable, "-m", "tests.support.faultserver", "--port", "{port}", "--mode", mode]


def _flaky(starts: Path) -> list[str]:
    """The fault server answering every chat request 500 the first time it is started, then
    well: a burst of 5xx that passes. Each start appends a line to `starts`."""
    script = (f'if [ -e "{starts}" ]; then mode=ok; else mode=http500_html; fi; echo "$mode" >> "{starts}"; '
              f'exec "{sys.executable}" -m tests.support.faultserver --port {{port}} --mode "$mode"')
    return ["/bin/sh", "-c", script]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / ".gitignore").write_text("/results/\n")
    (repo / "models" / f"{RESULTS_NAME}.yaml").write_text(_profile(_fault("http400_openai_error")))
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "start")
    return repo


def _weekly(repo: Path, *args: str, popen: bool = False):
    cmd = [sys.executable, "-m", "bench.cli.main", "weekly", f"--repo={repo}", "--no-update", "--splits", "chat",
           "--frameworks", "openai", f"--model={repo / 'models' / f'{RESULTS_NAME}.yaml'}", *args, "--", *CELL_ARGS]
    if popen:
        return subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert "\n{" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(done.stdout[done.stdout.rindex("\n{") + 1:])


def _scoped(repo: Path) -> Path:
    return repo / "results" / RESULTS_NAME / detect().slug


def test_a_burst_of_5xx_is_retried_once_and_both_attempts_are_kept(repo, tmp_path):
    starts = tmp_path / "starts.txt"
    (repo / "models" / f"{RESULTS_NAME}.yaml").write_text(_profile(_flaky(starts)))
    run_git(repo, "commit", "-q", "-am", "a server that fails once")
    done, summary = _weekly(repo)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert summary["not_ok"] == [] and summary["status"] == "completed"
    assert starts.read_text().split() == ["http500_html", "ok"], "one retry, on a fresh server"

    chat = _scoped(repo) / "chat"
    results = {json.loads(p.read_text())["verdict"]["verdict"]: p for p in chat.glob("openai_*.json")}
    assert sorted(results) == ["all-failed", "ok"], "both attempts keep their result files"
    first, second = results["all-failed"], results["ok"]
    assert json.loads(first.read_text())["levels"][0]["errors"] == {"http_5xx": 4}
    comparison = json.loads((chat / "comparison.json").read_text())
    assert json.dumps(comparison).count(json.loads(second.read_text())["run_id"]) >= 1, "the reports take the retry"
    first_run, retry_run = (json.loads(p.read_text())["run_id"] for p in (first, second))
    assert comparison["this_run"] == {"run_id": first_run, "chosen_by": "the weekly run's", "with_runs": [retry_run]}, \
        "this run is the weekly run: its split session's id and its retry's"
    assert comparison["standing"]["openai"]["ok"], "the retry's result is this run's"

    files = run_git(repo, "show", "--name-only", "--format=", BRANCH).splitlines()
    rel = chat.relative_to(repo).as_posix()
    assert f"{rel}/{first.name}" in files and f"{rel}/{second.name}" in files
    journal = run_git(repo, "show", f"{BRANCH}:{_scoped(repo).relative_to(repo).as_posix()}/weekly_{TODAY}.journal.md")
    row = next(line for line in journal.splitlines() if line.startswith("| openai |"))
    assert row.startswith("| openai | ok |") and f"the retry of a transient failure: first attempt all-failed " \
        f"({first.name})" in row
    attempts = journal.split("## Fix Attempts\n\n", 1)[1].split("\n\n", 1)[0]
    assert attempts.startswith("- openai/chat: retried once, its failures transient (4 http_5xx (HTTP 500)): "
                               "first all-failed (")
    assert f"; {first.name}), then ok (" in attempts and attempts.endswith(f"; {second.name})")
    assert "- Status: completed\n" in journal


def test_failures_that_are_not_transient_are_not_retried(repo, tmp_path):
    done, summary = _weekly(repo, "--no-branch")
    assert done.returncode == 1 and summary["not_ok"] == ["openai/chat: all-failed"]
    assert len(list((_scoped(repo) / "chat").glob("openai_*.json"))) == 1, "HTTP 400 is not a passing failure"
    journal = (_scoped(repo) / f"weekly_{TODAY}.journal.md").read_text()
    assert "retried once" not in journal and "- Decision: skip — " in journal


def test_a_failed_fix_attempt_is_reverted_and_the_cell_skipped_with_the_runbooks_block(repo):
    profile = repo / "models" / f"{RESULTS_NAME}.yaml"
    committed = profile.read_text()
    done, summary = _weekly(repo, "--no-push")
    assert done.returncode == 1 and summary["not_ok"] == ["openai/chat: all-failed"], summary

    profile.write_text(_profile(_fault("sse_not_json")))  # the "fix": another failure
    done, summary = _weekly(repo, "--no-push", "--fix-ref", REF)
    assert done.returncode == 1 and summary["not_ok"] == ["openai/chat: all-failed"], summary
    patch_name = f"weekly_{TODAY}_openai_chat.reverted.patch"
    assert profile.read_text() == committed, "git checkout put the profile back"
    assert run_git(repo, "status", "--porcelain", "--", "models") == ""
    assert f"openai/chat: its fix attempt ended all-failed: reverted models/{RESULTS_NAME}.yaml" in done.stderr
    patch = (_scoped(repo) / patch_name).read_text()
    assert f"+++ b/models/{RESULTS_NAME}.yaml" in patch and "+" in patch and "sse_not_json" in patch

    subjects = run_git(repo, "log", "--format=%s", f"main..{BRANCH}").splitlines()
    assert not any(s.startswith(("profile edit", "auto-fix")) for s in subjects), subjects
    assert summary["commits"] == [subjects[0]] and subjects[0].startswith(f"results: weekly run {TODAY} (chat)")
    scoped_rel = _scoped(repo).relative_to(repo).as_posix()
    assert f"{scoped_rel}/{patch_name}" in run_git(repo, "show", "--name-only", "--format=", BRANCH).splitlines()
    assert run_git(repo, "show", f"{BRANCH}:models/{RESULTS_NAME}.yaml") + "\n" == committed

    journal = (_scoped(repo) / f"weekly_{TODAY}.journal.md").read_text()
    skipped = journal.split("## Skipped Cells\n\n", 1)[1].split("\n## ", 1)[0]
    block = skipped.split("### openai (chat)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split(":", 1)[0] for line in block] == ["- **Error**", "- **Why skipped**", "- **Prior occurrences**",
                                                         "- **Relevant logs**"]
    assert block[0].startswith("- **Error**: ") and "[invalid_sse, 4x]" in block[0]
    assert block[1].startswith(f"- **Why skipped**: its one fix attempt of the run (models/{RESULTS_NAME}.yaml) ended "
                               "all-failed; no second attempt this run")
    assert block[1].endswith(f"the edit was reverted (`git checkout HEAD -- models/{RESULTS_NAME}.yaml`)")
    assert block[2] == "- **Prior occurrences**: none on record: no earlier journal in this folder"
    assert f"{patch_name} (the reverted edit)" in block[3] and f"weekly_{TODAY}.log" in block[3]
    assert "its fix attempt failed and was reverted: skipped (see Skipped Cells)" in journal


def test_sigterm_during_a_session_leaves_a_partial_journal_and_commits_nothing(repo, tmp_path):
    (repo / "models" / f"{RESULTS_NAME}.yaml").write_text(_profile(_fault("silence_warmup")))
    run_git(repo, "commit", "-q", "-am", "a server that never answers")
    proc = _weekly(repo, popen=True)
    try:
        logs = _scoped(repo) / "chat" / "logs"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any("POST /v1/chat/completions" in p.read_text(errors="replace")
                                                       for p in logs.glob("*.server.log")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # the session is waiting on a request the server never answers
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 2, out[-3000:] + err[-3000:]
    assert "cellbench weekly: interrupted (SIGTERM): journal " in err and "nothing committed or pushed" in err
    assert json.loads(out[out.rindex("\n{") + 1:])["status"] == "partial"
    journal = (_scoped(repo) / f"weekly_{TODAY}.journal.md").read_text()
    assert "- Status: partial\n" in journal and "Interrupted (SIGTERM): nothing committed or pushed" in journal
    assert run_git(repo, "rev-parse", BRANCH) == run_git(repo, "rev-parse", "main"), "no commit on the branch"
