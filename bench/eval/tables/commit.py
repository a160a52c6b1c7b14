"""The refresh's local commit, as sglang-omni's `/running-eval-suite` ends (by default; `--no-commit`).

One commit holding the edited benchmark files only, in the repository that holds them: `git
commit -- <files>` leaves anything else the user staged staged and uncommitted. Its subject is
the runner's own, `[Docs] Refresh reference benchmarks via /running-eval-suite (<utc-ts>)`, with
the run's UTC timestamp as that runner names its run folders (20261202T015540Z); the body says
what cellbench knows (hardware, replaced/appended counts, the Source prefix, the run dir). Never
pushed. The run then ends with the runner's three lines: Review, Revert, Run dir.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence, Set
from dataclasses import dataclass
from pathlib import Path

from bench.base import clock
from bench.base.git import git, toplevel

SUBJECT = "[Docs] Refresh reference benchmarks via /running-eval-suite ({utc_ts})"
NOTHING = "no changes — nothing to commit"
_UTC_TS = re.compile(r"^\d{8}T\d{6}Z")  # a run id starts with one: 20261202T015540Z-ab12


@dataclass(frozen=True)
class Committed:
    ok: bool
    lines: list[str]  # what the run prints at its end
    record: dict | None = None  # for run-state.json: the commit made, or why none was

    @classmethod
    def failed(cls, why: str) -> Committed:
        return cls(False, [f"commit FAILED {why}; the edits are in the working tree"],
                   {"status": "fail", "reason": why})


def utc_ts(run_id: str) -> str:
    """The run's timestamp as the runner writes it, `yyyymmddThhmmssZ`: the run id's own, else now
    (a `--run-id` that is not one)."""
    found = _UTC_TS.match(run_id)
    return found.group(0) if found else f"{clock.now():%Y%m%dT%H%M%SZ}"


def message(run_dir: Path, hardware: str, summary: dict, source_prefix: str, carried: Sequence[str] = ()) -> str:
    subject = SUBJECT.format(utc_ts=utc_ts(run_dir.name))
    also = "".join(f"{rel} also carries edits made before the run.\n" for rel in carried)
    return (f"{subject}\n\n"
            f"Hardware: {hardware}; {summary['replaced']} row(s) replaced, {summary['appended']} appended.\n"
            f"Measured on {source_prefix} by cellbench eval, run {run_dir.name}.\n"
            f"{also}Run dir: {run_dir}\n")


def uncommitted(files: list[Path]) -> set[Path]:
    """Those of `files` that differ from HEAD now: taken before the run, so a commit that would
    carry the user's own edits of a table file along with the refresh says so."""
    dirty: set[Path] = set()
    for path in dict.fromkeys(files):
        root = toplevel(path)
        if root is not None and git(root, "status", "--porcelain", "--", str(path), timeout=30).stdout.strip():
            dirty.add(path)
    return dirty


def _under(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def commit_tables(files: list[Path], run_dir: Path, hardware: str, summary: dict, source_prefix: str,
                  dirty_before: Set[Path] = frozenset()) -> Committed:
    """Commit `files` (the edited benchmark files) in their repository; never push. A file in
    `dirty_before` had uncommitted edits before the run: they go in too, and the lines say so."""
    if not files:
        return Committed(True, [NOTHING], {"status": "nothing to commit"})
    root = toplevel(files[0])
    if root is None or any(toplevel(path) != root for path in files):
        return Committed.failed(f"(not all in one git repository): {', '.join(map(str, files))}")
    rel = [str(path.resolve().relative_to(root.resolve())) for path in files]
    carried = [name for name, path in zip(rel, files, strict=True) if path in dirty_before]
    text = message(run_dir, hardware, summary, source_prefix, carried)
    for step in (["add", "--", *rel], ["commit", "-q", "-m", text, "--", *rel]):
        done = git(root, *step)
        if done.returncode != 0:
            return Committed.failed(f"(git {step[0]}): {(done.stderr or done.stdout).strip()}")
    sha = git(root, "rev-parse", "--short=7", "HEAD").stdout.strip()
    where = "" if _under(Path(os.getcwd()), root) else " (cd there to run these)"
    subject = text.splitlines()[0]
    warnings = [f"WARNING: {name} had uncommitted edits before the run; they are in this commit too"
                for name in carried]
    return Committed(True, [*warnings, f"Committed {sha} in {root}{where}: {subject}",
                            "Review:   git show HEAD",
                            "Revert:   git reset --soft HEAD~1   # keeps the edits, staged",
                            f"Run dir:  {run_dir}"],
                     {"status": "ok", "commit": sha, "repository": str(root), "subject": subject, "files": rel})
