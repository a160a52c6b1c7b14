"""The results store: the result files of one split directory, which of them is the newest, and
whether the newest changed suspiciously against the one before it.

Only what the files record decides: a result competes only for its own machine (and, when
given, model and split), and the newest is the one with the latest run id (a UTC timestamp),
then the latest `finished_at`, never the file's mtime, which a copy, a checkout or a resume
changes. Every JSON file that cannot take part is returned with its reason, so a caller can list
it instead of dropping it silently.

Killed: a result that still carries its `unfinished` block (bench.core.result.files) once the process
that wrote it is gone; `killed` finds them, `kept_line` says what of the run was kept.

Suspicious: output throughput changed SUSPICIOUS_FACTOR-fold or more, either way, against the
previous result of the same cell, at a level both measured with a success. That is more often a
broken setup (another model file, a debug build, a throttled machine) than a real change; it
is an annotation and never changes the verdict (docs/verdicts.md). Against an imported previous
result (another benchmark's file, bench.core.result.imported) only metrics it labels comparable are
compared, and the reason names the file and the metrics left out.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench.base.defaults import SPLITS
from bench.core.level_run import level_key, level_label
from bench.core.result import imported
from bench.core.result.files import NotAResult, read_result
from bench.core.result.model import IgnoredFile, Result
from bench.host.process_groups import running_since

COMPARISON_FILE = "comparison.json"
SUSPICIOUS_FACTOR = 10.0
# `-2`, `-3`, ...: a later attempt of the same run id's cell (bench.core.result.files.free_cell_paths)
RESULT_NAME = re.compile(r"^(?P<framework>.+)_(?P<run_id>[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4})(-[1-9][0-9]*)?\.json$")


@dataclass(frozen=True)
class Ignored:
    """A file in the directory that does not take part in the comparison, and why."""

    file: str
    reason: str

    def to_json(self) -> IgnoredFile:
        return {"file": self.file, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass(frozen=True)
class LoadedResult:
    """A schema-valid result file and the fields the selection keys on."""

    path: Path
    data: Result

    @property
    def framework(self) -> str:
        return self.data["framework"]["name"]

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def machine(self) -> str:
        return self.data["machine"]["slug"]

    @property
    def model(self) -> str:
        return self.data["model"]["results_name"]

    @property
    def split(self) -> str:
        return self.data["split"]

    @property
    def finished_at(self) -> str:
        return self.data["finished_at"]

    def recency(self) -> tuple[str, datetime, str]:
        """Newer sorts later: run id time, then when the cell finished, then the id's suffix.

        A session shares one run id across its cells, so two results of one framework with the
        same start second are told apart by `finished_at`, never by the file's mtime."""
        return self.run_id[:16], _instant(self.finished_at), self.run_id


def _instant(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return moment if moment.tzinfo else moment.astimezone()


def _load_one(path: Path) -> LoadedResult | Ignored:
    try:
        data = read_result(path)
    except NotAResult as exc:
        return Ignored(path.name, str(exc))
    name = RESULT_NAME.match(path.name)
    if not name or (name["framework"], name["run_id"]) != (data["framework"]["name"], data["run_id"]):
        expected = f"{data['framework']['name']}_{data['run_id']}.json"
        return Ignored(path.name, f"a result must be named after its content, here {expected}")
    return LoadedResult(path, data)


def load_results(split_dir: Path) -> tuple[list[LoadedResult], list[Ignored]]:
    """Every `<framework>_<run id>.json` directly in `split_dir`, and the JSON files that could not be used.

    comparison.json, hidden files (temporaries of atomic writes) and non-JSON sidecars
    (`.requests.jsonl`, logs/) are passed over. Any other JSON file that cannot be read, is not a
    cellbench result (another tool's file, say) or is misnamed is reported, never fatal: one bad
    file must not hide the others, nor be silently dropped."""
    loaded: list[LoadedResult] = []
    problems: list[Ignored] = []
    for path in sorted(Path(split_dir).glob("*.json")):
        if path.name == COMPARISON_FILE or path.name.startswith(".") or not path.is_file():
            continue
        outcome = _load_one(path)
        if isinstance(outcome, LoadedResult):
            loaded.append(outcome)
        else:
            problems.append(outcome)
    return loaded, problems


@dataclass(frozen=True)
class SplitPlace:
    """Where a split folder sits, and so which model, machine and split its reports are of."""

    dir: Path
    model: str
    machine: str  # the slug its results must carry to be chosen
    legacy: bool = False  # SiliconBench's legacy tree, results/<model>/<split>/: no machine folder


def split_place(split_dir: Path) -> SplitPlace:
    """`results/<model>/<machine>/<split>/`, as cellbench files, or SiliconBench's legacy tree
    `results/<model>/<split>/` (bench.host.machine, `folder`). A folder is the legacy tree's when
    it is named after a split and its newest cellbench result (by run id in the file name) names
    the folder above it as its model; its machine is the one that result names (the machine that
    owns the tree now), and another machine's result there is ignored, as in any machine's folder.
    One file is read, so a look at a scoped folder costs little beside the results it holds."""
    split_dir = Path(split_dir)
    scoped = SplitPlace(split_dir, split_dir.parent.parent.name, split_dir.parent.name)
    if split_dir.name not in SPLITS:
        return scoped
    named = {p: m["run_id"] for p in split_dir.glob("*.json") if (m := RESULT_NAME.match(p.name))}
    if not named:
        return scoped
    names = sorted(named, key=named.__getitem__)
    try:
        newest = json.loads(names[-1].read_text())
        model, machine = newest["model"]["results_name"], newest["machine"]["slug"]
    except (OSError, ValueError, KeyError, TypeError):
        return scoped
    if model != split_dir.parent.name or model == scoped.model or not isinstance(machine, str):
        return scoped
    return SplitPlace(split_dir, model, machine, legacy=True)


@dataclass
class Selection:
    """Per framework, the result that represents it and the one before it in the same cell."""

    machine: str
    chosen: dict[str, LoadedResult] = field(default_factory=dict)
    previous: dict[str, LoadedResult] = field(default_factory=dict)
    ignored: list[Ignored] = field(default_factory=list)


def _mismatch(result: LoadedResult, machine: str, model: str | None, split: str | None) -> str | None:
    if result.machine != machine:
        return f"machine {result.machine}, this is {machine}"
    if model is not None and result.model != model:
        return f"model {result.model}, this directory is for {model}"
    if split is not None and result.split != split:
        return f"split {result.split}, this directory is for {split}"
    return None


def select_latest(
    results: list[LoadedResult], *, machine: str, model: str | None = None, split: str | None = None
) -> Selection:
    """Choose the newest result of `machine` per framework, by `LoadedResult.recency` (never mtime).

    `model` and `split`, when given, must match too (a misfiled result is ignored, not compared).
    `previous` is the newest older result of the chosen one's machine, model and split: the
    baseline for the suspicious check."""
    selection = Selection(machine)
    by_framework: dict[str, list[LoadedResult]] = {}
    for result in results:
        if why := _mismatch(result, machine, model, split):
            selection.ignored.append(Ignored(result.path.name, why))
        else:
            by_framework.setdefault(result.framework, []).append(result)
    for framework, candidates in by_framework.items():
        newest, *older = sorted(candidates, key=LoadedResult.recency, reverse=True)
        selection.chosen[framework] = newest
        same_cell = [r for r in older if (r.model, r.split) == (newest.model, newest.split)]
        if same_cell:
            selection.previous[framework] = same_cell[0]
    return selection


def previous_of(current: LoadedResult) -> LoadedResult | None:
    """The result before `current` in its cell (machine, model, split, framework) in its folder,
    chosen as `select_latest` chooses (run id, then finish time, never mtime); None if none."""
    loaded, _ = load_results(current.path.parent)
    older = [r for r in loaded if r.path != current.path and r.recency() < current.recency()]
    selection = select_latest([*older, current], machine=current.machine, model=current.model, split=current.split)
    return selection.previous.get(current.framework)


def writer_gone(result: Result) -> bool | None:
    """For a result with an `unfinished` block: True when the process that wrote it has ended (a
    killed run), False while it runs, None when it ran on another host (nothing here can tell).
    None for a finished result."""
    block = result.get("unfinished")
    if block is None:
        return None
    return writer_ended(block["pid"], block["host"], _instant(block["updated_at"]).timestamp())


def writer_ended(pid: int, host: str, updated_at: float) -> bool | None:
    """Whether process `pid` on `host`, which wrote a result at `updated_at` (epoch seconds), has
    ended: None when `host` is another (nothing here can tell)."""
    if host != socket.gethostname():
        return None
    return not running_since(pid, updated_at)


def killed(split_dir: Path) -> list[LoadedResult]:
    """The results of `split_dir` whose cell was killed: still unfinished, their writer gone on
    this host. Oldest first. Only a file that mentions `unfinished` is read as a result, so a
    session start stays quick beside a long history."""
    found = []
    for path in sorted(Path(split_dir).glob("*.json")):
        try:
            if not RESULT_NAME.match(path.name) or b'"unfinished"' not in path.read_bytes():
                continue
        except OSError:
            continue
        loaded = _load_one(path)
        if isinstance(loaded, LoadedResult) and writer_gone(loaded.data):
            found.append(loaded)
    return sorted(found, key=LoadedResult.recency)


def kept_line(result: LoadedResult) -> str:
    """What a killed run's file kept, in words: "kept c=1 (4 of 4 requests ok), 7 request records"."""
    levels = result.data["levels"]
    parts = [f"{level_label(lv)} ({lv['successful']} of {lv['num_requests']} requests ok"
             + (", partial" if lv.get("partial") else "") + ")" for lv in levels]
    kept = "kept " + ", ".join(parts) if parts else "kept no finished level"
    sidecar = result.path.parent / result.data.get("requests_file", "")
    if "requests_file" in result.data and sidecar.is_file():
        with sidecar.open("rb") as f:
            records = sum(1 for line in f if line.strip())
        kept += f", {records} request record{'s' if records != 1 else ''}"
    return kept


def _cell_of(result: Result) -> dict[str, str]:
    return {"split": result["split"], "machine": result["machine"]["slug"], "model": result["model"]["results_name"]}


def suspicious(current: Result, previous: Result) -> str | None:
    """Why `current` is suspicious against `previous` of the same cell, or None.

    A level with no successes on either side is skipped: it is a failure, which the verdict
    already reports. An imported `previous` is compared only when it labels output throughput
    comparable (bench.core.result.imported), and the reason says it was imported and what was left out.
    Raises ValueError for results of different cells: chat and agent differ systematically, and
    neither do two machines or models compare."""
    now_cell, old_cell = _cell_of(current), _cell_of(previous)
    if now_cell != old_cell:
        diff = ", ".join(f"{k} {now_cell[k]} vs {old_cell[k]}" for k in now_cell if now_cell[k] != old_cell[k])
        raise ValueError(f"suspicious() compares results of one cell only: {diff}")
    if not imported.comparable(previous, "output_throughput_tps"):
        return None
    before = {level_key(lv): lv for lv in previous["levels"] if lv["successful"]}
    reasons = []
    for level in current["levels"]:  # a rate level is never compared with a concurrency level
        old = before.get(level_key(level))
        if not old or not level["successful"]:
            continue
        # a level with a success measured a wall time, so both throughputs are numbers
        now_tps, old_tps = level["output_throughput_tps"] or 0.0, old["output_throughput_tps"] or 0.0
        low, high = sorted((now_tps, old_tps))
        if low <= 0 or high / low >= SUSPICIOUS_FACTOR * (1 - 1e-9):
            ratio = "from zero" if low <= 0 else f"{high / low:.1f}x {'higher' if now_tps > old_tps else 'lower'}"
            reasons.append(f"{level_label(level, full=True)}: {now_tps:.1f} tok/s vs {old_tps:.1f} tok/s ({ratio})")
    if not reasons:
        return None
    left_out = imported.left_out(previous)
    return (f"output throughput against {imported.describe(previous)}: " + "; ".join(reasons)
            + (f" ({left_out})" if left_out else ""))
