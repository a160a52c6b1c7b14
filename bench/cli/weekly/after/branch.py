"""The branch `cellbench weekly` leaves: each adapter or profile edit its own commit on
`weekly/<date>` (named after the cells it fixed), then the results; the branch is pushed to the
checkout's remote (`origin`, else its only one) unless `--no-push`, never to main, and what the
push did goes into the journal and a commit of its own.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from bench.base.git import PROTECTED_BRANCHES, GitError, branch_worktree, edit_summary, git
from bench.reports.journal import CellEntry, Journal

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
