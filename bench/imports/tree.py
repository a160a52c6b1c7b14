"""Imported results into the results tree: where each goes, once each, never over a measured one.

`import_siliconbench(PATH, machine=SLUG)` converts every SiliconBench result file under PATH
(bench.imports.siliconbench) into `<results>/<model>/<machine>/<split>/<framework>_<run id>.json`,
the place a cell of that framework, split, model and machine writes its own results, so the
store, the suspicious check, the journal and the reports see the imported ones as the history of
that cell. Each file gets one outcome, in order:

- refused: not a SiliconBench result, its machine block names another machine than --machine,
  or its split or model cannot be told (the reason says which and what to pass);
- already imported: a result of that folder records the same sha256 (importing twice writes
  nothing, whatever the file is called now);
- refused: its target file exists: a measured result (or another import) is never overwritten;
- imported (or "would import" with dry_run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import adapters
from bench.base import clock
from bench.base.defaults import SPLITS  # SiliconBench's result folders are named after them
from bench.core.result.files import cell_paths, write_result
from bench.core.result.store import load_results
from bench.imports import siliconbench, siliconbench_file
from bench.setup import profiles

SKIPPED_NAMES = ("comparison.json",)  # its per-split summaries; the result files are what counts
MACHINE_SUBDIR = re.compile(r"^(m\d+[a-z]*|dgxspark|unknown-apple)$")  # results/<MODEL>/<machine>/<split>/
OLLAMA_TAG = re.compile(r"^[\w.-]+:[\w.-]+$")


@dataclass(frozen=True)
class Outcome:
    """What became of one file: `status` is imported, would import, already imported or refused."""

    source: Path
    status: str
    detail: str  # the result file written (or found), or why the file was refused
    target: Path | None = None

    def __str__(self) -> str:
        return f"{self.status}: {self.source}: {self.detail}"


def result_files(path: Path) -> Iterator[Path]:
    """`path` itself, or every JSON file under it but SiliconBench's comparison.json, its
    metalstat sidecars and hidden folders (the `.levels/` parts a merge deletes)."""
    path = Path(path)
    if path.is_file():
        yield path
        return
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    for found in sorted(path.rglob("*.json")):
        hidden = any(part.startswith(".") for part in found.relative_to(path).parts)
        if not hidden and found.name not in SKIPPED_NAMES and "_metalstat" not in found.name:
            yield found


def split_of(source: siliconbench_file.SiliconBenchFile) -> str:
    """The file's own run_config.split, else its folder's name (chat/ or agent/)."""
    if source.split:
        return source.split
    folder = source.path.parent.name
    if folder in SPLITS:
        return folder
    raise siliconbench_file.NotSiliconBench(f"split unknown: the file has no run_config.split and its folder "
                                            f"{folder!r} is not one of {', '.join(SPLITS)}")


def model_of(source: siliconbench_file.SiliconBenchFile) -> str:
    """The model's results name: `model_name` of SiliconBench's comparison.json beside the file
    (unless it names a machine folder, as its older collect_results.py did), else the folder above
    the split (and above a machine folder such as m5pro/) when that sits in a `results/` folder."""
    comparison = source.path.parent / "comparison.json"
    try:
        named = json.loads(comparison.read_text()).get("model_name")
    except (OSError, ValueError, AttributeError):
        named = None
    if isinstance(named, str) and named and "/" not in named and not MACHINE_SUBDIR.match(named):
        return named
    above = source.path.parent.parent
    if MACHINE_SUBDIR.match(above.name):
        above = above.parent
    if above.parent.name == "results" and above.name:
        return above.name
    raise siliconbench_file.NotSiliconBench("model unknown: no comparison.json names it and the file is not in "
                                            "results/<model>/[<machine>/]<split>/; pass --results-name")


def profile_of(results_name: str) -> str:
    """The shipped profile filed under `results_name` (Qwen3-0.6B -> qwen3-0.6b), else the name."""
    for name in profiles.available_profiles():
        try:
            if profiles.load_profile(name).results_name == results_name:
                return name
        except profiles.ProfileError:
            continue
    return results_name


def model_format(framework: str, model: str) -> str:
    """The weight format of cellbench's adapter of that name, else what the model string shows."""
    adapter = adapters.registry().get(framework)
    if adapter is not None:
        return adapter.model_format
    if model.endswith(".gguf"):
        return "gguf"
    if OLLAMA_TAG.match(model):
        return "ollama"
    return "mlx" if "mlx" in model.lower() else "hf"


def _already(split_dir: Path, sha256: str) -> Path | None:
    loaded, _ = load_results(split_dir) if split_dir.is_dir() else ([], [])
    return next((r.path for r in loaded if (block := r.data.get("imported")) and block["sha256"] == sha256), None)


def import_one(path: Path, *, machine: str, results_root: Path, model: str | None = None,
               dry_run: bool = False, imported_at: str | None = None) -> Outcome:
    """Import one SiliconBench file (see the module's docstring for the outcomes)."""
    try:
        source = siliconbench_file.read(Path(path).absolute())
        if why := siliconbench_file.machine_mismatch(source, machine):
            return Outcome(path, "refused", why)
        split, results_name = split_of(source), model or model_of(source)
    except (OSError, siliconbench_file.NotSiliconBench) as exc:
        return Outcome(path, "refused", str(exc))
    result = siliconbench.convert(
        source, machine=machine, results_name=results_name, profile=profile_of(results_name), split=split,
        model_format=model_format(source.framework, source.data["model"]), imported_at=imported_at or clock.now_iso())
    target = cell_paths(results_root, results_name, machine, split, source.framework, result["run_id"]).result
    if found := _already(target.parent, source.sha256):
        return Outcome(path, "already imported", str(found), found)
    if target.exists():
        return Outcome(path, "refused", f"{target} exists and is not this file's import: a result already there "
                                        "is never overwritten", target)
    if not dry_run:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_result(target, result)
    return Outcome(path, "would import" if dry_run else "imported", str(target), target)


def import_siliconbench(path: Path, *, machine: str, results_root: Path, model: str | None = None,
                        dry_run: bool = False) -> list[Outcome]:
    """Import every SiliconBench result file under `path` (a file or a folder); one outcome each."""
    imported_at = clock.now_iso()
    return [import_one(p, machine=machine, results_root=results_root, model=model, dry_run=dry_run,
                       imported_at=imported_at) for p in result_files(path)]
