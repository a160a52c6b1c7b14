"""A machine's noise floor: how much one figure of one cell moves between identical runs.

A floor is measured from one result of K >= 2 rounds (`--rounds K`: the same framework, version
and settings run K times in a row, each round a run): per level and per compared figure
(bench.core.metrics.stats.change.FIGURES), the sample standard deviation (ddof=1) of the figure's log
across the rounds. Only figures every round has, positive, are kept. A comparison on that machine
takes the floor as each side's error wherever it is larger than the side's own
(bench.core.metrics.stats.change.estimate).

It is stored per (model, machine, split, framework):
`<results root>/<model>/<machine>/noise/<split>/<framework>.json`, with when it was measured, the
framework's version and the settings that shape the spread (requests, warm-up, levels, prompts,
ignore_eos, unique prompts, the client's CPUs and processes...), so that a report can say when a
floor measured otherwise may not apply (`Floor.differs_from`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.base.dotted import json_path_or
from bench.base.files import atomic_write
from bench.core.level_run import level_label
from bench.core.metrics.stats.change import FIGURES, FloorSpread, value

KIND = "cellbench-noise-floor"
VERSION = 1
FOLDER = "noise"
# The run_config keys whose value changes a spread: (label, dotted path).
SPREAD_KEYS = (
    "levels", "requests_per_level", "warmup", "levels_share_server", "request_extras.ignore_eos",
    "request_extras.max_tokens", "unique_prompts", "keep_alive", "prompts.source", "prompts.count",
    "cpu_affinity.client", "cpu_affinity.server", "load.mode",
)


class FloorError(ValueError):
    """A floor cannot be measured from this result, or a floor file is not one."""


def spread_settings(result: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of `result` that shape a spread: its run_config's SPREAD_KEYS, its
    framework's version and the client processes of its levels."""
    config = result.get("run_config") or {}
    out: dict[str, Any] = {"framework_version": (result.get("framework") or {}).get("version")}
    out.update({key: json_path_or(config, key) for key in SPREAD_KEYS})
    if isinstance(out["prompts.source"], str):  # the file, not the checkout it was read from
        out["prompts.source"] = Path(out["prompts.source"]).name
    procs = sorted({(lv.get("client") or {}).get("procs") or 1 for lv in result.get("levels") or ()})
    out["client_procs"] = procs or [1]
    return out


@dataclass(frozen=True)
class Floor:
    """A cell's noise floor: per level label, per figure key, the log sd across `runs` runs."""

    model: str
    machine: str
    split: str
    framework: str
    measured_at: str  # UTC, ISO 8601
    runs: int
    settings: dict[str, Any]
    levels: dict[str, dict[str, float]]
    source: str = ""  # the result it was measured from
    path: Path | None = field(default=None, compare=False)

    @property
    def day(self) -> str:
        return self.measured_at[:10]

    def spreads(self, level_label: str) -> dict[str, FloorSpread]:
        """The spreads of one level ("c=8"), as bench.core.metrics.stats.change takes them; {} when the
        floor did not measure that level."""
        return {key: FloorSpread(sd, self.runs, self.day) for key, sd in self.levels.get(level_label, {}).items()}

    def differs_from(self, result: Mapping[str, Any]) -> list[str]:
        """The settings where `result` ran otherwise than the floor's runs: "requests_per_level:
        floor 32, this 100"; [] when it ran alike (then the floor applies as measured)."""
        now = spread_settings(result)
        return [f"{key}: floor {json.dumps(self.settings.get(key))}, this {json.dumps(now.get(key))}"
                for key in sorted(set(self.settings) | set(now)) if self.settings.get(key) != now.get(key)]

    def to_json(self) -> dict[str, Any]:
        return {"kind": KIND, "version": VERSION, "model": self.model, "machine": self.machine, "split": self.split,
                "framework": self.framework, "measured_at": self.measured_at, "runs": self.runs,
                "source": self.source, "settings": self.settings, "levels": self.levels}


def log_sd(values: list[float]) -> float:
    """The sample standard deviation (ddof=1) of the logs of `values` (each > 0, at least two)."""
    return statistics.stdev([math.log(v) for v in values])


def measure(result: Mapping[str, Any], *, source: str = "") -> Floor:
    """The floor of `result`, a result of K >= 2 rounds; FloorError when it has no level with rounds."""
    levels: dict[str, dict[str, float]] = {}
    runs: set[int] = set()
    for level in result.get("levels") or ():
        rounds = [r for r in level.get("rounds") or () if isinstance(r, Mapping)]
        if len(rounds) < 2:
            continue
        runs.add(len(rounds))
        spread = {}
        for figure in FIGURES:
            values = [value(r, figure) for r in rounds]
            if all(v is not None and v > 0 for v in values):
                spread[figure.key] = log_sd([v for v in values if v is not None])
        levels[level_label(level)] = spread
    if not levels:
        raise FloorError(f"{source or 'the result'} has no level of 2 or more rounds: a floor needs "
                         "the same cell run several times (--rounds N, N >= 2)")
    return Floor(model=result["model"]["results_name"], machine=result["machine"]["slug"], split=result["split"],
                 framework=result["framework"]["name"], measured_at=_utc(result["finished_at"]), runs=min(runs),
                 settings=spread_settings(result), levels=levels, source=source)


def _utc(iso: str) -> str:
    moment = datetime.fromisoformat(iso)
    return (moment if moment.tzinfo else moment.astimezone()).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def floor_path(results_root: Path, model: str, machine: str, split: str, framework: str) -> Path:
    return Path(results_root) / model / machine / FOLDER / split / f"{framework}.json"


def write(floor: Floor, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(floor.to_json(), indent=1, sort_keys=True) + "\n")
    return path


def _checked(data: Any, path: Path) -> Floor:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise FloorError(f"{path}: not a cellbench noise floor: {what}")

    need(isinstance(data, dict), "the file is not a JSON object")
    need(data.get("kind") == KIND, f'"kind" must be {KIND!r}')
    need(data.get("version") == VERSION, f'"version" must be {VERSION}, got {data.get("version")!r}')
    for key in ("model", "machine", "split", "framework", "measured_at"):
        need(isinstance(data.get(key), str) and bool(data[key]), f'"{key}" must be a non-empty string')
    need(isinstance(data.get("runs"), int) and data["runs"] >= 2, '"runs" must be an integer >= 2')
    need(isinstance(data.get("settings"), dict), '"settings" must be an object')
    levels = data.get("levels")
    need(isinstance(levels, dict) and bool(levels), '"levels" must be a non-empty object')
    known = {f.key for f in FIGURES}
    for label, spread in levels.items():
        need(isinstance(spread, dict), f'levels["{label}"] must be an object')
        for key, sd in spread.items():
            need(key in known, f'levels["{label}"]: {key!r} is not a compared figure')
            need(isinstance(sd, (int, float)) and not isinstance(sd, bool) and sd >= 0 and math.isfinite(sd),
                 f'levels["{label}"]["{key}"] must be a number >= 0')
    return Floor(model=data["model"], machine=data["machine"], split=data["split"], framework=data["framework"],
                 measured_at=data["measured_at"], runs=data["runs"], settings=data["settings"],
                 levels={label: {k: float(v) for k, v in spread.items()} for label, spread in levels.items()},
                 source=str(data.get("source") or ""), path=path)


def read(path: Path) -> Floor:
    """The floor in `path`; FloorError (naming the file and what is wrong) when it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise FloorError(f"{path}: cannot read a noise floor: {exc}") from None
    return _checked(data, Path(path))


def load(results_root: Path, model: str, machine: str, split: str, framework: str) -> Floor | None:
    """The stored floor of that cell, None when none was measured; FloorError for a broken file."""
    path = floor_path(results_root, model, machine, split, framework)
    return read(path) if path.is_file() else None
