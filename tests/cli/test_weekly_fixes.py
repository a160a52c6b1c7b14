"""A week run the runbook's way, on a copy of this checkout with llama.cpp: the `weekly/<date>` branch
exists before the first cell; an adapter broken at the start of the week fails its cell, an edit
between two runs repairs it, and the re-run ends `fixed` with its own `auto-fix(llamacpp, chat)`
commit and an Auto-Fixes entry; a `chat=20s` budget caps the chat cell; an edit under `bench/`
made while the run runs is refused by name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from tests.support.gitrepo import run_git

WORKING = '    argv.append("--no-webui")\n'
BROKEN = '    argv += ["--no-webui", "--no-such-flag"]\n'

# Stands in for the person or agent beside the run: at session start it records whether the
# weekly branch already exists, and with PROBE_EDIT set it edits that file of the checkout.
PROBE = """import os, subprocess
from pathlib import Path

def pytest_sessionstart(session):
    repo = os.environ["PROBE_REPO"]
    listed = subprocess.run(["git", "-C", repo, "branch", "--list", os.environ["PROBE_BRANCH"]],
                            capture_output=True, text=True).stdout
    Path(os.environ["PROBE_OUT"]).write_text(listed)
    if os.environ.get("PROBE_EDIT"):
        target = Path(repo, os.environ["PROBE_EDIT"])
        target.write_text(target.read_text() + "# edited while the weekly run ran\\n")
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """This project as it is on disk (tracked and new files), committed in a repository of its own
    with the llama.cpp adapter broken: the state the week starts from."""
    repo = tmp_path / "cellbench"
    listed = run_git(PROJECT_ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, listed):
        if (PROJECT_ROOT / rel).is_file():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / rel, repo / rel)
    adapter = repo / "adapters" / "llamacpp.py"
    assert WORKING in adapter.read_text()
    adapter.write_text(adapter.read_text().replace(WORKING, BROKEN))
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "the week starts")
    return repo


REF = "https://github.com/ggml-org/llama.cpp/pull/11500"  # the upstream change a fix follows


def weekly(repo: Path, probe_dir: Path, *pytest_args: str, edit: str | None = None,
           update: str = "--no-update", fix_ref: str | None = None) -> tuple[int, dict, str]:
    """`cellbench weekly` of the copy (its own code runs the cells), chat split, llama.cpp only."""
    branch = f"weekly/{date.today().isoformat()}"
    env = {**os.environ, "PYTHONPATH": str(probe_dir), "PROBE_REPO": str(repo), "PROBE_BRANCH": branch,
           "PROBE_OUT": str(probe_dir / "branch_at_start.txt"), "PROBE_EDIT": edit or ""}
    cmd = [sys.executable, "-m", "bench.cli.main", "weekly", update, "--splits", "chat",
           "--frameworks", "llamacpp", *(["--fix-ref", fix_ref] if fix_ref else []),
           "--", "-p", "weekly_probe", "--concurrency", "1", "--warmup", "0",
           "--port", "0", *pytest_args]
    done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert "\n{" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout[done.stdout.rindex("\n{") + 1:]), done.stderr


@pytest.mark.integration
def test_a_week_with_a_broken_adapter_fixed_between_runs(checkout, tmp_path, llama_server):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    (probe_dir / "weekly_probe.py").write_text(PROBE)
    today = date.today().isoformat()
    branch, scoped = f"weekly/{today}", checkout / "results" / "tiny" / detect().slug

    # 1. The broken adapter fails its cell; the branch was there before the cell started.
    code, summary, _ = weekly(checkout, probe_dir, "--requests", "2", update="--pinned")
    assert code == 1 and summary["not_ok"] == ["llamacpp/chat: failed"], summary
    assert branch in (probe_dir / "branch_at_start.txt").read_text()
    journal = (scoped / f"weekly_{today}.journal.md").read_text()
    assert "- llamacpp: pinned b11434, selected b11434 (pinned)" in journal  # --pinned: the adapter's version
    failed = json.loads(next((scoped / "chat").glob("llamacpp_*.json")).read_text())
    assert failed["framework"]["version_choice"] == "pinned"
    assert "- Since the last pass:\n  no earlier ok result of llamacpp" in journal

    # 2. Someone repairs the adapter in the checkout and runs the week again, naming the upstream
    #    change: `fixed`, and that was the cell's one fix attempt of the run.
    adapter = checkout / "adapters" / "llamacpp.py"
    adapter.write_text(adapter.read_text().replace(BROKEN, WORKING))
    code, summary, stderr = weekly(checkout, probe_dir, "--requests", "2", fix_ref=REF)
    assert code == 0 and summary["fixed"] == ["llamacpp/chat"] and summary["not_ok"] == [], (summary, stderr[-2000:])
    subject = ('auto-fix(llamacpp, chat): `argv += ["--no-webui", "--no-such-flag"]` -> `argv.append("--no-webui")` '
               "in adapters/llamacpp.py")
    assert summary["commits"][0] == subject
    log = run_git(checkout, "log", "--format=%s", f"main..{branch}").splitlines()
    assert log[1] == subject and log[0].startswith(f"results: weekly run {today} (chat)")
    assert run_git(checkout, "show", f"{branch}:adapters/llamacpp.py") + "\n" == adapter.read_text()
    body = run_git(checkout, "log", "-1", "--format=%b", f"{branch}~1")
    assert body.startswith("- chat: it was failed in run ") and "verified by run " in body
    assert f"\n  upstream: {REF}\n" in body

    result_file = next(p for p in sorted((scoped / "chat").glob("llamacpp_*.json"))
                       if json.loads(p.read_text())["verdict"]["verdict"] == "fixed")
    verdict = json.loads(result_file.read_text())["verdict"]
    assert verdict["reason"].startswith(f"ok after an edit of adapters/llamacpp.py (upstream: {REF}); it was failed ")
    assert verdict["fix"]["reference"] == REF
    assert verdict["fix"]["adapter"] == "adapters/llamacpp.py"
    assert verdict["fix"]["sha256_before"] != verdict["fix"]["sha256_after"]
    journal = run_git(checkout, "show", f"{branch}:results/tiny/{detect().slug}/weekly_{today}.journal.md")
    assert "| llamacpp | fixed |" in journal and "- Status: completed_with_fixes" in journal
    fixes = journal[journal.index("## Auto-Fixes"):journal.index("## Failures")]
    assert "### llamacpp / chat" in fixes and "- Why: it was failed in run " in fixes and f"- Reference: {REF}" in fixes
    assert "- llamacpp/chat: adapters/llamacpp.py: fixed (reference " in fixes  # the Fix Attempts line
    assert f"- Commit: {run_git(checkout, 'rev-parse', '--short=12', f'{branch}~1')} {subject}" in fixes
    assert f"- HTML: [chat](weekly_{today}_chat.html), [index](weekly_{today}.html)" in journal
    index = (scoped / f"weekly_{today}.html").read_text()
    assert f'href="weekly_{today}_chat.html"' in index and "<td>llamacpp</td><td>fixed</td>" in index

    # 3. A chat budget of 20 s caps the cell, and an engine edit made during the run is refused.
    code, summary, stderr = weekly(checkout, probe_dir, "--requests", "100000", "--cell-budget", "chat=20s",
                                   edit="bench/core/metrics/level.py")
    assert code != 0 and summary["not_ok"] == ["llamacpp/chat: capped"], summary
    assert "edited during the run outside adapters/ and models/, not committed: bench/core/metrics/level.py" in stderr
    assert "bench/core/metrics/level.py" not in run_git(checkout, "log", "--name-only", "--format=", f"main..{branch}")
    journal = (scoped / f"weekly_{today}.journal.md").read_text()
    assert "| llamacpp | capped | cell budget of 20 s reached at c=1" in journal
    since = journal[journal.index("- Since the last pass:"):]  # the capped cell's entry under Failures
    assert since.splitlines()[1].startswith("  last ok: llamacpp_") and "(llamacpp b11434)" in since.splitlines()[1]
    assert "\n  upstream: " in since and "\n  adapter: " in since
    fixes = journal[journal.index("## Auto-Fixes"):journal.index("## Failures")]  # the day's fix stays on record
    assert "### llamacpp / chat" in fixes and "- Since then: a later run of the cell ended capped" in fixes
