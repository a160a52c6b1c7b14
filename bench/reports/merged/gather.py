"""`cellbench report --merge DIR... [--expect M1,M2] [--out merged]`: one report across machines.

Each DIR is one machine's results as they arrive from a nightly job: a results root
(`<model>/<machine>/<split>/<framework>_<run id>.json`), or a folder holding one as `results/`
(a CI artifact). For each model and split the report has a column per machine and a row per
framework; a cell is what that machine's own store selection chose (bench.reports.comparison),
else the newest journal entry of the cell (a skip, a failure before any result was written),
else "not run". Numbers are never pooled across machines: one machine must come from exactly
one DIR, so a machine found in two is refused rather than merged.

A machine that sent nothing for a model and split (expected but absent, or present without that
split) keeps its column, marked `no result from <machine>`: a gap in a nightly run must show.
Writes merged.json (the data; `Merged` in bench.reports.merged.render), MERGED.md, plots/ and a
self-contained index.html into `--out`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from bench.base.clock import now_iso
from bench.core.figures import block_of
from bench.core.figures.memory import MIB
from bench.core.noise import Floors
from bench.core.result import imported
from bench.core.result.files import write_json_atomic
from bench.core.result.model import Result
from bench.core.result.store import COMPARISON_FILE
from bench.core.verdicts import GREEN_VERDICTS
from bench.reports.comparison import Comparison, build_comparison, standings
from bench.reports.journal.names import journal_files
from bench.reports.lenses import fidelity_views
from bench.reports.merged import index, machines
from bench.reports.merged.render import (
    NO_RESULT,
    NOT_RUN,
    Failure,
    IgnoredEntry,
    Merged,
    MergedCell,
    MergedTable,
    Missing,
    SourceFolder,
    cell_standing,
)
from bench.reports.standing import Standing, standing_of

MERGED_JSON = "merged.json"
MERGED_VERSION = 1
ARTIFACT_RESULTS = "results"  # the results root inside a CI artifact folder


class MergeError(Exception):
    """The folders cannot be merged (a machine in two of them, a folder that is not there)."""


def missing_note(machine: str) -> str:
    """The note in every cell of a machine's column when it sent nothing for the table."""
    return f"no result from {machine}"


def _holds_results(split_dir: Path) -> bool:
    return any(p.name != COMPARISON_FILE and not p.name.startswith(".") for p in split_dir.glob("*.json"))


@dataclass(frozen=True)
class MachineDir:
    """`<root>/<model>/<machine>/` of one DIR: its split directories and journals."""

    source: Path  # the DIR as given: file paths in the report are relative to it
    root: Path  # the results root in it
    model: str
    machine: str

    @property
    def path(self) -> Path:
        return self.root / self.model / self.machine

    @cached_property
    def result_splits(self) -> set[str]:
        return {d.name for d in self.path.iterdir() if d.is_dir() and _holds_results(d)}

    @cached_property
    def journals(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every readable journal's JSON twin (`weekly_<day>.journal.json`, or an earlier run's
        `journal_<day>.json`), newest day first. An unreadable one is passed over: journals are
        written atomically, so a file that does not parse is not one of ours."""
        found = []
        for path in [f.state for f in journal_files(self.path) if f.state is not None]:
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(state, dict) and isinstance(state.get("cells"), list):
                found.append((path, state))
        return found

    @property
    def splits(self) -> set[str]:
        """The splits this machine reported: a result file, or a journal entry (a split whose
        every cell failed before writing a result still ran, and its failures must show)."""
        return self.result_splits | {split for _, state in self.journals for c in state["cells"]
                                     if isinstance(c, dict) and isinstance(split := c.get("split"), str)}

    def journal_cells(self, split: str) -> dict[str, tuple[Path, dict[str, Any]]]:
        """Per framework, its entry of `split` in the newest journal that has one, and that journal."""
        newest: dict[str, tuple[Path, dict[str, Any]]] = {}
        for path, state in self.journals:
            for cell in state["cells"]:
                if isinstance(cell, dict) and cell.get("split") == split and isinstance(cell.get("framework"), str):
                    newest.setdefault(cell["framework"], (path, cell))
        return newest


def results_root(folder: Path) -> Path:
    """`folder/results` when the folder is an artifact that holds one, else the folder itself."""
    inner = Path(folder) / ARTIFACT_RESULTS
    return inner if inner.is_dir() else Path(folder)


def find_machines(folder: Path) -> list[MachineDir]:
    """Every `<model>/<machine>/` under the folder's results root that holds results or journals."""
    if not Path(folder).is_dir():
        raise MergeError(f"{folder}: no such folder")
    root = results_root(folder)
    found = []
    for machine_dir in sorted(root.glob("*/*/")):
        # a trailing slash selects only directories from Python 3.11 on; hidden ones (.git) are not results
        if not machine_dir.is_dir() or machine_dir.name.startswith(".") or machine_dir.parent.name.startswith("."):
            continue
        md = MachineDir(Path(folder), root, machine_dir.parent.name, machine_dir.name)
        if md.splits:
            found.append(md)
    return found


def _check_one_place(per_folder: list[tuple[Path, list[MachineDir]]]) -> None:
    """Raise MergeError for a machine found in two folders: its results would have to be mixed."""
    home: dict[str, Path] = {}
    for folder, found in per_folder:
        for md in found:
            other = home.setdefault(md.machine, folder)
            if other != folder:
                raise MergeError(f"machine {md.machine} is in two folders, {other} and {folder}: "
                                 "one machine's results must come from one place")


def _tps(result: Result) -> dict[str, float | None]:
    """Output tok/s by concurrency level. The merged report compares concurrency levels across
    machines; open-loop rate levels are another kind of level and are left out of it."""
    levels = sorted((lv for lv in result["levels"] if "concurrency" in lv), key=lambda lv: lv["concurrency"])
    return {str(lv["concurrency"]): lv["output_throughput_tps"] for lv in levels}


def _memory(result: Result) -> dict[str, float]:
    """The server's peak memory in MiB by concurrency level, where the level has a reading."""
    return {str(lv["concurrency"]): round(peak / MIB, 1) for lv in result["levels"]
            if "concurrency" in lv and (peak := block_of(lv, "memory").get("peak_bytes")) is not None}


def result_cell(result: Result, file: str, floors: Floors | None = None,
                standing: Standing | None = None, fidelity: str | None = None) -> MergedCell:
    """The cell of a chosen result: its verdict and standing (bench.reports.standing; without one
    given, its verdict's), per-level output tok/s (and its estimate, with the machine's noise floor:
    bench.reports.between) and server peak memory, its fidelity as REPORT.md says it, and provenance."""
    harness = result.get("harness")
    return {"source": "result", "verdict": result["verdict"]["verdict"], "reason": result["verdict"]["reason"],
            "output_tps": _tps(result), "run_id": result["run_id"],
            "harness_commit": harness["commit"] if harness else None,
            "harness_dirty": harness["dirty"] if harness else None,
            "framework_version": result["framework"]["version"], "file": file, "imported": imported.label(result),
            "run_config": result.get("run_config"), "tps_estimates": machines.tps_estimates(result, floors),
            "standing": (standing or standing_of(result)).to_json(), "peak_memory_mib": _memory(result),
            "fidelity": fidelity}


def note_cell(source: str, verdict: str, reason: str, file: str | None = None) -> MergedCell:
    """A cell without a result: a journal entry, a framework not run, or a machine that sent nothing."""
    return {"source": source, "verdict": verdict, "reason": reason, "output_tps": {}, "run_id": None,
            "harness_commit": None, "harness_dirty": None, "framework_version": None, "file": file, "imported": None,
            "run_config": None, "tps_estimates": {}, "standing": None, "peak_memory_mib": {}, "fidelity": None}


def _relative(path: Path, md: MachineDir) -> str:
    return path.relative_to(md.source).as_posix()


def machine_cells(md: MachineDir, split: str) -> tuple[dict[str, MergedCell], list[IgnoredEntry]]:
    """This machine's cells of `split`: the store's choice per framework (for this machine only),
    then the journal's verdict for a framework that has no result file; and the files left out."""
    cells: dict[str, MergedCell] = {}
    ignored: list[IgnoredEntry] = []
    split_dir = md.path / split
    if split in md.result_splits:
        comparison: Comparison = build_comparison(split_dir, machine=md.machine)  # this run: the machine's newest
        marks, views = standings(comparison), fidelity_views(comparison, split_dir)
        for fw, result in comparison["results"].items():
            cells[fw] = result_cell(result, _relative(split_dir / comparison["provenance"][fw]["file"], md),
                                    Floors(split_dir), marks[fw], views[fw].full if fw in views else None)
        ignored = [{"machine": md.machine, "file": _relative(split_dir / i["file"], md), "reason": i["reason"]}
                   for i in comparison["ignored"]]
    for fw, (journal, entry) in md.journal_cells(split).items():
        if fw not in cells:
            cells[fw] = note_cell("journal", str(entry.get("verdict") or "unknown"), str(entry.get("reason") or ""),
                                  _relative(journal, md))
    return cells, ignored


def build_table(model: str, split: str, machines: list[str], found: dict[str, MachineDir]) -> MergedTable:
    """One model and split: a column per machine (a note where it sent nothing), a row per
    framework seen on any machine: by name, those that stand ok on no machine (failed, skipped,
    not from their machine's newest run everywhere) last."""
    per_machine: dict[str, dict[str, MergedCell]] = {}
    ignored: list[IgnoredEntry] = []
    for machine, md in found.items():
        per_machine[machine], left_out = machine_cells(md, split)
        ignored += left_out
    frameworks = sorted({fw for cells in per_machine.values() for fw in cells})
    missing = {m: missing_note(m) for m in machines if m not in per_machine}
    table: MergedTable = {"model": model, "split": split, "machines": machines, "frameworks": frameworks,
                          "missing": missing, "cells": {}, "ignored": ignored}
    for fw in frameworks:
        table["cells"][fw] = {m: _cell_of(fw, m, per_machine, missing) for m in machines}
    table["frameworks"] = sorted(frameworks, key=lambda fw: (not any(
        c["source"] == "result" and cell_standing(c).ok for c in table["cells"][fw].values()), fw))
    return table


def _cell_of(fw: str, machine: str, per_machine: dict[str, dict[str, MergedCell]],
             missing: dict[str, str]) -> MergedCell:
    if machine in missing:
        return note_cell("missing", NO_RESULT, missing[machine])
    found = per_machine[machine].get(fw)
    return found or note_cell("missing", NOT_RUN, f"no result file and no journal entry of {fw} from {machine}")


def _failures(table: MergedTable) -> list[Failure]:
    """Cells with a verdict (from a result or a journal) other than ok or skipped."""
    return [{"model": table["model"], "split": table["split"], "machine": m, "framework": fw,
             "verdict": cell["verdict"], "reason": cell["reason"]}
            for fw in table["frameworks"] for m in table["machines"]
            if (cell := table["cells"][fw][m])["source"] != "missing" and cell["verdict"] not in GREEN_VERDICTS]


def _missing(table: MergedTable, reporting: set[str]) -> list[Missing]:
    return [{"model": table["model"], "split": table["split"], "machine": m,
             "reason": f"sent no {table['model']} {table['split']} results" if m in reporting else "sent nothing"}
            for m in table["missing"]]


def _split_order(key: tuple[str, str]) -> tuple[str, bool, str]:
    return key[0], key[1] != "chat", key[1]  # chat first, as the journal lists splits


def collect(dirs: list[Path], expect: list[str]) -> Merged:
    """The merged document of `dirs` (each a results root or a folder with `results/`).

    Columns are the `expect` machines in order, then the other machines found, sorted. Raises
    MergeError when a folder is not there or a machine is found in two folders."""
    if len({Path(d).resolve() for d in dirs}) < len(dirs):
        raise MergeError("a folder is given twice: " + ", ".join(str(d) for d in dirs))
    per_folder = [(Path(d), find_machines(Path(d))) for d in dirs]
    _check_one_place(per_folder)
    everything = [md for _, machines in per_folder for md in machines]
    reporting = {md.machine for md in everything}
    expect = list(dict.fromkeys(expect))
    machines = [*expect, *sorted(reporting - set(expect))]
    by_key: dict[tuple[str, str], dict[str, MachineDir]] = {}
    for md in everything:
        for split in md.splits:
            by_key.setdefault((md.model, split), {})[md.machine] = md
    tables = [build_table(model, split, machines, by_key[model, split])
              for model, split in sorted(by_key, key=_split_order)]
    sources: list[SourceFolder] = [{"dir": str(folder), "machines": sorted({md.machine for md in found})}
                             for folder, found in per_folder]
    return {"schema_version": MERGED_VERSION, "generated_at": now_iso(), "sources": sources, "expected": expect,
            "machines": machines, "tables": tables,
            "failures": [f for t in tables for f in _failures(t)],
            "missing": [m for t in tables for m in _missing(t, reporting)]}


def write_merged(merged: Merged, out: Path) -> list[Path]:
    """merged.json (atomically), then MERGED.md, the plots and index.html; returns the files written."""
    path = Path(out) / MERGED_JSON
    write_json_atomic(path, merged)
    return [path, *index.write_report(merged, Path(out))]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cellbench report --merge", description=__doc__.splitlines()[0])
    parser.add_argument("--merge", nargs="*", type=Path, required=True, metavar="DIR",
                        help="one machine's results: a results root, or a folder holding one as results/")
    parser.add_argument("--expect", default="", metavar="M1,M2,...",
                        help="machine slugs that should have reported; one that did not gets its column anyway")
    parser.add_argument("--out", type=Path, default=Path("merged"), help="where the report goes [merged]")
    return parser


def _tell(merged: Merged) -> None:
    """Each gap and each failure on stderr, one line each, for a CI log."""
    for m in merged["missing"]:
        print(f"missing: {m['model']} {m['split']}: no result from {m['machine']} ({m['reason']})", file=sys.stderr)
    for f in merged["failures"]:
        print(f"failure: {f['model']} {f['split']} on {f['machine']}: {f['framework']} {f['verdict']}: "
              f"{f['reason']}", file=sys.stderr)
    for t in merged["tables"]:
        for i in t["ignored"]:
            print(f"ignored: {i['file']}: {i['reason']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Merge, write the report and print its files; 0 when written, 2 when the folders cannot be
    merged or hold no result at all."""
    args = _parser().parse_args(argv)
    expect = [m.strip() for m in args.expect.split(",") if m.strip()]
    try:
        merged = collect(args.merge, expect)
    except MergeError as exc:
        print(f"cellbench report --merge: {exc}", file=sys.stderr)
        return 2
    if not merged["tables"]:
        where = ", ".join(map(str, args.merge)) or "no folder (no machine sent one)"
        print(f"cellbench report --merge: no results in {where}", file=sys.stderr)
        return 2
    for path in write_merged(merged, args.out):
        print(path)
    _tell(merged)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
