"""What `cellbench site` shows, read from a results tree: per model, machine and split, each
framework's newest result (a row) and its history (a trend), every week judged against the one
before as `cellbench compare` judges two runs."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cli.decisions.compare import judge_pair, root_of, with_floor
from bench.core import noise
from bench.core.level_run import level_label
from bench.core.result.store import LoadedResult, load_results, split_place
from bench.reports.rebuild import split_dirs
from bench.reports.standing import standing_of

TREND_FIGURES = (("output_throughput_tps", "output tok/s"), ("ttft_ms.p50", "TTFT p50 (ms)"))
Z95 = 1.959964  # a band of +-1.96 noise sd: where 95% of identical runs land


def figure_of(level: Mapping[str, Any], key: str) -> float | None:
    """A level's figure by key: "output_throughput_tps" or "ttft_ms.p50"."""
    head, _, stat = key.partition(".")
    value = level.get(head)
    if stat:
        value = (value or {}).get(stat) if isinstance(value, Mapping) else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


@dataclass(frozen=True)
class SiteRow:
    """A framework's newest result in a split: what its table row shows and its tooltip says."""
    framework: str
    verdict: str
    ok: bool
    standing: str  # "ok", or why not ("degraded: ...")
    run_id: str
    finished_at: str
    provenance: dict[str, str]  # framework version, adapter and profile hashes, harness commit, source
    levels: tuple[tuple[str, float | None, float | None], ...]  # (label, output tok/s, TTFT p50 ms)

    @property
    def top(self) -> tuple[str, float | None, float | None] | None:
        """Its last level with an output throughput: the figure the table sorts on."""
        return next((lv for lv in reversed(self.levels) if lv[1] is not None), None)


@dataclass(frozen=True)
class Week:
    """One run of a cell on its trend: its figures at the trend's level, and what `compare` decided
    against the run before (figure label -> decision; empty for the first, or when not judged)."""
    run_id: str
    finished_at: str
    ok: bool
    standing: str
    figures: dict[str, float | None]
    decisions: dict[str, str] = field(default_factory=dict)
    not_judged: str | None = None


@dataclass(frozen=True)
class Trend:
    framework: str
    level: str  # the level every week is read at: the highest concurrency its runs share
    weeks: tuple[Week, ...]
    band: dict[str, float | None]  # figure key -> the noise floor's log sd at that level (None: no floor)
    floor: str  # "noise floor of 2026-12-01 (5 runs)" or why there is none


@dataclass(frozen=True)
class SplitView:
    model: str
    machine: str
    split: str
    rows: tuple[SiteRow, ...]  # those that stand ok first, each part by output tok/s, highest first
    trends: tuple[Trend, ...]
    ignored: tuple[str, ...]  # files that are not results, each with why


def _provenance(data: Mapping[str, Any]) -> dict[str, str]:
    harness, fw = data.get("harness") or {}, data.get("framework") or {}
    verdict = data.get("verdict") or {}
    out = {"verdict": f"{verdict.get('verdict')}: {verdict.get('reason') or 'no reason given'}",
           "framework version": str(fw.get("version")), "run id": str(data.get("run_id")),
           "harness commit": str(harness.get("commit") or "not a git checkout")[:12]}
    for part in ("adapter", "profile"):
        if isinstance(harness.get(part), Mapping):
            out[f"{part} sha256"] = str(harness[part].get("sha256", ""))[:12]
    if data.get("imported"):
        out["imported from"] = str((data.get("imported") or {}).get("tool", "another tool"))
    return out


def _levels(data: Mapping[str, Any]) -> tuple[tuple[str, float | None, float | None], ...]:
    return tuple((level_label(lv), figure_of(lv, "output_throughput_tps"), figure_of(lv, "ttft_ms.p50"))
                 for lv in data.get("levels") or [])


def row_of(r: LoadedResult) -> SiteRow:
    s = standing_of(r.data)
    return SiteRow(r.framework, r.data["verdict"]["verdict"], s.ok, s.short(), r.run_id, r.data.get("finished_at", ""),
               _provenance(r.data), _levels(r.data))


def _trend_level(history: Sequence[LoadedResult]) -> str | None:
    """The highest closed-loop concurrency most of the runs have (else the newest run's last level)."""
    counts: dict[str, int] = defaultdict(int)
    for r in history:
        for lv in r.data["levels"]:
            if "concurrency" in lv:
                counts[level_label(lv)] += 1
    if counts:
        most = max(counts.values())
        return max((label for label, n in counts.items() if n == most), key=lambda label: int(label[2:]))
    last = history[-1].data["levels"]
    return level_label(last[-1]) if last else None


def trend_of(history: Sequence[LoadedResult]) -> Trend | None:
    """The cell's runs oldest first at one level, each judged against the one before."""
    label = _trend_level(history)
    if label is None:
        return None
    weeks: list[Week] = []
    for k, r in enumerate(history):
        level = next((lv for lv in r.data["levels"] if level_label(lv) == label), None)
        figures = {key: figure_of(level, key) if level else None for key, _ in TREND_FIGURES}
        s = standing_of(r.data)
        decisions: dict[str, str] = {}
        not_judged = None
        if k:
            pair = judge_pair(with_floor(history[k - 1]), with_floor(r))
            not_judged = pair.not_judged
            changes = {c.figure.key: c.decision for c in pair.levels.get(label, [])}
            decisions = {key: changes[key] for key, _ in TREND_FIGURES if key in changes}
        weeks.append(Week(r.run_id, r.data.get("finished_at", ""), s.ok, s.short(), figures, decisions, not_judged))
    band: dict[str, float | None] = {key: None for key, _ in TREND_FIGURES}
    newest = history[-1]
    floor_text = "no noise floor measured (cellbench noise " + newest.framework + ")"
    root = root_of(newest)
    try:
        floor = noise.load(root, newest.model, newest.machine, newest.split, newest.framework) if root else None
    except noise.FloorError as exc:
        floor, floor_text = None, f"noise floor unreadable: {exc}"
    if floor is not None:
        spreads = floor.spreads(label)
        band = {key: spreads[key].log_sd if key in spreads else None for key, _ in TREND_FIGURES}
        floor_text = f"noise floor of {floor.day} ({floor.runs} runs)"
    return Trend(newest.framework, label, tuple(weeks), band, floor_text)


def _order(rows: Iterable[SiteRow]) -> tuple[SiteRow, ...]:
    """Those that stand ok first, then the rest (failures sunk); each part by output tok/s at its top level."""
    return tuple(sorted(rows, key=lambda r: (not r.ok, -((r.top or ("", 0.0, None))[1] or 0.0), r.framework)))


def split_view(folders: Sequence[Path], machine: str) -> SplitView | None:
    """One split of `machine`, from its folder in one or more trees; another machine's result there
    is listed under the split, never shown as this machine's."""
    loaded: list[LoadedResult] = []
    ignored: list[str] = []
    for folder in folders:
        found, passed_over = load_results(folder)
        loaded += [r for r in found if r.machine == machine]
        ignored += [f"{i.file}: {i.reason}" for i in passed_over]
        ignored += [f"{r.path.name}: a result of machine {r.machine}, not {machine}"
                    for r in found if r.machine != machine]
    if not loaded:
        return None
    by_framework: dict[str, list[LoadedResult]] = defaultdict(list)
    for r in loaded:
        by_framework[r.framework].append(r)
    histories = {fw: sorted(rs, key=lambda r: (r.data.get("finished_at", ""), r.run_id))
                 for fw, rs in by_framework.items()}
    first = loaded[0]
    trends = tuple(t for fw in sorted(histories) if (t := trend_of(histories[fw])) is not None)
    return SplitView(first.model, first.machine, first.split, _order(row_of(h[-1]) for h in histories.values()),
                     trends, tuple(ignored))


def gather(results_roots: Sequence[Path]) -> list[SplitView]:
    """Every split folder of the trees (cellbench's, and SiliconBench's once imported), by model,
    machine and split; a split's folders in several trees are one split."""
    places: dict[tuple[str, str, str], list[Path]] = defaultdict(list)
    for root in results_roots:
        for d in split_dirs(root):
            place = split_place(d)
            places[(place.model, place.machine, d.name)].append(d)
    views = [v for (_, machine, _), folders in places.items() if (v := split_view(folders, machine)) is not None]
    return sorted(views, key=lambda v: (v.model, v.machine, (v.split != "chat", v.split)))
