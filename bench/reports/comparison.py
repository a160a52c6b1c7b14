"""One split directory's result files -> comparison.json: which result stands for each framework.

SiliconBench picked "the latest result" by file mtime, and a months-old file from another machine
won that race after a resume and was published as a success. Here the choice is made from what
the files record: only results of this directory's machine, model and split compete, and the
newest is the one with the latest run id (a UTC timestamp) and then `finished_at`. Everything
left out is listed with its reason, so a reader can check the provenance without a shell.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema

from bench.core.result import SCHEMA_VERSION, now_iso, validate, write_json_atomic

COMPARISON_FILE = "comparison.json"
RESULT_NAME = re.compile(r"^(?P<framework>.+)_(?P<run_id>[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4})\.json$")
SUSPICIOUS_FACTOR = 10.0
# The run_config keys that change what a number means; request_timeout_s only bounds a failure.
METHODOLOGY_KEYS = (
    "levels",
    "requests_per_level",
    "warmup",
    "levels_share_server",
    "request_extras",
    "prompts.source",
    "prompts.count",
    "prompts.tools_param",
    "unique_prompts",  # cold prompts against ones a cache may serve
    "cpu_affinity.client",  # a pinned client or server against an unpinned one
    "cpu_affinity.server",
)


@dataclass(frozen=True)
class Ignored:
    """A file in the directory that does not take part in the comparison, and why."""

    file: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"file": self.file, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass(frozen=True)
class LoadedResult:
    """A schema-valid result file and the fields the selection keys on."""

    path: Path
    data: dict[str, Any]

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
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Ignored(path.name, f"unreadable: {exc}")
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        return Ignored(path.name, f"not a cellbench v{SCHEMA_VERSION} result (schema_version {found!r})")
    try:
        validate(data)
        _instant(data["finished_at"])
    except jsonschema.ValidationError as exc:
        where = "/".join(map(str, exc.absolute_path)) or "top level"
        return Ignored(path.name, f"does not follow the result schema at {where}: {exc.message}")
    except ValueError as exc:
        return Ignored(path.name, f"finished_at is not a timestamp: {exc}")
    name = RESULT_NAME.match(path.name)
    if not name or (name["framework"], name["run_id"]) != (data["framework"]["name"], data["run_id"]):
        expected = f"{data['framework']['name']}_{data['run_id']}.json"
        return Ignored(path.name, f"a result must be named after its content, here {expected}")
    return LoadedResult(path, data)


def load_results(split_dir: Path) -> tuple[list[LoadedResult], list[Ignored]]:
    """Every `<framework>_<run id>.json` directly in `split_dir`, and the JSON files that could not be used.

    comparison.json, hidden files (temporaries of atomic writes) and non-JSON sidecars
    (`.requests.jsonl`, logs/) are passed over. Any other JSON file that cannot be read, is not a
    cellbench result (a SiliconBench file, say) or is misnamed is reported, never fatal: one bad
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


def _config_value(run_config: dict[str, Any], dotted: str) -> Any:
    value: Any = run_config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return "missing"
        value = value[part]
    return value


def methodology_differences(selection: Selection) -> list[str]:
    """The run_config keys that differ across the chosen results, one line each.

    Numbers measured differently (another level set, a shared server warming the prefix cache,
    other prompts) are not comparable, and a table alone would not show it."""
    chosen = sorted(selection.chosen.items())
    lines = []
    for key in METHODOLOGY_KEYS:
        values = {fw: json.dumps(_config_value(r.data["run_config"], key), sort_keys=True) for fw, r in chosen}
        if len(set(values.values())) > 1:
            lines.append(f"{key}: " + ", ".join(f"{fw}={v}" for fw, v in values.items()))
    return lines


def _cell_of(result: dict[str, Any]) -> dict[str, str]:
    return {"split": result["split"], "machine": result["machine"]["slug"], "model": result["model"]["results_name"]}


def suspicious(current: dict[str, Any], previous: dict[str, Any]) -> str | None:
    """Why `current` is suspicious against `previous` of the same cell, or None.

    Suspicious = output throughput changed SUSPICIOUS_FACTOR-fold or more, either way, at a level
    both measured with at least one success (a level with no successes is a failure, which the
    verdict already reports). Raises ValueError for results of different cells: chat and agent
    differ systematically, and neither do two machines or models compare."""
    now_cell, old_cell = _cell_of(current), _cell_of(previous)
    if now_cell != old_cell:
        diff = ", ".join(f"{k} {now_cell[k]} vs {old_cell[k]}" for k in now_cell if now_cell[k] != old_cell[k])
        raise ValueError(f"suspicious() compares results of one cell only: {diff}")
    before = {lv["concurrency"]: lv for lv in previous["levels"] if lv["successful"]}
    reasons = []
    for level in current["levels"]:
        old = before.get(level["concurrency"])
        if not old or not level["successful"]:
            continue
        now_tps, old_tps = level["output_throughput_tps"], old["output_throughput_tps"]
        low, high = sorted((now_tps, old_tps))
        if low <= 0 or high / low >= SUSPICIOUS_FACTOR * (1 - 1e-9):
            ratio = "from zero" if low <= 0 else f"{high / low:.1f}x {'higher' if now_tps > old_tps else 'lower'}"
            reasons.append(f"c={level['concurrency']}: {now_tps:.1f} tok/s vs {old_tps:.1f} tok/s ({ratio})")
    if not reasons:
        return None
    return f"output throughput against run {previous['run_id']}: " + "; ".join(reasons)


def _provenance(result: LoadedResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "file": result.path.name,
        "machine": result.machine,
        "finished_at": result.finished_at,
        "model_path": result.data["model"]["path"],
    }


def build_comparison(split_dir: Path, *, machine: str) -> dict[str, Any]:
    """The comparison of `split_dir` (`<results>/<model>/<machine>/<split>/`) for `machine`.

    The model and split come from the directory layout that bench.core.result defines; a result that
    disagrees with them is ignored with its reason."""
    split_dir = Path(split_dir)
    model, split = split_dir.parent.parent.name, split_dir.name
    loaded, problems = load_results(split_dir)
    selection = select_latest(loaded, machine=machine, model=model, split=split)
    frameworks = sorted(selection.chosen)
    flagged = {
        fw: reason
        for fw in frameworks
        if fw in selection.previous
        and (reason := suspicious(selection.chosen[fw].data, selection.previous[fw].data))
    }
    return {
        "schema_version": 1,
        "model": model,
        "machine": machine,
        "split": split,
        "generated_at": now_iso(),
        "frameworks": frameworks,
        "results": {fw: selection.chosen[fw].data for fw in frameworks},
        "provenance": {fw: _provenance(selection.chosen[fw]) for fw in frameworks},
        "methodology_warnings": methodology_differences(selection),
        "suspicious": flagged,
        "ignored": [i.to_json() for i in sorted([*problems, *selection.ignored], key=lambda i: i.file)],
    }


def write_comparison(split_dir: Path, *, machine: str) -> Path:
    """Build and write `<split_dir>/comparison.json` atomically; returns its path."""
    path = Path(split_dir) / COMPARISON_FILE
    write_json_atomic(path, build_comparison(split_dir, machine=machine))
    return path
