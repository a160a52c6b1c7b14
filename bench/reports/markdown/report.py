"""REPORT.md of one split directory: its sections in order (bench.reports.markdown.sections)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from bench.base.files import atomic_write
from bench.core.noise import Floors
from bench.reports import between, plots
from bench.reports.comparison import Comparison
from bench.reports.lenses import FidelityView, fidelity_views, frontier_section
from bench.reports.lenses.latency import latency_section
from bench.reports.markdown.sections import (
    audits_section,
    caption,
    imported_notes,
    level_section,
    overhead_section,
    report_header,
    section_title,
    sweep_section,
)
from bench.reports.markdown.sessions import sessions_section
from bench.reports.markdown.text import bullets

REPORT_FILE = "REPORT.md"


def render_report(comparison: Comparison, plot_files: list[Path], floors: Floors | None = None, *,
                  relabel: Callable[[str], str] = str, note: tuple[str, ...] = (),
                  fidelity: Mapping[str, FidelityView] | None = None) -> str:
    """The markdown text; `plot_files` are embedded by name, relative to the report; `floors`: the
    machine's noise floors of these cells, for *Between frameworks* (bench.reports.between); `relabel`
    renames the level tables' rows and `note` goes under the title (`cellbench report --as`); `fidelity`:
    each framework's fidelity as *Between frameworks* shows it (bench.reports.lenses.fidelity_views)."""
    if not comparison["frameworks"]:
        body = ["No result of this machine in this directory.", ""]
    else:
        body = [line for level in plots.all_levels(comparison) for line in level_section(comparison, level, relabel)]
        body += between.interval_notes(comparison)
        body += between.between_section(comparison, plots.all_levels(comparison), floors, section_title, fidelity)
        body += frontier_section(comparison, section_title)
        body += latency_section(comparison)
        body += sweep_section(comparison)
        body += sessions_section(comparison)
    notes = [
        *bullets("Methodology warnings", comparison["methodology_warnings"],
                  "None: every framework ran with the same levels, requests, warm-up, server sharing and prompts."),
        *audits_section(comparison),
        *bullets("Suspicious results", [f"{fw}: {why}" for fw, why in sorted(comparison["suspicious"].items())],
                  "None: no output throughput changed 10x or more against the previous run of its cell."),
        *bullets("Ignored files", [f"{i['file']}: {i['reason']}" for i in comparison["ignored"]], "None."),
        *(bullets("Imported results", notes, "") if (notes := imported_notes(comparison)) else []),
        *overhead_section(comparison),
    ]
    levels = plots.all_levels(comparison) if comparison["frameworks"] else []
    figures = ["## Plots", "", *[f"![{caption(p, levels)}]({plots.PLOTS_DIR}/{p.name})\n" for p in plot_files]]
    top = report_header(comparison)
    return "\n".join([*top[:2], *(f"{line}\n" for line in note), *top[2:], *body, *notes, *figures])


def write_report(split_dir: Path, comparison: Comparison) -> Path:
    """Write the plots and `<split_dir>/REPORT.md` (atomically: a reader never sees half a report)."""
    split_dir = Path(split_dir)
    plot_files = plots.write_plots(comparison, split_dir)
    path = split_dir / REPORT_FILE
    atomic_write(path, render_report(comparison, plot_files, Floors(split_dir),
                                     fidelity=fidelity_views(comparison, split_dir)))
    return path
