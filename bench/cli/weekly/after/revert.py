"""A fix attempt that did not make its cell pass is reverted, and the cell skipped.

SiliconBench's runbook: "If verification fails: revert the fix (`git checkout -- <files>`), fall
through to skip". After the sessions, each fix attempt of this run whose re-run ended anything
but ok or fixed has its edited files put back as HEAD has them, with `git checkout HEAD --` in the
checkout the run commits from; the edit itself is kept, as the diff it was, in
`weekly_<date>_<framework>_<split>.reverted.patch` beside the journal (committed with the
results, so the attempt can be read and picked up again). A file git does not track cannot be
checked out: it is left in place and the journal says so. The cell's journal entry keeps its
measured verdict and gets the runbook's skip block (Error / Why / Prior / Logs) under Skipped
Cells, and nothing of the failed edit is committed as an adapter or profile edit.
"""

from __future__ import annotations

from pathlib import Path

from bench.base.files import atomic_write
from bench.base.git import git
from bench.core.verdicts import Verdict
from bench.reports.journal import FIX_REVERTED, Journal

PASSED = (Verdict.OK.value, Verdict.FIXED.value)


def _tracked(repo: Path, rel: str) -> bool:
    return git(repo, "ls-files", "--error-unmatch", "--", rel).returncode == 0


def revert_failed_fixes(repo: Path, journal: Journal, run_id: str) -> list[str]:
    """Revert each failed fix attempt of this run (see the module's docstring); returns one line
    per attempt for the run's output."""
    said = []
    for key, attempt in sorted(journal.fix_attempts.items()):
        framework, _, split = key.partition("/")
        cell = journal.cells.get((framework, split))
        outcome = attempt.get("outcome")
        if outcome is None or outcome in PASSED or FIX_REVERTED in attempt or cell is None \
                or run_id not in (cell.result_path or ""):
            continue
        files = [f for f in str(attempt.get("edited", "")).split(", ") if f and f != "nothing"]
        tracked = [f for f in files if _tracked(repo, f)]
        changed = [f for f in tracked if git(repo, "diff", "--quiet", "HEAD", "--", f).returncode != 0]
        patch_name = f"weekly_{journal.day}_{framework}_{split}.reverted.patch"
        if changed:
            diff = git(repo, "diff", "--binary", "HEAD", "--", *changed, check=True).stdout
            atomic_write(journal.directory / patch_name, diff)
            git(repo, "checkout", "HEAD", "--", *changed, check=True)
        block = {"files": changed, "patch": patch_name if changed else None,
                 "left": [f for f in files if f not in tracked],
                 "command": f"git checkout HEAD -- {' '.join(changed)}" if changed else None}
        attempt[FIX_REVERTED] = block
        cell.evidence[FIX_REVERTED] = {**block, "outcome": outcome}
        if changed:
            said.append(f"{key}: its fix attempt ended {outcome}: reverted {', '.join(changed)} "
                        f"(`git checkout HEAD -- ...`; the edit is kept in {patch_name})")
        left = block["left"]
        if left:
            said.append(f"{key}: its fix attempt ended {outcome}; {', '.join(left)} not tracked by git: left in place")
    journal.save()
    return said
