"""What every report figure shares: a fixed-size figure on an Agg canvas and its PNG bytes, the
log-2 axis of measured levels, and the like-with-like marks.

Figures use matplotlib's object API on an Agg canvas: no pyplot global state and no display, so
a report can be rebuilt on a headless machine or inside a pytest session. Every figure has a fixed
size and dpi (no tight bounding box), so the same data gives images of the same pixel size.

Like with like (docs/results.md): a figure that puts runs side by side whose request settings
differ (bench.reports.comparison.setting_differences, over the runs that figure draws) marks each
label with the mark of its settings (†, ‡, ...: the same mark, the same settings) and names the
differing settings under the figure (`unlike`, `note_unlike`).
"""

from __future__ import annotations

import dataclasses
import io
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from bench.base.files import atomic_write
from bench.core.result.model import RunConfig
from bench.reports.comparison import setting_differences

DPI = 100
CONCURRENCY_AXIS = "concurrency (requests in flight)"
RATE_AXIS = "request rate (requests/s, open loop)"
MARKS = ("†", "‡", "§", "¶", "‖", "#")  # then [7], [8], ...; never "*", which marks a summary box


@dataclasses.dataclass(frozen=True)
class Unlike:
    """How the runs a figure puts side by side differ: each name's mark, and the figure's note."""

    marks: dict[str, str]  # name -> its mark; empty when every run had the same settings
    note: str | None


def unlike(run_configs: Mapping[str, RunConfig]) -> Unlike:
    """The marks and note of the runs `run_configs` names (a name -> its result's run_config):
    names with the same values of the differing settings share a mark."""
    differing = setting_differences(run_configs)
    if not differing:
        return Unlike({}, None)
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(run_configs):
        groups.setdefault(tuple(values[name] for values in differing.values()), []).append(name)
    marks: dict[str, str] = {}
    parts = []
    for i, (values, names) in enumerate(groups.items()):
        mark = MARKS[i] if i < len(MARKS) else f"[{i + 1}]"
        marks.update(dict.fromkeys(names, mark))
        parts.append(f"{mark} {', '.join(names)}: " + "; ".join(f"{k}={v}" for k, v in zip(differing, values,
                                                                                            strict=True)))
    return Unlike(marks, f"Not like with like: {', '.join(differing)} differ. " + " · ".join(parts))


def marked(name: str, found: Unlike, shown: str | None = None) -> str:
    """`shown` (default: the name) with the name's mark after it, if it has one."""
    mark = found.marks.get(name)
    return f"{shown or name} {mark}" if mark else shown or name


def note_unlike(fig: Figure, found: Unlike) -> None:
    """The note under the whole figure, wrapped to its width; nothing when the runs were alike."""
    if found.note:
        fig.supxlabel(textwrap.fill(found.note, int(fig.get_figwidth() * 17)), fontsize=7)


def figure(width_in: float, height_in: float) -> Figure:
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def save(fig: Figure, path: Path) -> Path:
    atomic_write(path, png(fig))
    return path


def log2_axis(ax: Any, levels: list[float], xlabel: str = CONCURRENCY_AXIS) -> None:
    """A log-2 axis that labels the levels actually measured, not powers of two."""
    ax.set_xscale("log", base=2)
    if levels:
        ax.set_xticks(levels, [f"{c:g}" for c in levels])
        ax.set_xlim(min(levels) / 1.4, max(levels) * 1.4)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
