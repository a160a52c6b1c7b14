"""SiliconBench's result folders inside a results tree, and the `cellbench import` line for each.

SiliconBench files a run as `results/<model>/<split>/<framework>_<YYYYMMDD_HHMMSS>.json`, or under
a machine folder, `results/<model>/m5pro/<split>/`; a SiliconBench user's `--results-dir` may
also be its `$RESULTS_DIR`, `results/<model>[/<machine>]`, one or two levels down. cellbench's
tree is `<model>/<machine>/<split>/` of its own result files. `cellbench report` asks this module
which folders hold SiliconBench files that no cellbench result imported yet (by sha256), so it
can name the command that converts them instead of saying there is nothing, and never writes its
reports over SiliconBench's in a folder that holds nothing of cellbench's.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from os.path import commonpath, normpath, relpath
from pathlib import Path

from bench.base.defaults import SPLITS  # SiliconBench's split folders are named after them
from bench.core.result.store import COMPARISON_FILE, load_results
from bench.host.machine import SLUG, slugify
from bench.imports import siliconbench_file
from bench.imports.tree import MACHINE_SUBDIR, model_of

RESULT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*_\d{8}_\d{6}\.json$")  # <framework>_<YYYYMMDD_HHMMSS>.json
UNKNOWN_MACHINE = "SLUG"  # the placeholder the line prints when neither folder nor files name the machine


def siliconbench_only(split_dir: Path) -> bool:
    """Whether every result-like JSON file in `split_dir` is named as SiliconBench names its
    results, and there is at least one: a folder with nothing of cellbench's to report on."""
    names = [p.name for p in split_dir.glob("*.json")
             if p.name != COMPARISON_FILE and not p.name.startswith(".") and "_metalstat" not in p.name]
    return bool(names) and all(RESULT_NAME.match(name) for name in names)


@dataclass(frozen=True)
class Found:
    """One split folder's SiliconBench results that no cellbench result imported."""

    split_dir: Path
    machine: str | None  # the slug its machine folder or its files' chip names; None: unknown
    model: str | None  # the model, when `cellbench import` could not tell it alone (then --model)
    files: tuple[Path, ...]
    tree_root: Path  # the folder holding its <model>/ folder: where the imported results belong


def _machine(split_dir: Path, files: list[siliconbench_file.SiliconBenchFile]) -> str | None:
    if MACHINE_SUBDIR.match(split_dir.parent.name):
        return split_dir.parent.name
    chips = {f.data["machine"]["chip"] for f in files if isinstance((f.data.get("machine") or {}).get("chip"), str)}
    slugs = {slugify(chip) for chip in chips if chip.strip()}
    return slugs.pop() if len(slugs) == 1 else None


def _model(split_dir: Path, first: siliconbench_file.SiliconBenchFile) -> str | None:
    """None when `cellbench import` finds the model itself (comparison.json, or results/<model>/);
    else the folder above the split (and above a machine folder)."""
    try:
        model_of(first)
        return None
    except siliconbench_file.NotSiliconBench:
        above = split_dir.parent.parent if MACHINE_SUBDIR.match(split_dir.parent.name) else split_dir.parent
        return above.name or None


def _imported(split_dir: Path, model_dir: Path) -> set[str]:
    """sha256 of every SiliconBench file a cellbench result of this model records as its source."""
    hashes: set[str] = set()
    for folder in {split_dir, *model_dir.glob(f"*/{split_dir.name}/")}:
        for result in load_results(folder)[0] if folder.is_dir() else []:
            if block := result.data.get("imported"):
                hashes.add(block["sha256"])
    return hashes


def _files(split_dir: Path) -> list[siliconbench_file.SiliconBenchFile]:
    """The SiliconBench result files in `split_dir` (named so and of that shape)."""
    files = []
    for path in sorted(split_dir.glob("*.json")):
        if RESULT_NAME.match(path.name):
            try:
                files.append(siliconbench_file.read(path))
            except (OSError, siliconbench_file.NotSiliconBench):
                continue
    return files


def find(root: Path, *, model: str | None = None, machine: str | None = None) -> list[Found]:
    """SiliconBench split folders at depth 1 to 3 under `root` with files not yet imported, of
    `model` and `machine` when given (a folder whose machine is unknown is kept)."""
    found = []
    for depth in ("", "*/", "*/*/"):
        for split_dir in sorted(d for split in SPLITS for d in root.glob(f"{depth}{split}/")):
            files = _files(split_dir)
            if not files:
                continue
            slug, named = _machine(split_dir, files), _model(split_dir, files[0])
            model_dir = split_dir.parent.parent if slug == split_dir.parent.name else split_dir.parent
            if (model is not None and (named or model_dir.name) != model) or (machine and slug not in (None, machine)):
                continue
            done = _imported(split_dir, model_dir)
            pending = tuple(f.path for f in files if f.sha256 not in done)
            if pending:
                found.append(Found(split_dir, slug, named, pending, model_dir.parent))
    return found


def import_lines(found: list[Found], root: Path, shown: Path, *, results_dir: Path | None,
                 others: list[Path]) -> list[str]:
    """One line per `cellbench import siliconbench` command that converts `found`: every folder of
    one machine (and model, where --model is needed) in one command, on the folder holding them,
    `shown` (the user's own spelling of `root`) when nothing else is under it. `others` are the
    cellbench split folders under `root`, which a command must not sweep in. A `root` inside a
    SiliconBench model folder (its `$RESULTS_DIR`) imports into the results folder above it."""
    groups: dict[tuple[str | None, str | None, Path], list[Found]] = {}
    for f in found:
        groups.setdefault((f.machine, f.model, f.tree_root), []).append(f)
    lines = []
    for (machine, model, tree_root), members in groups.items():
        dirs = [f.split_dir for f in members]
        rest = [*others, *(f.split_dir for f in found if f not in members)]
        common = Path(commonpath(dirs))
        targets = [common] if not any(d.is_relative_to(common) for d in rest) else dirs
        if len(groups) == 1 and not others:
            targets = [root]
        into = None if results_dir is None and tree_root == root else _spelled(tree_root, root, shown)
        for target in targets:
            count = sum(len(f.files) for f in members if f.split_dir.is_relative_to(target))
            lines.append(_line(_spelled(target, root, shown), count, machine, model, into, shown))
    return lines


def _spelled(path: Path, root: Path, shown: Path) -> Path:
    """`path` as the user would type it: from `shown`, their spelling of `root`."""
    return Path(normpath(shown / relpath(path, root)))


def _line(path: Path, count: int, machine: str | None, model: str | None, into: Path | None, shown: Path) -> str:
    command = ["cellbench", "import", "siliconbench", str(path), "--machine", machine or UNKNOWN_MACHINE]
    command += ["--results-name", model] if model else []
    command += ["--results-dir", str(into)] if into is not None else []
    line = (f"{path} holds {count} SiliconBench result file{'s' * (count != 1)} (its <model>/[<machine>/]<split>/ "
            f"layout), not cellbench results (<model>/<machine>/<split>/); convert them: {shlex.join(command)}")
    if into is not None and into != shown:
        line += f"; then: cellbench report --results-dir {shlex.quote(str(into))}"
    if machine is None or not SLUG.match(machine):
        line += (f" ({UNKNOWN_MACHINE}: the machine that ran them, as `cellbench doctor` names it there; "
                 "neither their folder nor their files say)")
    return line
