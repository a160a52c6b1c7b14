"""The noise floors beside a split's results: what REPORT.md, the journal and the HTML review
judge a machine's figures by (bench.reports.between), and say they used.

A split folder `<root>/<model>/<machine>/<split>/` has its floors at
`<root>/<model>/<machine>/noise/<split>/<framework>.json` (bench.core.noise.floor.floor_path).
A floor is looked up once per framework; one that cannot be read is not used, and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.core.level_run import level_label
from bench.core.metrics.stats.change import FloorSpread
from bench.core.noise.floor import FOLDER, Floor, FloorError, read


class Floors:
    """The floors of one split folder's frameworks, loaded on first use."""

    def __init__(self, split_dir: Path | None):
        self.split_dir = Path(split_dir) if split_dir is not None else None
        self.found: dict[str, Floor | None] = {}
        self.broken: dict[str, str] = {}

    def of(self, framework: str) -> Floor | None:
        if framework not in self.found:
            self.found[framework] = None
            path = self.path(framework)
            if path is not None and path.is_file():
                try:
                    self.found[framework] = read(path)
                except FloorError as exc:
                    self.broken[framework] = str(exc)
        return self.found[framework]

    def path(self, framework: str) -> Path | None:
        if self.split_dir is None:
            return None
        return self.split_dir.parent / FOLDER / self.split_dir.name / f"{framework}.json"

    def spreads(self, result: Mapping[str, Any], level: Mapping[str, Any]) -> dict[str, FloorSpread]:
        """The spreads of `result`'s framework at `level`; {} without a floor of it."""
        name = (result.get("framework") or {}).get("name")
        floor = self.of(name) if isinstance(name, str) else None
        return floor.spreads(level_label(level)) if floor is not None else {}

    def said(self, frameworks: list[str]) -> str:
        """Which floor each framework's figures were judged by, and when it was measured:
        "llamacpp: noise floor of 2026-12-01 (5 runs); vllm: none (measure one: cellbench noise vllm)"."""
        parts = []
        for fw in frameworks:
            floor = self.of(fw)
            if floor is not None:
                parts.append(f"{fw}: noise floor measured {floor.measured_at} ({floor.runs} runs)")
            elif fw in self.broken:
                parts.append(f"{fw}: none used ({self.broken[fw]})")
            else:
                parts.append(f"{fw}: none (measure one: cellbench noise {fw})")
        return "; ".join(parts)
