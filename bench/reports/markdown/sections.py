"""REPORT.md's sections: the header (runs, verdicts), a table per level, the SLO sweep, the
imported results' notes, the suite's overhead, the audits, and the plots' captions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.core.level_run import LevelKey, key_label, level_key, rate_text
from bench.core.metrics import audit_lines
from bench.core.metrics import table as metric_table
from bench.core.open_loop import ConcurrencySweepBlock, Sweep
from bench.core.result import imported
from bench.core.result.model import Level, Result
from bench.reports import between, plots
from bench.reports.comparison import Comparison, setting_differences, standings
from bench.reports.markdown.rows import (
    GOODPUT_ROWS,
    SERVER_NOTE,
    figure_rows,
    level_rows,
    open_loop_rows,
    reasoning_at,
    reasoning_rows,
    row_metrics,
    server_rows,
)
from bench.reports.markdown.text import MISSING_LEVEL, NULL, bullets, num, table
from bench.reports.standing import Standing, shown


def _value(result: Result, row: str, render: Callable[[Level], str], level: Level, standing: Standing) -> str:
    """The row's value with its result's marks (`(degraded)`, `(not this run)`: bench.reports.standing);
    an imported one its tool derived differently is marked `(<tool>)` too."""
    text = render(level)
    if text == NULL:
        return text
    source = imported.source(result)
    tool = [] if source is None or imported.comparable(result, row_metrics().get(row, row)) else [source["label"]]
    marks = [*tool, *([standing.tags] if not standing.ok else [])]
    return f"{text} ({', '.join(marks)})" if marks else text


def _column(comparison: Comparison, fw: str, standing: Standing) -> str:
    return shown.column(fw, comparison["results"][fw], standing)


def section_title(level: LevelKey) -> str:
    """"Concurrency 8", "Request rate 4 req/s" (with its burstiness, cap and ramp when set), or
    "Trace mooncake-small.jsonl" (with its cap)."""
    if level[0] == "concurrency":
        return f"Concurrency {level[1]}"
    label = key_label(level, full=True)
    return f"T{label[1:]}" if level[0] == "trace" else f"Request rate {label}"


UNLIKE_ROW = "Differing settings"


def level_section(comparison: Comparison, level: LevelKey | int, relabel: Callable[[str], str] = str) -> list[str]:
    frameworks, results = comparison["frameworks"], comparison["results"]
    key = ("concurrency", level) if isinstance(level, int) else level
    by_fw = {fw: {level_key(lv): lv for lv in results[fw]["levels"]} for fw in frameworks}
    present = [by_fw[fw][key] for fw in frameworks if key in by_fw[fw]]
    every = level_rows()
    reasoned = any(m.when == "reasoning" and m.key in lv for m in metric_table.METRICS for lv in present)
    at = reasoning_at(every)
    rows_shown = [*every[:at], *(reasoning_rows() if reasoned else ()), *every[at:],
                  *(open_loop_rows() if key[0] != "concurrency" else ()),
                  *(GOODPUT_ROWS if any("goodput" in lv for lv in present) else ()), *(server := server_rows(present)),
                  *figure_rows(present)]
    marks = standings(comparison)  # at the numbers where they stand beside another framework's
    beside = marks if len(present) > 1 else {fw: Standing() for fw in frameworks}
    rows = [[relabel(label), *(_value(results[fw], label, render, by_fw[fw][key], beside[fw]) if key in by_fw[fw]
                               else MISSING_LEVEL for fw in frameworks)]
            for label, render in rows_shown]
    unlike = setting_differences({fw: results[fw]["run_config"] for fw in frameworks if key in by_fw[fw]})
    if unlike:  # said where the numbers are, not only in the warnings below (docs/results.md, Like with like)
        rows.insert(0, [UNLIKE_ROW, *("; ".join(f"{k}={v[fw]}" for k, v in unlike.items()) if fw in next(
            iter(unlike.values())) else MISSING_LEVEL for fw in frameworks)])
    header = ["Metric", *(_column(comparison, fw, marks[fw]) for fw in frameworks)]
    note = [f"Not like with like: these columns ran with different {', '.join(unlike)}; a difference between them "
            "may be the settings', not the frameworks'.", ""] if unlike else []
    intervals = between.interval_line({fw: by_fw[fw][key] for fw in frameworks if key in by_fw[fw]})
    server_note = [SERVER_NOTE, ""] if any(label.startswith("Server:") for label, _ in server) else []
    legend = shown.legend_note(beside, [fw for fw in frameworks if key in by_fw[fw]])
    return [f"## {section_title(key)}", "", *table(header, rows, "---:"), "", *legend, *note, *server_note, *intervals]


def sweep_section(comparison: Comparison) -> list[str]:
    """Each framework's `--request-rate sweep` and `--concurrency sweep`: the highest load that met
    the SLOs, and how it was found."""
    rows, marks = [], standings(comparison)
    for fw in comparison["frameworks"]:
        result = comparison["results"][fw]
        for search in _searches(result.get("sweep"), result.get("concurrency_sweep")):
            slo = ", ".join(f"{name}={limit:g}ms" for name, limit in search.slo.items())
            tried = ", ".join(f"{search.name(x)} {'met' if ok else 'missed'}"
                              for x, ok in zip(search.loads, search.passed, strict=True))
            rows.append([_column(comparison, fw, marks[fw]), slo,
                         "none met the SLO" if search.best is None else search.name(search.best),
                         num(search.goodput_rps, 2), "—" if search.failing is None else search.name(search.failing),
                         search.confident(), tried, search.stopped])
    if not rows:
        return []
    header = ["Framework", "SLO", "Highest load meeting the SLO", "Goodput there (req/s)", "Lowest load missing it",
              "At 95% confidence", "Levels run", "Stopped"]
    return ["## SLO sweep", "", "Levels from the start (a request rate, or a concurrency), doubled (or halved) until "
            "the SLO's outcome changed, then bisected to the tolerance; a level meets the SLO when every SLO's "
            "attainment reached its percentile, the level ran to its end and, open-loop, it sent at 90% of its offered "
            "rate or more (a level stopped over-saturated misses it). Those outcomes read each level's measured "
            "shares as the truth; *At 95% confidence* judges them by an exact binomial test, keeping the levels it "
            "cannot decide apart (docs/metrics.md).",
            "", *table(header, rows), ""]


@dataclass(frozen=True)
class _Search:
    """A sweep block as the table reads it, whichever load it searched."""

    unit: str  # " req/s", or "" for concurrency ("c=4")
    slo: Mapping[str, float]
    loads: list[float]
    passed: list[bool]
    best: float | None
    failing: float | None
    goodput_rps: float | None
    stopped: str
    decided: bool  # written with the verdicts at 95% (a sweep of earlier results lacks them)
    met: float | None = None
    missed: float | None = None
    undecided: tuple[float, ...] = ()

    def name(self, load: float) -> str:
        return f"{rate_text(load)} req/s" if self.unit else f"c={load:g}"

    def confident(self) -> str:
        """"met up to 2 req/s, missed from 4 req/s, undecided: 3 req/s"; — for a sweep written without it."""
        if not self.decided:
            return "—"
        parts = ["none met" if self.met is None else f"met up to {self.name(self.met)}",
                 "none missed" if self.missed is None else f"missed from {self.name(self.missed)}"]
        if self.undecided:
            parts.append("undecided: " + ", ".join(self.name(x) for x in self.undecided))
        return ", ".join(parts)


def _searches(rates: Sweep | None, slots: ConcurrencySweepBlock | None) -> list[_Search]:
    found = []
    if rates is not None:
        found.append(_Search(" req/s", rates["slo"], rates["rates"], rates["passed"], rates["best_rps"],
                             rates["failing_rps"], rates["goodput_rps"], rates["stopped"], "decisions" in rates,
                             rates.get("best_met_rps"), rates.get("lowest_missed_rps"),
                             tuple(rates.get("undecided_rps", ()))))
    if slots is not None:
        found.append(_Search("", slots["slo"], [float(c) for c in slots["concurrencies"]], slots["passed"],
                             slots["best_concurrency"], slots["failing_concurrency"], slots["goodput_rps"],
                             slots["stopped"], True, slots["best_met_concurrency"], slots["lowest_missed_concurrency"],
                             tuple(slots["undecided_concurrencies"])))
    return found


def _origin(result: Result) -> str:
    """` (imported (SiliconBench) from llamacpp_20261120_101500.json)`, or "" for a measured result."""
    source = imported.source(result)
    return f" ({imported.label(result)} from {Path(source['file']).name})" if source else ""


def imported_notes(comparison: Comparison) -> list[str]:
    """Where each imported result came from, what of it is not compared, and its own warnings."""
    lines = []
    for fw, label in sorted(comparison.get("imported", {}).items()):
        result = comparison["results"][fw]
        source = imported.source(result)
        if source is None:
            continue
        left_out = imported.left_out(result)
        lines.append(f"{fw}: {label} (sha256 {source['sha256'][:12]}, its timestamp {source['timestamp']})"
                     + (f"; {left_out}; a value marked ({source['label']}) is not comparable" if left_out else ""))
        lines += [f"{fw}: {warning}" for warning in source["warnings"]]
    return lines


def _verdict(comparison: Comparison, fw: str) -> str:
    verdict = comparison["results"][fw]["verdict"]
    notes = [*verdict["annotations"], *(["suspicious"] if fw in comparison["suspicious"] else [])]
    return f"{verdict['verdict']} ({', '.join(notes)})" if notes else verdict["verdict"]


def this_run_lines(comparison: Comparison) -> list[str]:
    """Which run the report is about, and the results of other runs it shows or left out."""
    run = comparison.get("this_run") or {"run_id": None, "chosen_by": ""}
    if run["run_id"] is None:
        return []
    how = {"given": "named by --run-id", "the newest result here": "the run of the newest result here"}.get(
        run["chosen_by"], run["chosen_by"])
    earlier = shown.earlier_runs(standings(comparison))
    left = [f"{i['framework']}: {i['reason']} (file {i['file']})" for i in comparison.get("left_out", [])]
    also = f" with {', '.join(run['with_runs'])}, its other sessions" if run.get("with_runs") else ""
    return [" ".join([f"This run: {run['run_id']}{also} ({how}).",
                      *([f"From other runs, marked `not this run` and in no order: {'; '.join(earlier)}."] if earlier
                        else []),
                      *([f"Left out, not from this run (`cellbench report --other-runs mark` shows them): "
                         f"{'; '.join(left)}."] if left else [])]), ""]


def report_header(comparison: Comparison) -> list[str]:
    frameworks = comparison["frameworks"]
    prov = comparison["provenance"]
    marks = standings(comparison)
    runs = [[fw, prov[fw]["run_id"], prov[fw]["finished_at"], prov[fw]["file"] + _origin(comparison["results"][fw]),
             prov[fw]["model_path"] or NULL, marks[fw].short()] for fw in frameworks]
    verdicts = [[fw, _verdict(comparison, fw), comparison["results"][fw]["verdict"]["reason"],
                 comparison["results"][fw]["framework"]["version"]] for fw in frameworks]
    return [
        f"# cellbench results — {comparison['model']} ({comparison['split']}) on {comparison['machine']}",
        "",
        f"Generated {comparison['generated_at']} from the result files beside this report "
        "(the same data is in comparison.json).",
        "",
        "## Runs",
        "",
        *this_run_lines(comparison),
        *table(["Framework", "Run id", "Finished", "File", "Model path", "Standing"], runs),
        "",
        "## Verdicts",
        "",
        *table(["Framework", "Verdict", "Reason", "Framework version"], verdicts),
        "",
    ]


OVERHEAD_PARTS = ("spawn_s", "ready_detect_bound_s", "teardown_s")


def _seconds(value: object) -> float:
    """A part of a server's overhead: its seconds, 0 where not measured."""
    return float(value) if isinstance(value, int | float) else 0.0


def suite_overhead(result: Result) -> dict[str, float] | None:
    """The suite's own seconds in a cell, per part and in total, and their share of the cell.

    part_s = Σ over the cell's servers of that part (spawn, readiness detection bound, teardown);
    total_s = Σ parts; share = total_s / duration_s (the cell's wall time, setup to result).
    The readiness part is an upper bound, so the share is too. None for a result without the
    servers' overhead (an endpoint, an imported result, a file of an earlier cellbench)."""
    spans = [server["overhead"] for server in result.get("servers", []) if "overhead" in server]
    if not spans or not result.get("duration_s"):
        return None
    parts = {part: sum(_seconds(span.get(part)) for span in spans) for part in OVERHEAD_PARTS}
    total = sum(parts.values())
    return {**parts, "total_s": total, "share": total / result["duration_s"]}


def overhead_section(comparison: Comparison) -> list[str]:
    rows = [[fw, *(f"{o[part]:.3f}" for part in OVERHEAD_PARTS), f"{o['total_s']:.3f}",
             f"{comparison['results'][fw]['duration_s']:.1f}", f"{o['share']:.2%}"]
            for fw in comparison["frameworks"] if (o := suite_overhead(comparison["results"][fw]))]
    if not rows:
        return []
    header = ["Framework", "Spawn (s)", "Readiness noticed within (s)", "Teardown (s)", "Total (s)",
              "Cell wall time (s)", "Share"]
    return ["## Suite overhead", "", "The suite's own time per cell: starting each server, noticing it is ready "
            "(an upper bound), stopping its process group; the framework's own load time is not in it.", "",
            *table(header, rows, "---:"), ""]


def audits_section(comparison: Comparison) -> list[str]:
    """A line per framework and level whose audit fired, and per audit a framework could not make
    (bench.core.metrics.audits); an annotation of the cell, never its verdict."""
    results = comparison["results"]
    lines = [f"{fw}: {line}" for fw in comparison["frameworks"] for line in audit_lines(results[fw]["levels"])]
    return bullets("Audits", lines, "None: every level audited passed token accounting (5% of its requests or "
                    "fewer off their chunk count) and ran every request to its max_tokens.")


def caption(plot: Path, levels: list[LevelKey]) -> str:
    if plot.name == plots.THROUGHPUT_PNG:
        return "Output throughput against concurrency"
    if plot.name == plots.THROUGHPUT_RATE_PNG:
        return "Output throughput against request rate (open loop)"
    if plot.name == plots.RESOURCES_PNG:
        return "Server memory and CPU over the cell"
    if plot.name == plots.FRONTIER_PNG:
        return "Output throughput against server peak memory, per concurrency, the frontier marked"
    if plot.name == plots.LATENCY_FRONTIER_PNG:
        return "Latency against output throughput across levels, each framework's frontier and the overall one"
    level = next((key for key in levels if plots.latency_png(key) == plot.name), None)
    return f"TTFT and TPOT at {section_title(level).lower() if level else plot.stem}"


