"""Git in a test's own repository, as a committer named `t`: the tests that build a checkout
(weekly runs, the nightly's branch) need commits without the host's git identity."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_git(repo: Path, *args: str) -> str:
    """`git -C repo args...`, raising on failure; its stdout, stripped."""
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()
