"""A night's results and merged report, committed on `nightly/<date>` (never main) and pushed.

Each machine's folder holds a results root (`results/<model>/<machine>/...`); machine slugs are
distinct, so the roots combine into one `results/` tree without overwriting each other, as
`cellbench weekly` lays it out. The merged report goes to `nightly/<date>/` beside it, and each
machine's reference-table edits (its eval rows') are applied on the branch, their patches kept
under `nightly/<date>/tables/` (bench.nightly.tables).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.base.git import GitError, branch_worktree, git
from bench.nightly.tables import apply_table_edits
from bench.reports.merged.gather import results_root

BRANCH_PREFIX = "nightly/"


def publish(repo: Path, branch: str, merged: Path, folders: list[Path], *, push: bool) -> str | None:
    """Commit the folders' results and the merged report on `branch`; returns the commit's subject,
    or None when there was nothing new to commit."""
    if not branch.startswith(BRANCH_PREFIX):
        raise GitError(f"nightly results go to a {BRANCH_PREFIX}<date> branch, not {branch}")
    day = branch.removeprefix(BRANCH_PREFIX)
    with branch_worktree(repo, branch) as tree:
        for folder in folders:
            shutil.copytree(results_root(folder), tree / "results", dirs_exist_ok=True)
        shutil.copytree(merged, tree / "nightly" / day, dirs_exist_ok=True)
        tables = apply_table_edits(tree, folders, day)
        git(tree, "add", "--force", "--", "results", f"nightly/{day}", check=True)  # results/ is ignored on main
        subject = f"results: nightly {day} from {len(folders)} machine folders"
        if git(tree, "diff", "--cached", "--quiet").returncode == 0:
            return None
        body = "".join(f"- {line}\n" for line in tables)
        git(tree, "commit", "-q", "-m", f"{subject}\n\n{body}" if body else subject, check=True)
    if push:
        git(repo, "push", "-u", "origin", branch, check=True, timeout=600)
    return subject
