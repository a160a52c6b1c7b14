"""Latency against throughput across levels: which stack gives the most output tok/s at a given
latency, as `vllm bench sweep plot_pareto` and AIPerf's Pareto views ask.

Every level of every framework in a split is a point: its output tok/s (across) and one latency
figure (up): TTFT p50, TTFT p90 or E2E latency p50 (`LATENCIES`). A point is on a frontier when no
other point of the same set has at least its throughput with at most its latency, one of them
strictly: each framework's own frontier is over its own levels, the overall one over every
framework's. Only a result that stands ok (bench.reports.standing) gives points to a frontier; a
degraded, failed or stale one's levels are drawn, marked, and named under the section, never on a
line. Nothing here ranks: a frontier is a set, listed from the least latency up, and points are
single runs' figures (or their rounds' medians), which another run may reorder within their
intervals.

`latency_section` is REPORT.md's *Latency against throughput*; `write_latency_frontier` the chart,
one panel per latency figure (plots/latency_frontier.png); `draw` it, also for the HTML summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from bench.core.level_run import key_label, level_key
from bench.reports.comparison import Comparison, standings
from bench.reports.drawing import figure, save

LATENCY_FRONTIER_PNG = "latency_frontier.png"
LATENCIES = (("ttft_ms", "p50", "TTFT p50"), ("ttft_ms", "p90", "TTFT p90"), ("e2el_ms", "p50", "E2E latency p50"))
NOTE = ("A point (a framework at one level) is on a frontier when no other point had at least its output tok/s "
        "with at most its latency. Each framework's frontier is over its own levels, the overall one over every "
        "framework that stands ok; a result that does not stand ok is drawn (grey x) and never on a frontier. "
        "Points are single runs' figures: stacks within each other's intervals may trade places on another run.")


@dataclass(frozen=True)
class LatencyPoint:
    framework: str
    level: str  # "c=8", "rate=4"
    tps: float
    latency_ms: float
    ok: bool  # its result stands ok: it may be on a frontier


def latencies(level: Mapping[str, Any]) -> list[float | None]:
    """The level's figure for each of LATENCIES, None where it has none."""
    return [(level.get(metric) or {}).get(stat) for metric, stat, _ in LATENCIES]


def points(comparison: Comparison, metric: str, stat: str) -> list[LatencyPoint]:
    """Every level with output tok/s and the latency figure, of every framework of the split."""
    marks = standings(comparison)
    found = []
    for fw in comparison["frameworks"]:
        for lv in comparison["results"][fw]["levels"]:
            stats: Any = lv.get(metric) or {}
            tps, latency = lv.get("output_throughput_tps"), stats.get(stat)
            if lv.get("successful") and isinstance(tps, int | float) and isinstance(latency, int | float):
                label = key_label(level_key(lv)) + (f", round {lv['round']}" if lv.get("round") else "")
                found.append(LatencyPoint(fw, label, float(tps), float(latency), marks[fw].ok))
    return found


def frontier(candidates: Sequence[LatencyPoint]) -> list[LatencyPoint]:
    """The points of `candidates` that stand ok and no other beats on both, by latency."""
    ok = [p for p in candidates if p.ok]
    return sorted((p for p in ok if not any(q is not p and q.tps >= p.tps and q.latency_ms <= p.latency_ms
                                            and (q.tps > p.tps or q.latency_ms < p.latency_ms) for q in ok)),
                  key=lambda p: (p.latency_ms, -p.tps))


def _not_ok(comparison: Comparison) -> list[str]:
    marks = standings(comparison)
    return [f"{fw} ({marks[fw].short()})" for fw in comparison["frameworks"] if not marks[fw].ok]


def latency_section(comparison: Comparison) -> list[str]:
    """REPORT.md's *Latency against throughput*: per latency figure, the overall frontier and each
    framework's own; nothing where no figure has two points that stand ok."""
    out: list[str] = []
    for metric, stat, name in LATENCIES:
        found = points(comparison, metric, stat)
        if sum(p.ok for p in found) < 2:
            continue
        overall = frontier(found)
        out += [f"### {name}", "", f"| On the overall frontier | {name} (ms) | Output tok/s |", "|---|---|---|"]
        out += [f"| {p.framework} {p.level} | {p.latency_ms:.1f} | {p.tps:.1f} |" for p in overall]
        own = [f"{fw}: {', '.join(p.level for p in front)}" for fw in comparison["frameworks"]
               if (front := frontier([p for p in found if p.framework == fw]))]
        out += ["", f"Each framework's own frontier: {'; '.join(own)}.", ""]
    if not out:
        return []
    left = _not_ok(comparison)
    tail = [f"Drawn, on no frontier: {', '.join(left)}.", ""] if left else []
    return ["## Latency against throughput", "", NOTE, "", *out, *tail]


def latency_figure(comparison: Comparison) -> Figure | None:
    """Output tok/s across, one latency figure up per panel: each framework's points joined along
    its own frontier, the overall frontier a grey step line, points that do not stand ok as grey x;
    None where no panel has two points that stand ok."""
    return draw([(name, points(comparison, metric, stat)) for metric, stat, name in LATENCIES],
                comparison["frameworks"], f"{comparison['model']} ({comparison['split']}) on {comparison['machine']}")


def draw(every: Sequence[tuple[str, Sequence[LatencyPoint]]], frameworks: Sequence[str], about: str) -> Figure | None:
    """One panel per (latency name, points) with two or more points that stand ok; None without one."""
    panels = [(name, found) for name, found in every if sum(p.ok for p in found) >= 2]
    if not panels:
        return None
    fig = figure(3.8 * len(panels), 3.4)
    colours: dict[str, Any] = {}
    for ax, (name, found) in zip(fig.subplots(1, len(panels), squeeze=False).ravel(), panels, strict=True):
        overall = sorted(frontier(found), key=lambda p: p.tps)
        ax.step([p.tps for p in overall], [p.latency_ms for p in overall], where="pre", color="0.6", linewidth=3,
                alpha=0.5, label="overall frontier")
        for fw in frameworks:
            mine = [p for p in found if p.framework == fw]
            if not mine:
                continue
            own = sorted(frontier(mine), key=lambda p: p.tps)
            line = ax.plot([p.tps for p in own], [p.latency_ms for p in own], marker="o", linewidth=1,
                           color=colours.get(fw), label=fw if own else None)
            colours.setdefault(fw, line[0].get_color())
            off = [p for p in mine if p.ok and p not in own]
            ax.plot([p.tps for p in off], [p.latency_ms for p in off], "o", fillstyle="none", color=colours[fw])
            bad = [p for p in mine if not p.ok]
            ax.plot([p.tps for p in bad], [p.latency_ms for p in bad], "x", color="0.5",
                    label=f"{fw} (not ok)" if bad else None)
            for p in mine:
                ax.annotate(p.level, (p.tps, p.latency_ms), textcoords="offset points", xytext=(3, 3), fontsize=6)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("output tok/s", fontsize=8)
        ax.set_ylabel(f"{name} (ms)", fontsize=8)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(f"Latency against throughput (lines: frontiers; hollow: off its own; x: not ok) — {about}",
                 fontsize=9)
    return fig


def write_latency_frontier(comparison: Comparison, plots_dir: Path) -> Path | None:
    """plots/latency_frontier.png, or None where no latency figure has two points that stand ok."""
    fig = latency_figure(comparison)
    return None if fig is None else save(fig, plots_dir / LATENCY_FRONTIER_PNG)
