"""Speed and memory together, never one ranked alone (docs/results.md, Memory): each level's
figures side by side (`side_by_side`, REPORT.md's *Between frameworks* table), what a sentence that
calls one stack faster says of the two stacks' memory (`memory_words`), and which stacks no other
beats on both (the frontier).

At each level, every framework whose result stands ok (bench.reports.standing) and has both an
output throughput and a server peak memory (bench.core.figures.memory: `memory.peak_bytes`) is a
point. A point is on the frontier when no other point has at least its throughput with at most its
memory, one of them strictly better; the frontier is the staircase through those points, from the
least memory up. Everything off it is beaten by a named stack on both at once. Nothing here ranks:
the frontier is a set, and REPORT.md lists the points by memory, not by speed.

Points are single values (the level's, or its rounds' median): two stacks within each other's
intervals may swap places on another run, so the table gives each figure's interval where the
level has one, and the section says so. A result that does not stand ok is not a point; the
section names it under the table.

`frontier_section` is REPORT.md's *Memory against throughput*; `frontier_figure` the chart, one
panel per concurrency level (plots/memory_frontier.png, and the HTML summary's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from matplotlib.figure import Figure

from bench.core.figures import block_of
from bench.core.figures.memory import MIB
from bench.core.lenses.fidelity import agreement, flagged, in_words, read_answers
from bench.core.level_run import LevelKey, level_key
from bench.core.metrics.stats.intervals import bound_text
from bench.reports.comparison import Comparison, standings
from bench.reports.drawing import figure, save
from bench.reports.standing import Standing, shown

FRONTIER_PNG = "memory_frontier.png"
TABLE_BLANKS = ("N/A", "—")  # a figure the level lacks: no mark beside it
NOTE = ("A point is on the frontier when no other stack had at least its output tok/s with at most its server peak "
        "memory; off it, the stack named beat it on both. The points are single runs' (or their rounds' medians): "
        "stacks within each other's intervals may trade places on another run.")


@dataclass(frozen=True)
class Point:
    name: str
    memory: float  # bytes
    tps: float
    level: Mapping[str, Any]


def _tps(level: Mapping[str, Any]) -> str:
    """Output tok/s with its interval where the level has one: "626.2 [567.5, 685.0]"; N/A without."""
    tps = level.get("output_throughput_tps")
    if not isinstance(tps, int | float):
        return "N/A"
    return f"{tps:.1f}" + bound_text({"ci95": level.get("throughput_ci95") or {}}, "output_throughput_tps", ".1f")


def on_frontier(points: Sequence[Point]) -> dict[str, str | None]:
    """Each point's name -> None where it is on the frontier, else the name of a point that beats it
    on both (at least its throughput with at most its memory, one of them strictly)."""
    beaten: dict[str, str | None] = {}
    for p in points:
        better = [q for q in points if q is not p and q.tps >= p.tps and q.memory <= p.memory
                  and (q.tps > p.tps or q.memory < p.memory)]
        beaten[p.name] = min(better, key=lambda q: (q.memory, -q.tps)).name if better else None
    return beaten


def points_at(comparison: Comparison, key: LevelKey) -> tuple[list[Point], list[str]]:
    """The points of the level `key` (ok results with both figures), and the frameworks left out,
    each with why."""
    marks = standings(comparison)
    points: list[Point] = []
    left: list[str] = []
    for fw in comparison["frameworks"]:
        level = next((lv for lv in comparison["results"][fw]["levels"] if level_key(lv) == key), None)
        if level is None:
            continue
        memory, tps = block_of(level, "memory").get("peak_bytes"), level.get("output_throughput_tps")
        if not marks[fw].ok:
            left.append(f"{fw}: {marks[fw].short()}")
        elif not isinstance(memory, int | float) or not memory > 0:
            left.append(f"{fw}: no server memory reading (an --endpoint, or a result written before the memory lens)")
        elif not isinstance(tps, int | float) or not level.get("successful"):
            left.append(f"{fw}: no output throughput")
        else:
            points.append(Point(fw, float(memory), float(tps), level))
    return sorted(points, key=lambda p: (p.memory, -p.tps)), left


def _concurrency_levels(comparison: Comparison) -> list[LevelKey]:
    return sorted({level_key(lv) for r in comparison["results"].values() for lv in r["levels"]
                   if level_key(lv)[0] == "concurrency"})


def frontier_section(comparison: Comparison, title: Any) -> list[str]:
    """REPORT.md's *Memory against throughput*: per concurrency level with two or more points, the
    points by memory with their frontier standing; nothing where no level has two."""
    out: list[str] = []
    for key in _concurrency_levels(comparison):
        points, left = points_at(comparison, key)
        if len(points) < 2:
            continue
        beaten = on_frontier(points)
        out += [f"### {title(key)}", "", "| Framework | Server peak memory (MiB) | Output tok/s | Frontier |",
                "|---|---|---|---|"]
        for p in points:
            memory = f"{p.memory / MIB:.0f}" + bound_text(dict(block_of(p.level, "memory")), "peak_bytes", ".0f",
                                                           1 / MIB)
            tps = _tps(p.level)
            standing = "on it" if beaten[p.name] is None else f"off: {beaten[p.name]} beats it on both"
            out.append(f"| {p.name} | {memory} | {tps} | {standing} |")
        out += ["", *(f"Not a point: {why}." for why in left), *([""] if left else [])]
    return ["## Memory against throughput", "", NOTE, "", *out] if out else []


def frontier_figure(comparison: Comparison) -> Figure | None:
    """Output tok/s against server peak memory, one panel per concurrency level with two or more
    points, the frontier drawn as a staircase; None where no level has two."""
    panels = [(f"c={key[1]}", points) for key in _concurrency_levels(comparison)
              if len(points := points_at(comparison, key)[0]) >= 2]
    return draw(panels, f"{comparison['model']} ({comparison['split']}) on {comparison['machine']}")


def draw(panels: Sequence[tuple[str, Sequence[Point]]], about: str) -> Figure | None:
    """One panel per (title, points) of two or more points: each point named, o on the frontier and
    x off it, the frontier a staircase from the least memory up; None without such a panel."""
    panels = [(title, points) for title, points in panels if len(points) >= 2]
    if not panels:
        return None
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = figure(3.6 * columns, 3.2 * rows)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (title, unsorted) in zip(axes, panels, strict=False):
        points = sorted(unsorted, key=lambda p: (p.memory, -p.tps))
        beaten = on_frontier(points)
        front = [p for p in points if beaten[p.name] is None]
        ax.step([p.memory / MIB for p in front], [p.tps for p in front], where="post", color="0.4", linewidth=1)
        for p in points:
            ax.plot([p.memory / MIB], [p.tps], "o" if beaten[p.name] is None else "x", markersize=7)
            ax.annotate(p.name, (p.memory / MIB, p.tps), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("server peak memory (MiB)", fontsize=8)
        ax.set_ylabel("output tok/s", fontsize=8)
        ax.set_ylim(bottom=0)
        ax.margins(x=0.2)  # room for the names at both ends
        ax.grid(True, alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"Throughput against memory (o on the frontier, x beaten on both) — {about}", fontsize=9)
    return fig


def side_by_side(present: Mapping[str, Mapping[str, Any]], marks: Mapping[str, Standing],
                 fidelity: Mapping[str, FidelityView] | None = None) -> list[str]:
    """The level's figures of every framework, one row each, by name, the results that do not stand ok
    last and marked at every figure: no column is an order. The memory column where some framework
    has a reading."""
    def memory(lv: Mapping[str, Any]) -> str:
        block = block_of(lv, "memory")
        peak, reserved = block.get("peak_bytes"), block.get("reserved_bytes")
        if peak is None:
            return "—"
        aside = f" ({reserved / MIB:.0f} set aside at start)" if reserved is not None else ""
        return f"{peak / MIB:.0f}" + bound_text(dict(block), "peak_bytes", ".0f", 1 / MIB) + aside
    read = any(block_of(lv, "memory").get("peak_bytes") is not None for lv in present.values())
    answered = bool(fidelity) and any(fw in (fidelity or {}) for fw in present)
    heads = ["Framework", "Output tok/s", "TTFT p50 (ms)", *(["Server peak memory (MiB)"] if read else []),
             *(["Fidelity"] if answered else [])]
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for fw in sorted(present, key=lambda fw: (not marks[fw].ok, fw)):
        lv, mark = present[fw], marks[fw]
        ttft = lv.get("ttft_ms") or {}
        cells = [_tps(lv),
                 "N/A" if ttft.get("p50") is None else f"{ttft['p50']:.1f}" + bound_text(ttft, "p50", ".1f"),
                 *([memory(lv)] if read else [])]
        if answered:  # the cell's, not the level's: the same in each level's table
            cells.append(view.full if (view := (fidelity or {}).get(fw)) else "—")
        rows.append(f"| {shown.label(fw, mark)} | " + " | ".join(shown.at_number(c, mark, TABLE_BLANKS)
                                                                  for c in cells) + " |")
    return [*rows, ""]


def memory_words(better: str, worse: str, peaks_mib: Mapping[str, float | None]) -> str:
    """How the two stand on memory, for a sentence that calls one faster, from each one's peak in MiB
    (None: no reading): "; memory: vllm 2400 MiB, llamacpp 300 MiB (the faster holds 8x)", or that
    one has no reading."""
    peaks = {name: peaks_mib.get(name) for name in (better, worse)}
    if all(p is None for p in peaks.values()):
        return ""
    said = ", ".join(f"{name} {'no reading' if p is None else f'{p:.0f} MiB'}" for name, p in peaks.items())
    high, low = peaks[better], peaks[worse]
    return f"; memory: {said}" + (f" (the faster holds {high / low:.2g}x)" if high and low else "")


class FidelityView(NamedTuple):
    """A stack's fidelity as the side-by-side table says it, and as a sentence calling it faster does."""

    full: str
    brief: str


def fidelity_views(comparison: Comparison, split_dir: Path) -> dict[str, FidelityView]:
    """Per framework with a fidelity run, its fidelity (bench.core.lenses.fidelity.in_words) against
    its reference's answers as this comparison chose them, read again here: the reference may have
    run after it."""
    results = comparison["results"]
    views: dict[str, FidelityView] = {}
    for fw in comparison["frameworks"]:
        if (block := results[fw].get("fidelity")) is None:
            continue
        reference = block["reference_framework"]
        theirs = results[reference].get("fidelity") if reference in results else None
        vs = None if theirs is None or "error" in theirs or fw == reference else agreement(
            read_answers(split_dir / block["answers"]), read_answers(split_dir / theirs["answers"]))
        diverges = vs is not None and theirs is not None and flagged(vs, theirs["self"])
        views[fw] = FidelityView(in_words(block, fw, vs, diverges), in_words(block, fw, vs, diverges, brief=True))
    return views


def fidelity_words(better: str, worse: str, views: Mapping[str, FidelityView] | None) -> str:
    """How the two stand on fidelity, for a sentence that calls one faster: "; fidelity: vllm 15/16
    alike to 16 tokens vs hf_transformers, llamacpp 16/16 ..." (only those that ran it)."""
    said = [f"{fw} {views[fw].brief}" for fw in (better, worse) if views and fw in views]
    return f"; fidelity: {', '.join(said)}" if said else ""


def write_frontier(comparison: Comparison, plots_dir: Path) -> Path | None:
    """plots/memory_frontier.png, or None where no level has two points."""
    fig = frontier_figure(comparison)
    return None if fig is None else save(fig, plots_dir / FRONTIER_PNG)
