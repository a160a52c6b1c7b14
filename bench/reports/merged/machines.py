"""The merged report's *Between machines*: one framework on each machine, judged as REPORT.md's
*Between frameworks* judges frameworks (bench.reports.between), on the output tok/s estimates each
merged cell keeps (`tps_estimates`, plain JSON in merged.json) beside its peak memory and fidelity.
Machines are listed by name, never by a figure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.core.metrics.stats.change import Estimate
from bench.core.noise import Floors
from bench.core.result.model import Result
from bench.reports.between import FIGURES, TPS_KEY, basis_words, estimate_of, judge, pair_line
from bench.reports.comparison import setting_differences
from bench.reports.lenses import memory_words
from bench.reports.standing import Standing, shown


def tps_estimates(result: Result, floors: Floors | None) -> dict[str, dict[str, Any]]:
    """Output tok/s of each concurrency level of `result` as an estimate (value, log standard error,
    degrees of freedom or None for a normal's, basis, why), with its machine's floor: what the merged
    report judges machines by, kept in merged.json as plain JSON."""
    figure = FIGURES[TPS_KEY]
    out = {}
    for lv in result["levels"]:
        if "concurrency" in lv:
            e = estimate_of(result, lv, figure, floors)
            out[str(lv["concurrency"])] = {"value": e.value, "log_se": e.log_se,
                                           "df": None if e.df == float("inf") else e.df, "basis": e.basis, "why": e.why}
    return out


def _machine_words(machine: str, cell: Mapping[str, Any], level: int, est: Estimate) -> str:
    """One machine's figures at one level, side by side: "m1 173.8 tok/s, peak 181 MiB"."""
    mib = (cell.get("peak_memory_mib") or {}).get(str(level))
    return f"{machine} {est.value:.1f} tok/s" + (f", peak {mib:.0f} MiB" if isinstance(mib, int | float) else "")


def machines_lines(table: Mapping[str, Any]) -> list[str]:
    """The merged report's *Between machines* of one table: per framework that ran on two or more
    machines, per concurrency level, the machines by name with output tok/s and peak memory side by
    side, and every pair's decision on output tok/s, worded as *Between frameworks* words it; the
    framework's fidelity on each machine once. Nothing is ranked: no order by speed."""
    figure, lines, bases = FIGURES[TPS_KEY], [], set()
    for fw in table["frameworks"]:
        measured = {m: c for m, c in sorted(table["cells"][fw].items()) if c.get("tps_estimates")}
        marks = {m: Standing.from_json(c["standing"]) if c.get("standing") else Standing() for m, c in measured.items()}
        cells = {m: c for m, c in measured.items() if marks[m].ok}  # a marked cell is named, never judged
        if apart := shown.left_out(marks, measured):
            lines.append(f"- {fw}: not judged: {apart}")
        levels = sorted({int(k) for c in cells.values() for k in c["tps_estimates"]})
        for level in levels:
            est = {m: Estimate(e["value"], e["log_se"], float("inf") if e["df"] is None else e["df"], e["basis"],
                               e["why"]) for m, c in cells.items() if (e := c["tps_estimates"].get(str(level)))}
            valued = [m for m in est if est[m].value is not None]
            if len(valued) < 2:
                continue
            bases |= {est[m].basis for m in valued}
            said = "; ".join(_machine_words(m, cells[m], level, est[m]) for m in valued)
            lines.append(f"- {fw} at c={level}: {said}")
            for i, first in enumerate(valued):
                for second in valued[i + 1:]:
                    better, worse = sorted((first, second), key=lambda m: -(est[m].value or 0.0))
                    unlike = setting_differences({m: cells[m]["run_config"] or {} for m in (better, worse)})
                    line = pair_line(figure, better, worse, judge(figure, est[worse], est[better]), list(unlike), False)
                    if " is faster than " in line:
                        peaks = {m: (cells[m].get("peak_memory_mib") or {}).get(str(level)) for m in (better, worse)}
                        line += memory_words(better, worse, peaks)
                    lines.append(f"  - {line}")
        if len(cells) > 1 and any(c.get("fidelity") for c in cells.values()):
            said = "; ".join(f"{m} {c.get('fidelity') or 'not run'}" for m, c in cells.items())
            lines.append(f"- {fw} fidelity: {said}")
    if not lines:
        return []
    return [f"### Between machines — {table['model']} {table['split']}", "",
            "One framework on each machine, listed by machine name, never by a figure: output tok/s and the "
            "server's peak memory side by side per level, every pair of machines judged on output tok/s as "
            "REPORT.md's Between frameworks judges frameworks (\"faster\" then says how the two stand on memory), "
            f"and the framework's fidelity on each machine. Basis: {basis_words(bases)}.", "", *lines, ""]
