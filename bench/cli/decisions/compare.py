"""`cellbench compare OLD NEW`: is the new run better, worse, or the same as far as the data can tell?

OLD and NEW are each a result file, a run id (every cell result of that run under the results
root) or a results folder (the newest result of every cell under it). Cells pair by (model,
machine, split, framework); two single results of different cells pair with each other. Levels
pair by label ("c=8"). Every compared figure of a level pair is judged by
bench.core.metrics.stats.change, with each side's machine noise floor (bench.core.noise) where one is
stored beside that side's results. Regressions print first, then improvements, then the rest; a
cell or level on one side only is listed, and so are the settings two paired cells ran with
otherwise (bench.reports.comparison's methodology keys). A pair where either side does not stand ok
(bench.reports.standing: a verdict other than ok or fixed, an interrupted run, an imported result)
is not judged: its figures never make a regression or an improvement, and it is listed after the
judged ones with why. Exit 0, 1 when any regression was found, 2 for a usage error (nothing to
compare, an unreadable file), 3 when no regression was found but some pair was not judged.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.base.paths import results_root
from bench.core import noise
from bench.core.level_run import level_label
from bench.core.metrics.stats.change import Change, compare_levels
from bench.core.result.files import NotAResult, read_result
from bench.core.result.store import COMPARISON_FILE, LoadedResult, load_results
from bench.plugins.opts.settings import cell_option
from bench.reports.comparison import setting_differences
from bench.reports.standing import standing_of

RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}$")
ORDER = ("regression", "improvement", "no detectable change", "cannot tell")
REGRESSION_EXIT = 1
USAGE_EXIT = 2
NOT_JUDGED_EXIT = 3


class CompareError(ValueError):
    """A side names nothing to compare, or a file that cannot be read: one line for the user."""


Cell = tuple[str, str, str, str]  # model, machine, split, framework


def cell_of(r: LoadedResult) -> Cell:
    return r.model, r.machine, r.split, r.framework


def cell_text(cell: Cell) -> str:
    return "/".join(cell)


def root_of(r: LoadedResult) -> Path | None:
    """The results root a result lies in (<root>/<model>/<machine>/<split>/<file>), or None for a
    file kept elsewhere (it has no machine's noise floor beside it)."""
    up = r.path.resolve().parents
    if len(up) < 4 or (up[2].name, up[1].name, up[0].name) != (r.model, r.machine, r.split):
        return None
    return up[3]


def _latest(results: Iterable[LoadedResult]) -> list[LoadedResult]:
    newest: dict[Cell, LoadedResult] = {}
    for r in results:
        if cell_of(r) not in newest or r.recency() > newest[cell_of(r)].recency():
            newest[cell_of(r)] = r
    return [newest[c] for c in sorted(newest)]


def _folder(folder: Path) -> list[LoadedResult]:
    found: list[LoadedResult] = []
    dirs = {p.parent for p in folder.rglob("*.json") if p.name != COMPARISON_FILE}
    for d in sorted(dirs):
        if noise.FOLDER in d.relative_to(folder).parts or d.name == noise.FOLDER:
            continue  # floors, and the runs that measured them
        found += load_results(d)[0]
    return _latest(found)


def resolve(side: str, root: Path) -> list[LoadedResult]:
    """The results one side names (module docstring); CompareError when it names none."""
    path = Path(side)
    if path.is_file():
        try:
            data = read_result(path)
        except NotAResult as exc:
            raise CompareError(f"{side}: not a readable cellbench result: {exc}") from None
        return [LoadedResult(path, data)]
    if path.is_dir():
        found = _folder(path)
        if not found:
            raise CompareError(f"{side}: no cellbench result under this folder")
        return found
    if RUN_ID.match(side):
        files = sorted(p for p in root.rglob(f"*_{side}.json") if noise.FOLDER not in p.relative_to(root).parts)
        loaded = [r for d in sorted({p.parent for p in files}) for r in load_results(d)[0] if r.run_id == side]
        if not loaded:
            raise CompareError(f"{side}: no result of this run id under {root}")
        return _latest(loaded)
    raise CompareError(f"{side}: not a result file, a results folder or a run id (like 20261201T220000Z-ab12)")


@dataclass
class Side:
    result: LoadedResult
    floor: noise.Floor | None = None
    floor_note: str | None = None  # the floor's settings differ, or its file is broken


def with_floor(r: LoadedResult) -> Side:
    root = root_of(r)
    if root is None:
        return Side(r)
    try:
        floor = noise.load(root, r.model, r.machine, r.split, r.framework)
    except noise.FloorError as exc:
        return Side(r, None, f"noise floor not used: {exc}")
    if floor is None:
        return Side(r)
    differs = floor.differs_from(r.data)
    note = (f"noise floor of {floor.day} ran otherwise, so it may not apply: {'; '.join(differs)}"
            if differs else None)
    return Side(r, floor, note)


@dataclass
class Pair:
    old: Side
    new: Side
    levels: dict[str, list[Change]] = field(default_factory=dict)
    only_old: list[str] = field(default_factory=list)  # level labels
    only_new: list[str] = field(default_factory=list)
    not_judged: str | None = None  # why: a side that does not stand ok ("new: degraded: 6/18 requests failed ...")

    @property
    def cell(self) -> Cell:
        return cell_of(self.new.result)

    def settings_differ(self) -> dict[str, dict[str, str]]:
        """{run_config key: {"old": value, "new": value}} (as JSON) where the two ran otherwise:
        another request count, ignore_eos, a shared server... a change may then come from that."""
        configs = {"old": self.old.result.data["run_config"], "new": self.new.result.data["run_config"]}
        return setting_differences(configs)

    def title(self) -> str:
        old, new = cell_of(self.old.result), cell_of(self.new.result)
        head = cell_text(new) if old == new else f"{cell_text(old)} -> {cell_text(new)}"
        return f"{head} ({self.old.result.run_id} -> {self.new.result.run_id})"


def judge_pair(old: Side, new: Side) -> Pair:
    apart = [f"{name}: {s.text()}" for name, s in (("old", standing_of(old.result.data)),
                                                   ("new", standing_of(new.result.data))) if not s.ok]
    pair = Pair(old, new, not_judged="; ".join(apart) or None)
    before = {level_label(lv): lv for lv in old.result.data["levels"]}
    after = {level_label(lv): lv for lv in new.result.data["levels"]}
    for label, level in after.items():
        if label not in before:
            pair.only_new.append(label)
            continue
        if pair.not_judged:
            continue
        pair.levels[label] = compare_levels(
            before[label], level,
            old_floor=old.floor.spreads(label) if old.floor else None,
            new_floor=new.floor.spreads(label) if new.floor else None)
    pair.only_old = [label for label in before if label not in after]
    return pair


@dataclass
class RunComparison:
    pairs: list[Pair]
    only_old: list[LoadedResult]
    only_new: list[LoadedResult]

    def changes(self) -> list[tuple[Pair, str, Change]]:
        return [(p, label, c) for p in self.pairs for label, cs in p.levels.items() for c in cs]

    def counts(self) -> Counter[str]:
        return Counter(c.decision for _, _, c in self.changes())

    def regressions(self) -> list[tuple[Pair, str, Change]]:
        return regressed(self)

    def bases(self) -> Counter[str]:
        return Counter(c.basis for _, _, c in self.changes() if c.decision != "cannot tell")

    def not_judged(self) -> list[Pair]:
        return [p for p in self.pairs if p.not_judged]


def regressed(comparison: RunComparison) -> list[tuple[Pair, str, Change]]:
    """Every (pair, level label, change) judged a regression."""
    return [t for t in comparison.changes() if t[2].decision == "regression"]


def compare(old: Sequence[LoadedResult], new: Sequence[LoadedResult], *, pair_single: bool = True) -> RunComparison:
    """Pair the cells of two sides and judge every level both have (module docstring); with
    `pair_single`, one result on each side pair whatever their cells."""
    if pair_single and len(old) == 1 and len(new) == 1:
        return RunComparison([judge_pair(with_floor(old[0]), with_floor(new[0]))], [], [])
    before, after = {cell_of(r): r for r in old}, {cell_of(r): r for r in new}
    pairs = [judge_pair(with_floor(before[c]), with_floor(after[c])) for c in sorted(after) if c in before]
    return RunComparison(pairs, [before[c] for c in sorted(before) if c not in after],
                      [after[c] for c in sorted(after) if c not in before])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 or word.endswith("change") or word == "cannot tell" else f"{n} {word}s"


def summary(comparison: RunComparison) -> str:
    n = comparison.counts()
    line = ", ".join(_plural(n[d], d) for d in ORDER)
    if apart := len(comparison.not_judged()):
        line += f"; {apart} cell{'' if apart == 1 else 's'} not judged"
    bases = comparison.bases()
    said = " | ".join(f"{b}: {k} figure{'' if k == 1 else 's'}" for b, k in bases.most_common())
    return line + (f"; basis: {said}" if bases else "")


def _line(pair: Pair, label: str, c: Change, *, cell: bool = True) -> str:
    scale = c.figure.scale
    values = f"{c.old * scale:.4g} -> {c.new * scale:.4g}  " if c.old is not None and c.new is not None else ""
    where = f"{cell_text(pair.cell)} " if cell else ""
    return f"  {where}{label:<6} {c.figure.label:<24} {values}{c.text()}"


def render(comparison: RunComparison, *, every: bool = False) -> list[str]:
    """The printed comparison: regressions, improvements, no detectable change, then cannot tell
    (grouped by why, one line per cell and reason unless `every`), notes, and the summary."""
    out = [f"comparing {pair.title()}" for pair in comparison.pairs]
    changes = comparison.changes()
    several = len(comparison.pairs) > 1  # else every line is of the one cell the first line names
    for decision in ORDER[:3]:
        chosen = [t for t in changes if t[2].decision == decision]
        if chosen:
            out += ["", f"{decision} ({len(chosen)}):", *(_line(*t, cell=several) for t in chosen)]
    unclear = [t for t in changes if t[2].decision == "cannot tell"]
    if unclear:
        out += ["", f"cannot tell ({len(unclear)}):"]
        if every:
            out += [_line(*t, cell=several) for t in unclear]
        else:
            why = Counter((cell_text(p.cell), c.why) for p, _, c in unclear)
            out += [f"  {cell} ({k} figure{'' if k == 1 else 's'}): {reason}" for (cell, reason), k in why.items()]
    if apart := comparison.not_judged():  # after every judged figure (bench.reports.standing)
        out += ["", f"not judged ({len(apart)}): a side that is not ok is never faster or slower than another",
                *(f"  {cell_text(p.cell)}: {p.not_judged}" for p in apart)]
    notes = [f"{cell_text(p.cell)}: {side_name}: {s.floor_note}" for p in comparison.pairs
             for side_name, s in (("old", p.old), ("new", p.new)) if s.floor_note]
    notes += [f"{cell_text(p.cell)}: ran otherwise, so a change may come from the settings: "
              + "; ".join(f"{key} {v['old']} -> {v['new']}" for key, v in differs.items())
              for p in comparison.pairs if (differs := p.settings_differ())]
    notes += [f"{cell_text(p.cell)}: level {label} only in old" for p in comparison.pairs for label in p.only_old]
    notes += [f"{cell_text(p.cell)}: level {label} only in new" for p in comparison.pairs for label in p.only_new]
    notes += [f"only in old: {cell_text(cell_of(r))} ({r.path})" for r in comparison.only_old]
    notes += [f"only in new: {cell_text(cell_of(r))} ({r.path})" for r in comparison.only_new]
    if notes:
        out += ["", "notes:", *(f"  {n}" for n in notes)]
    return [*out, "", summary(comparison)]


def to_json(comparison: RunComparison) -> dict[str, Any]:
    def cell(r: LoadedResult) -> dict[str, str]:
        return dict(zip(("model", "machine", "split", "framework"), cell_of(r), strict=True))

    floors = {}
    for p in comparison.pairs:
        for name, s in (("old", p.old), ("new", p.new)):
            if s.floor is not None or s.floor_note:
                floors[f"{cell_text(cell_of(s.result))} {name}"] = {
                    "path": str(s.floor.path) if s.floor else None,
                    "measured_at": s.floor.measured_at if s.floor else None, "note": s.floor_note}
    return {
        "changes": [{**cell(p.new.result), "level": label, "old_run_id": p.old.result.run_id,
                     "new_run_id": p.new.result.run_id, **c.to_json()} for p, label, c in comparison.changes()],
        "levels_only_in": {"old": [{**cell(p.new.result), "level": lv} for p in comparison.pairs for lv in p.only_old],
                           "new": [{**cell(p.new.result), "level": lv} for p in comparison.pairs for lv in p.only_new]},
        "cells_only_in": {"old": [{**cell(r), "file": str(r.path)} for r in comparison.only_old],
                          "new": [{**cell(r), "file": str(r.path)} for r in comparison.only_new]},
        "floors": floors,
        "settings_differ": {cell_text(p.cell): differs for p in comparison.pairs if (differs := p.settings_differ())},
        "not_judged": [{**cell(p.new.result), "old_run_id": p.old.result.run_id, "new_run_id": p.new.result.run_id,
                        "why": p.not_judged} for p in comparison.not_judged()],
        "counts": {d: comparison.counts()[d] for d in ORDER},
        "summary": summary(comparison),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench compare", description=__doc__.splitlines()[0],
                                     epilog="Exit 0: compared, no regression; 1: at least one regression; "
                                            "2: nothing to compare; 3: no regression, but a pair not judged as a "
                                            "side is not ok (docs/comparisons.md).")
    parser.add_argument("old", help="a result file, a run id or a results folder")
    parser.add_argument("new", help="a result file, a run id or a results folder")
    cell_option("--results-dir").add_argument(parser, shown="the checkout's results/: where run ids are looked up")
    parser.add_argument("--json", action="store_true", help="every judged figure as JSON")
    parser.add_argument("--all", action="store_true", dest="every",
                        help="list every figure that cannot be told, not one line per cell and reason")
    args = parser.parse_args(argv)
    here = Path.cwd()
    root = results_root(args.results_dir, here)
    try:
        comparison = compare(resolve(args.old, root), resolve(args.new, root))
    except CompareError as exc:
        print(f"cellbench compare: {exc}", file=sys.stderr)
        return USAGE_EXIT
    if not comparison.pairs:
        print("cellbench compare: no cell is on both sides; "
              f"old has {', '.join(cell_text(cell_of(r)) for r in comparison.only_old)}, "
              f"new has {', '.join(cell_text(cell_of(r)) for r in comparison.only_new)}", file=sys.stderr)
        return USAGE_EXIT
    if args.json:
        print(json.dumps(to_json(comparison), indent=1))
    else:
        print("\n".join(render(comparison, every=args.every)))
    return REGRESSION_EXIT if comparison.regressions() else NOT_JUDGED_EXIT if comparison.not_judged() else 0


if __name__ == "__main__":
    raise SystemExit(main())
