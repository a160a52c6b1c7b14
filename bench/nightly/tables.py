"""The night's reference-table edits, kept: the eval step runs `pytest -m eval --no-commit`, which
leaves its rewritten rows (`benchmarks/eval/benchmark_*.py`, or wherever a config's rows point) as
uncommitted edits of the runner's checkout, and a job's checkout is thrown away with it.

`save_table_edits` (the machine job's `cellbench nightly tables` step, after the eval rows) writes
them beside the machine's results: `eval-tables.patch` (`git diff --binary HEAD` of every tracked
file the night changed) and `eval-tables.json` (the commit it applies to, the files, the
machine), so they travel in the machine's artifact. `apply_table_edits` (`cellbench nightly
publish`) applies each machine's patch on `nightly/<date>` and keeps the patch itself under
`nightly/<date>/tables/<machine>.patch`; one that does not apply (two machines editing the same
lines) stays a patch there, and the commit message says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.base.files import atomic_write
from bench.base.git import GitError, git

PATCH = "eval-tables.patch"
RECORD = "eval-tables.json"


def save_table_edits(repo: Path, out: Path, machine: str | None) -> str:
    """Write the checkout's edits of tracked files as a patch into `out`; one line saying what was kept."""
    listed = git(repo, "diff", "--name-only", "HEAD")
    if listed.returncode != 0:
        raise GitError(f"{repo}: not a git checkout with a commit: {(listed.stderr or listed.stdout).strip()}")
    files = [line for line in listed.stdout.splitlines() if line]
    if not files:
        return f"no table edits in {repo}: nothing to keep"
    diff = git(repo, "diff", "--binary", "HEAD", "--", *files, check=True).stdout
    base = git(repo, "rev-parse", "HEAD", check=True).stdout.strip()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / PATCH, diff)
    atomic_write(out / RECORD, json.dumps({"base": base, "files": files, "machine": machine}, indent=1) + "\n")
    return f"kept {len(files)} edited file(s) as {out / PATCH} (on {base[:12]}): {', '.join(files)}"


def apply_table_edits(tree: Path, folders: list[Path], day: str) -> list[str]:
    """Apply each machine folder's patch in the worktree `tree` (staged) and keep it under
    `nightly/<day>/tables/`; one line per patch for the commit message."""
    said = []
    for folder in folders:
        patch = folder / PATCH
        if not patch.is_file():
            continue
        try:
            record = json.loads((folder / RECORD).read_text())
        except (OSError, ValueError):
            record = {}
        machine = record.get("machine") or folder.name.removeprefix("nightly-")
        kept = tree / "nightly" / day / "tables" / f"{machine}.patch"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(patch, kept)
        done = git(tree, "apply", "--index", "--", str(patch.resolve()))
        if done.returncode == 0:
            said.append(f"{machine}: table edits applied ({', '.join(record.get('files', [])) or 'its patch'})")
        else:
            why = (done.stderr or done.stdout).strip().splitlines()
            said.append(f"{machine}: table edits not applied ({(why or ['git apply failed'])[-1]}); "
                        f"kept as nightly/{day}/tables/{machine}.patch")
    return said
