"""The two ends of `cellbench weekly`: what it settles before its first cell, when it stops early,
and the branch it leaves (its commits, and the push).

- The `weekly/<date>` branch is claimed first (made from HEAD unless it exists): a run that
  cannot commit finds out in a second, not after hours.
- The machine is kept awake for the run: `caffeinate` on macOS, `systemd-inhibit` on Linux where
  logind answers; the journal says which, or why neither.
- A set-up that cannot run a single cell (no selected framework runs here, or none is installed
  after the update) stops the run with the command that fixes it.
- After the chat split, when every chat cell that ran failed for one and the same reason (the
  model, the prompts, the machine: not the frameworks), the agent split is not started.
- Files outside `adapters/` and the model profiles (`models/`) edited while the run ran are
  named and never committed by it.
- At the end, each adapter or profile edit is its own commit on the branch, then the results;
  the branch is pushed to the checkout's remote (`origin`, else its only one) unless `--no-push`,
  never to main, and what the push did goes into the journal and a commit of its own.
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

from bench.base.git import PROTECTED_BRANCHES, GitError, branch_worktree, edit_summary, git
from bench.core.verdicts import GREEN_VERDICTS
from bench.reports.journal import CellEntry, Journal

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


def systemic_failure(chat_cells: Sequence[CellEntry]) -> str | None:
    """The one reason every chat cell that ran failed for, or None. Numbers, paths, quoted names
    and the framework's own name are masked, so "llamacpp: prompts file /x missing" and
    "vllm: prompts file /y missing" are one reason; a skipped cell did not run."""
    ran = [c for c in chat_cells if c.verdict != "skipped"]
    if not ran or any(c.verdict in GREEN_VERDICTS for c in ran):
        return None
    masked = {_VARIABLE.sub("…", (c.reason or c.verdict).replace(c.framework, "<framework>")) for c in ran}
    if len(masked) != 1:
        return None
    return f"every chat cell ({len(ran)}) failed the same way: {ran[0].reason or ran[0].verdict}"


# ------------------------------------------------------------------ the branch at the end

PUSH_MODES = ("auto", "yes", "no")  # a remote there: push / --push: push, none is a failure / --no-push


def fix_edits(repo: Path) -> list[str]:
    """The checkout's adapter modules and model profiles that differ from HEAD (edited or new)."""
    status = git(repo, "status", "--porcelain", "--untracked-files=all", "--", "adapters", "models",
                 check=True).stdout.splitlines()
    return [rel for line in status if line[:2].strip() in ("M", "A", "??")
            and ((rel := line[3:].strip('"')).startswith("adapters/") and rel.endswith(".py")
                 or rel.startswith("models/"))]


def fixes_of(journal: Journal, rel: str) -> list[CellEntry]:
    """The day's fixed cells (the journal keeps them when a later run replaces a cell) whose edit is `rel`."""
    return [c for c in journal.fixes.values() if c.evidence.get("fix", {}).get("adapter") == rel]


def edit_message(repo: Path, rel: str, journal: Journal, note: str | None) -> tuple[str, list[CellEntry]]:
    """The commit message of one adapter or profile edit, and the fixed cells it is the fix of.

    `auto-fix(<fw>, <splits>): <what>` when a cell failed earlier in the run and passed with this
    very file (its sha256 is the one the passing cell ran); otherwise `adapter edit(<fw>)` (or
    `profile edit(<profile>)`), which says it is not a verified fix."""
    what = note or edit_summary(repo, rel)
    sha = hashlib.sha256((repo / rel).read_bytes()).hexdigest()
    fixed = [c for c in fixes_of(journal, rel) if c.evidence["fix"]["sha256_after"] == sha]
    if not fixed:
        why = ("edited again after the run that verified it" if fixes_of(journal, rel)
               else "no cell failed and then passed with it in this run")
        kind = "profile" if rel.startswith("models/") else "adapter"
        return f"{kind} edit({Path(rel).stem}): {what}\n\nNot a verified fix: {why}.\n", []
    splits = "+".join(sorted({c.split for c in fixed}, key=lambda s: (s != "chat", s)))
    body = "".join(f"- {c.split}: it was {fix['from_verdict']} in run {fix['from_run_id']}: {fix['from_reason']}\n"
                   f"  upstream: {fix.get('reference') or '(none recorded)'}\n"
                   f"  verified by run {fix['run_id']} ({Path(c.result_path or '').name}): {c.reason}\n"
                   for c in fixed for fix in [c.evidence["fix"]])
    return f"auto-fix({fixed[0].framework}, {splits}): {what}\n\n{body}", fixed


def push_remote(repo: Path) -> str | None:
    """`origin`, else the checkout's only remote; None without one."""
    remotes = git(repo, "remote").stdout.split()
    return "origin" if "origin" in remotes else (remotes[0] if len(remotes) == 1 else None)


def _push(repo: Path, branch: str, remote: str) -> tuple[bool, str]:
    url = git(repo, "remote", "get-url", remote).stdout.strip()
    done = git(repo, "push", "-u", remote, f"refs/heads/{branch}:refs/heads/{branch}", timeout=600)
    if done.returncode == 0:
        return True, f"pushed {branch} to {remote} ({url})"
    said = (done.stderr or done.stdout).strip().splitlines()
    return False, f"push of {branch} to {remote} ({url}) failed: {(said or ['no output'])[-1]}"


def _copy_in(tree: Path, repo: Path, results: Path) -> str:
    rel_results = results.resolve().relative_to(repo.resolve())
    shutil.copytree(results, tree / rel_results, dirs_exist_ok=True)
    git(tree, "add", "--force", "--", str(rel_results), check=True)  # results/ is ignored on main, on purpose
    return str(rel_results)


def commit_on_branch(repo: Path, branch: str, results: Path, message: str, push: str, journal: Journal,
                     note: str | None = None) -> tuple[list[str], bool]:
    """Adapter and profile edits of the checkout (one commit each, named after the cells they
    fixed), then the results with the journal that names those commits, on `branch` in a
    worktree; then the push (`push`: one of PUSH_MODES). Returns the commits' subjects and
    whether the run's end state failed to reach the remote it was meant for."""
    if branch in PROTECTED_BRANCHES:
        raise GitError(f"refusing to commit results to {branch}")
    commits: list[str] = []
    remote = push_remote(repo)
    with branch_worktree(repo, branch) as tree:
        for rel in fix_edits(repo):
            text, fixed = edit_message(repo, rel, journal, note)
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, tree / rel)
            git(tree, "add", "--", rel, check=True)
            if git(tree, "diff", "--cached", "--quiet", check=False).returncode == 0:
                continue  # committed by an earlier run of the day
            git(tree, "commit", "-q", "-m", text, "--", rel, check=True)
            subject = text.splitlines()[0]
            commits.append(subject)
            sha = git(tree, "rev-parse", "--short=12", "HEAD", check=True).stdout.strip()
            for cell in fixed:
                cell.evidence["fix"]["commit"] = f"{sha} {subject}"
        if push == "no":
            journal.push = "not pushed (--no-push)"
        elif remote is None:
            asked = " (--push asked for one)" if push == "yes" else ""
            journal.push = f"not pushed: the checkout has no git remote{asked}"
        else:
            journal.push = f"to {remote}, after the results commit (a later commit records how it went)"
        journal.save()  # the Auto-Fixes section names the commits
        _copy_in(tree, repo, results)
        if git(tree, "diff", "--cached", "--quiet", check=False).returncode != 0:
            git(tree, "commit", "-q", "-m", message, check=True)
            commits.append(message.splitlines()[0])
        if remote is None or push == "no":
            return commits, push == "yes"
        pushed, journal.push = _push(repo, branch, remote)
        journal.save()
        rel_results = _copy_in(tree, repo, results)
        subject = f"journal: {'pushed' if pushed else 'push failed'}, weekly run {journal.day}"
        git(tree, "commit", "-q", "-m", subject, "--", rel_results, check=True)
        commits.append(subject)
        if pushed:
            again, said = _push(repo, branch, remote)
            if not again:
                journal.push += f"; the commit that records it was not pushed ({said})"
                journal.save()
        return commits, not pushed
