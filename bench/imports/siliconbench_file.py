"""One SiliconBench result file, read and checked: `read` refuses a file that is not such a
result with the reason (`NotSiliconBench`), and `machine_mismatch` one whose own machine block
names another machine than the one it is imported for (bench.imports.siliconbench converts it)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.host.machine import slugify

LEVEL_COUNTS = ("concurrency", "num_requests", "successful", "failed")
# What a level with a success must have; the rest (ITL, throughput, input tokens) may be missing.
MEASURED_KEYS = ("total_output_tokens", "output_throughput_tps", "ttft_avg_ms", "ttft_p50_ms", "ttft_p99_ms",
                 "latency_avg_s", "latency_p50_s", "latency_p99_s")
FRAMEWORK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # becomes part of a file name


class NotSiliconBench(ValueError):
    """A file that cannot be imported as a SiliconBench result; `str()` says why, for a reader."""


@dataclass(frozen=True)
class SiliconBenchFile:
    """A SiliconBench result file whose shape `read` checked."""

    path: Path
    sha256: str
    data: dict[str, Any]

    @property
    def framework(self) -> str:
        return str(self.data["framework"])

    @property
    def split(self) -> str | None:
        """The split its own run_config names, if it has one (newer files)."""
        split = (self.data.get("run_config") or {}).get("split")
        return split if isinstance(split, str) and split else None


def read(path: Path) -> SiliconBenchFile:
    """The file at `path`, checked; raises NotSiliconBench naming the first thing that is wrong."""
    raw = Path(path).read_bytes()
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotSiliconBench(f"not JSON: {exc}") from exc
    check(data)
    return SiliconBenchFile(Path(path), hashlib.sha256(raw).hexdigest(), data)


def number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check(data: Any) -> None:
    """Raise NotSiliconBench unless `data` has the shape of a SiliconBench result file."""
    if not isinstance(data, dict):
        raise NotSiliconBench(f"not a SiliconBench result: a JSON {type(data).__name__}, not an object")
    if "schema_version" in data and "run_id" in data:
        raise NotSiliconBench("a cellbench result already, not a SiliconBench one")
    if "results" in data and "frameworks" in data:
        raise NotSiliconBench("SiliconBench's comparison.json (a summary of result files), not a result file")
    if "framework" not in data or "concurrency_results" not in data:
        raise NotSiliconBench("not a SiliconBench result: no `framework` and `concurrency_results`")
    if not isinstance(data["framework"], str) or not FRAMEWORK_NAME.match(data["framework"]):
        raise NotSiliconBench(f"framework: expected a framework name, got {data['framework']!r}")
    if not isinstance(data.get("model"), str) or not data["model"]:
        raise NotSiliconBench(f"model: expected the model string it sent, got {data.get('model')!r}")
    timestamp = data.get("timestamp")
    try:
        datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else None
    except ValueError:
        timestamp = None
    if timestamp is None:
        raise NotSiliconBench(f"timestamp: expected an ISO date and time (when the run started, which orders it "
                              f"among this cell's results), got {data.get('timestamp')!r}")
    levels = data["concurrency_results"]
    if not isinstance(levels, list) or not levels:
        raise NotSiliconBench("concurrency_results: expected a non-empty list of levels")
    for optional in ("machine", "run_config", "framework_version"):
        if data.get(optional) is not None and not isinstance(data[optional], dict):
            raise NotSiliconBench(f"{optional}: expected an object, got {type(data[optional]).__name__}")
    seen: set[int] = set()
    for i, level in enumerate(levels):
        _check_level(f"concurrency_results[{i}]", level)
        if level["concurrency"] in seen:
            raise NotSiliconBench(f"concurrency_results[{i}]: concurrency {level['concurrency']} appears twice")
        seen.add(level["concurrency"])


def _check_level(where: str, level: Any) -> None:
    if not isinstance(level, dict):
        raise NotSiliconBench(f"{where}: expected an object")
    for key in LEVEL_COUNTS:
        value = level.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "concurrency" else 0):
            raise NotSiliconBench(f"{where}.{key}: expected a{' positive' if key == 'concurrency' else 'n'} "
                                  f"integer, got {value!r}")
    if level["successful"] + level["failed"] != level["num_requests"]:
        raise NotSiliconBench(f"{where}: successful + failed ({level['successful']} + {level['failed']}) is not "
                              f"num_requests ({level['num_requests']})")
    if not number(level.get("wall_time_s")) or level["wall_time_s"] < 0:
        raise NotSiliconBench(f"{where}.wall_time_s: expected seconds, got {level.get('wall_time_s')!r}")
    if level["successful"]:
        missing = [k for k in MEASURED_KEYS if not number(level.get(k))]
        if missing:
            raise NotSiliconBench(f"{where}: {level['successful']} successful requests but no number for "
                                  f"{', '.join(missing)}")


def machine_mismatch(source: SiliconBenchFile, slug: str) -> str | None:
    """Why the file's own machine block contradicts `slug` (--machine), or None. Only a recorded
    chip decides (slugged as cellbench slugs it); a file without one is taken at its word."""
    machine = source.data.get("machine") or {}
    chip = machine.get("chip")
    if not isinstance(chip, str) or not chip.strip():
        return None
    if slugify(chip) == slug:
        return None
    host = f" (host {machine['host']})" if machine.get("host") else ""
    return (f"the file records machine {chip!r}{host}, whose slug is {slugify(chip)}, not {slug} (--machine): "
            "results are kept per machine, so it would be compared with another machine's runs")
