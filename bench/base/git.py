"""The one way cellbench calls git: no prompt, no standard input, output captured, bounded time."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypedDict

from bench.base.doc import Doc


class GitError(RuntimeError):
    pass


def git(repo: Path, *args: str, check: bool = False, timeout: float | None = 60) -> subprocess.CompletedProcess:
    """`git -C repo ARGS`. With `check`, a non-zero exit raises GitError naming the command and git's
    own message. Without git on PATH, or when it hangs, the result has returncode 127 or 124."""
    command = ["git", "-C", str(repo), *args]
    if not shutil.which("git"):
        done = subprocess.CompletedProcess(command, 127, "", "git is not installed")
    else:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess(command, 124, "", f"git {' '.join(args)} took over {timeout} s")
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done


def toplevel(path: Path) -> Path | None:
    """The working tree that holds `path` (a file or a folder), or None outside any."""
    start = path if path.is_dir() else path.parent
    done = git(start, "rev-parse", "--show-toplevel", timeout=10)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def head_commit(repo: Path) -> str | None:
    done = git(repo, "rev-parse", "HEAD", timeout=10)
    return done.stdout.strip() if done.returncode == 0 else None


class Revision(TypedDict):
    """A checkout's revision, as a result's `harness` block records it (bench.core.result.model.Harness)."""

    commit: Annotated[str | None, Doc("`git rev-parse HEAD` of the checkout, or null outside a git checkout.")]
    dirty: Annotated[bool | None, Doc("Whether tracked files differed from that commit when the cell finished (`git "
                                      "status --porcelain --untracked-files=no`); null outside a git checkout.")]


def revision(repo: Path) -> Revision:
    """`{"commit": HEAD, "dirty": tracked files differ from it}`; both None outside a git checkout."""
    commit = head_commit(repo)
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git(repo, "status", "--porcelain", "--untracked-files=no", timeout=30)
    return {"commit": commit, "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


PROTECTED_BRANCHES = ("main", "master")


@contextmanager
def branch_worktree(repo: Path, branch: str) -> Iterator[Path]:
    """A temporary worktree of `branch` (made from HEAD when it does not exist yet), removed on exit.

    Commits made there land on `branch` while the checkout at `repo` keeps its own branch and
    files. A protected branch (main, master) is refused: results never land there."""
    if branch in PROTECTED_BRANCHES:
        raise GitError(f"refusing to commit results to {branch}")
    if not git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").stdout.strip():
        git(repo, "branch", branch, "HEAD", check=True)
    with tempfile.TemporaryDirectory(prefix="cellbench-branch-") as tmp:
        tree = Path(tmp) / "tree"
        git(repo, "worktree", "add", "--quiet", str(tree), branch, check=True)
        try:
            yield tree
        finally:
            git(repo, "worktree", "remove", "--force", str(tree))


def edit_summary(repo: Path, rel: str, width: int = 60) -> str:
    """What the uncommitted edit of `rel` does, in one line for a commit subject: `` `old` -> `new` ``
    for a changed line, `drop`/`add` for one side only, then how many lines changed beyond it.
    A file not in HEAD is `new <rel>`."""
    if git(repo, "cat-file", "-e", f"HEAD:{rel}", timeout=10).returncode != 0:
        return f"new {rel}"
    diff = git(repo, "diff", "--no-color", "--no-ext-diff", "-U0", "HEAD", "--", rel, timeout=30).stdout.splitlines()

    def changed(sign: str) -> list[str]:
        return [line[1:].strip() for line in diff if line.startswith(sign) and not line.startswith(sign * 3)
                and line[1:].strip()]

    def short(text: str) -> str:
        return f"`{text if len(text) <= width else text[:width - 3] + '...'}`"

    removed, added = changed("-"), changed("+")
    if removed and added:
        what = f"{short(removed[0])} -> {short(added[0])}"
    elif removed or added:
        what = f"{'drop' if removed else 'add'} {short((removed or added)[0])}"
    else:
        return f"whitespace-only edit of {rel}"
    rest = len(removed) + len(added) - (2 if removed and added else 1)
    return what + (f" (+{len(added)} -{len(removed)} lines in {rel})" if rest else f" in {rel}")
