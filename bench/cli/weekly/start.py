"""What `cellbench weekly` settles before its first cell, and when it stops early (the branch it
leaves: bench.cli.weekly.after.branch).

- The `weekly/<date>` branch is claimed first (made from HEAD unless it exists): a run that
  cannot commit finds out in a second, not after hours.
- The machine is kept awake for the run: `caffeinate` on macOS, `systemd-inhibit` on Linux where
  logind answers; the journal says which, or why neither.
- A set-up that cannot run a single cell (no selected framework runs here, or none is installed
  after the update) stops the run with the command that fixes it.
- After the chat split, when every chat cell that ran failed, whatever the reasons, the agent
  split is not started (`all_failed`).
- Files outside `adapters/` and the model profiles (`models/`) edited while the run ran are
  named and never committed by it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench.base.git import PROTECTED_BRANCHES, GitError, git
from bench.core.verdicts import Verdict
from bench.reports.journal import CellEntry

SETTLE_S = 1.0  # how long an inhibitor must stay up to count as holding


def claim_branch(repo: Path, branch: str) -> str:
    """Make `branch` from HEAD (or find it); raise GitError saying why it cannot be."""
    if branch in PROTECTED_BRANCHES:
        raise GitError(f"refusing to commit results to {branch}")
    if git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").stdout.strip():
        return f"{branch} (exists; this run adds to it)"
    done = git(repo, "branch", branch, "HEAD")
    if done.returncode != 0:
        raise GitError(f"cannot create {branch} in {repo}: {(done.stderr or done.stdout).strip()}")
    return f"{branch} (new, from {git(repo, 'rev-parse', '--short', 'HEAD').stdout.strip()})"


def _inhibitor_command() -> tuple[list[str], str] | None:
    if sys.platform == "darwin" and shutil.which("caffeinate"):
        return ["caffeinate", "-i", "-s", "-w", str(os.getpid())], "caffeinate -i -s"
    if shutil.which("systemd-inhibit"):
        return (["systemd-inhibit", "--what=sleep:idle", "--who=cellbench", "--why=weekly benchmark run",
                 "--mode=block", "sleep", "infinity"], "systemd-inhibit --what=sleep:idle")
    return None


@contextlib.contextmanager
def kept_awake() -> Iterator[str]:
    """Hold the machine awake for the block; yields what holds it (or why nothing does)."""
    found = _inhibitor_command()
    if found is None:
        yield "nothing keeps the machine awake: neither caffeinate (macOS) nor systemd-inhibit is installed"
        return
    argv, label = found
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(SETTLE_S)
    if proc.poll() is not None:  # e.g. no logind in a container
        said = proc.stderr.read().decode(errors="replace").strip().splitlines() if proc.stderr else []
        yield f"nothing keeps the machine awake: {label} exited {proc.returncode} ({(said or ['no output'])[-1]})"
        return
    try:
        yield f"{label} (pid {proc.pid}) keeps the machine awake"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def setup_problem(selected: Sequence[str], runnable: Sequence[str], versions: Sequence[dict]) -> str | None:
    """Why no cell can run at all, with the command that fixes it; None when some can."""
    if not runnable:
        return (f"none of {', '.join(selected) or 'the frameworks'} runs on this machine: "
                "`cellbench doctor` lists where each runs")
    installed = [v["framework"] for v in versions if v.get("after")]
    if versions and not installed:
        failed = "; ".join(f"{v['framework']}: {v.get('error', 'not installed')}" for v in versions)
        return f"no framework could be installed ({failed}); fix: `cellbench install {' '.join(runnable)}`"
    return None


def tree_snapshot(repo: Path) -> dict[str, str]:
    """What git sees changed or untracked in the checkout, by path: a hash of each file's bytes
    (`deleted` for one that is gone), so that edits made during the run can be told apart."""
    status = git(repo, "status", "--porcelain", "--untracked-files=all", "--no-renames").stdout.splitlines()
    snapshot = {}
    for line in status:
        path = line[3:].strip().strip('"')
        try:
            snapshot[path] = hashlib.sha1((repo / path).read_bytes()).hexdigest()
        except OSError:
            snapshot[path] = "deleted"
    return snapshot


FIXABLE_FOLDERS = ("adapters/", "models/")  # what a fix may edit: adapter modules and model profiles


def edited_outside_adapters(before: dict[str, str], after: dict[str, str], results: str = "results/") -> list[str]:
    """Files outside adapters/ and models/ (and the run's own `results` folder) that changed while
    the run ran: the engine, prompts, config. An agent following the weekly procedure may fix an
    adapter or a model profile, nothing else; these are never committed by the run."""
    changed = {path for path in after.keys() | before.keys() if before.get(path) != after.get(path)}
    return sorted(path for path in changed if not path.startswith((*FIXABLE_FOLDERS, results)))


_VARIABLE = re.compile(r"\d+(\.\d+)?|/\S+|'[^']*'")


def _failed(cell: CellEntry) -> bool:
    try:
        return Verdict(cell.verdict).is_failure
    except ValueError:  # not a verdict (an interrupted entry): it did not fail
        return False


def all_failed(chat_cells: Sequence[CellEntry]) -> str | None:
    """Why the run bails out before the agent split, or None: every chat cell that ran failed
    (failed, all-failed, wrong-model or oom), whatever the reasons, as SiliconBench's runbook
    stops when all frameworks fail ("something systemic is wrong: the model download, a shared
    dependency"). One reason for all (numbers, paths, quoted names and the framework's own name
    masked) is said once; different ones are listed. A skipped cell did not run; one ok, fixed,
    degraded or capped cell means the set-up can measure; and one cell alone (a run narrowed to
    one framework) says nothing of the set-up: its failure is that framework's, triaged alone."""
    ran = [c for c in chat_cells if c.verdict != Verdict.SKIPPED.value]
    if len(ran) < 2 or not all(_failed(c) for c in ran):
        return None
    masked = {_VARIABLE.sub("…", (c.reason or c.verdict).replace(c.framework, "<framework>")) for c in ran}
    if len(masked) == 1:
        return f"every chat cell ({len(ran)}) failed the same way: {ran[0].reason or ran[0].verdict}"
    listed = "; ".join(f"{c.framework} {c.verdict} ({c.reason or 'no reason'})"
                       for c in sorted(ran, key=lambda c: c.framework))
    return f"every chat cell that ran ({len(ran)}) failed: {listed}"
