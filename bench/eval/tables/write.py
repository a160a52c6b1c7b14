"""Writing a benchmark file's edits: under a lock, re-read, plan, verify, then replace atomically.

`apply_edits` is the only function that writes a benchmark file. The new text is written only
when it parses, adds no Python warning and changes exactly the lines the edits reported; the
write is atomic (bench.base.files), and it is abandoned when the file changed behind the lock.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import filelock

from bench.base.files import atomic_write
from bench.eval.tables.edit import EditOutcome, RowEdit, plan_edit
from bench.eval.tables.parse import split_lines


def _warnings_of(text: str) -> Counter[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ast.parse(text)
    return Counter(f"{w.category.__name__}: {w.message}" for w in caught)


def _unexpected_change(original: str, new: str, outcomes: Sequence[EditOutcome]) -> str | None:
    """Position check: dropping the appended lines from `new` must give `original`, except replaced lines."""
    appended = {o.line for o in outcomes if o.action == "appended" and o.line is not None}
    replaced = {o.line for o in outcomes if o.action == "replaced" and o.line is not None}
    new_lines = split_lines(new)
    kept = [(n, line) for n, line in enumerate(new_lines, 1) if n not in appended]
    old_lines = split_lines(original)
    bad = len(kept) != len(old_lines) or any(
        line != old and n not in replaced for (n, line), old in zip(kept, old_lines, strict=True)
    )
    if not bad:
        return None
    diff = "".join(list(difflib.unified_diff(old_lines, new_lines, n=0))[2:12])
    return (f"the change touches more than the edited rows (replaced {sorted(replaced)}, "
            f"appended {sorted(appended)}):\n{diff}")


def verify_rewrite(original: str, new: str, outcomes: Sequence[EditOutcome]) -> str | None:
    """Why `new` must not replace `original`, or None: it parses, adds no warning, changes only what was said."""
    try:
        added = _warnings_of(new) - _warnings_of(original)
    except Exception as exc:  # noqa: BLE001 - anything ast.parse raises means the module would break
        return f"the new text does not parse as Python: {type(exc).__name__}: {exc}"
    if added:
        return f"the new text adds Python warnings: {sorted(added)}"
    return _unexpected_change(original, new, [o for o in outcomes if o.status == "ok"])


class _FileChanged(Exception):
    pass


def _write_unless_changed(path: Path, original: bytes, data: bytes) -> None:
    """Replace `path` atomically with `data`, unless it no longer holds `original` at the rename."""

    def unchanged() -> None:
        if path.read_bytes() != original:
            raise _FileChanged(f"{path} changed while it was being edited (someone edited it without the lock)")

    atomic_write(path, data, check=unchanged)


def lock_path(path: Path, lock_dir: Path) -> Path:
    """One lock per benchmark file, kept out of the source tree."""
    return lock_dir / (hashlib.sha1(str(path.resolve()).encode()).hexdigest() + ".lock")


def _fail_all(outcomes: Sequence[EditOutcome], reason: str) -> list[EditOutcome]:
    return [o if o.status == "fail" else EditOutcome.failed(o.row_id, reason) for o in outcomes]


def _shift(outcomes: list[EditOutcome], inserted: int) -> list[EditOutcome]:
    """Rows reported at or below a newly inserted line have moved down by one; their reasons say so."""
    return [o.at_line(o.line + 1) if o.line is not None and o.line >= inserted else o for o in outcomes]


def _apply_locked(path: Path, edits: Sequence[RowEdit]) -> list[EditOutcome]:
    try:
        raw = path.read_bytes()
        original = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [EditOutcome.failed(e.row_id, f"cannot read {path}: {exc}") for e in edits]
    text = original
    outcomes: list[EditOutcome] = []
    for edit in edits:
        text, outcome = plan_edit(text, edit)
        if outcome.action == "appended" and outcome.line is not None:
            outcomes = _shift(outcomes, outcome.line)
        outcomes.append(outcome)
    if text == original:
        return outcomes
    problem = verify_rewrite(original, text, outcomes)
    if problem:
        return _fail_all(outcomes, f"nothing written: {problem}")
    try:
        _write_unless_changed(path, raw, text.encode("utf-8"))
    except (OSError, _FileChanged) as exc:
        return _fail_all(outcomes, f"nothing written: {type(exc).__name__}: {exc}")
    return outcomes


def apply_edits(
    path: Path, edits: Sequence[RowEdit], lock_dir: Path, *, lock_timeout: float = 600.0
) -> list[EditOutcome]:
    """Apply `edits` to one benchmark file, in order, under its lock; the only function that writes.

    A failed edit leaves the others applying. The result is written only when it parses, adds no
    Python warning and changes exactly the reported lines; the write is atomic, so an interrupted
    run leaves the original file byte for byte. KeyboardInterrupt propagates after the cleanup.
    """
    target = path.resolve()  # write through a symlink, not over it
    if lock_dir.resolve() == target.parent:
        return [EditOutcome.failed(e.row_id, "lock_dir is the benchmark's own directory") for e in edits]
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(lock_path(target, lock_dir)), timeout=lock_timeout)
    try:
        with lock:
            return _apply_locked(target, edits)
    except filelock.Timeout:
        return [
            EditOutcome.failed(e.row_id, f"could not lock {target} within {lock_timeout:g}s") for e in edits
        ]
