"""The one way cellbench calls git: no prompt, no standard input, output captured, bounded time."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


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
