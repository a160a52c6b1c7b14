"""REPORT.md for one split directory, rendered from its comparison.json alone.

One table per level (metrics as rows, frameworks as columns; the per-request metrics' rows are
those of the metric table, bench.core.metrics.table) over the union of the levels every
framework measured, so a level only one framework ran still shows, with "—" for the others.
Concurrency levels ("## Concurrency 8") and open-loop rate levels ("## Request rate 4 req/s", with
their offered and achieved rates and queueing delay) are levels of different kinds and always get
tables of their own; goodput rows appear where a level was judged against SLOs (--slo), TTFA and
reasoning rows beside TTFT where a level's model reasoned (bench.core.metrics.reasoning), and an
*SLO sweep* section gives each framework's highest rate meeting them. Above the tables: the run ids
that won, each verdict with its reason; under each, what its intervals rest on; below them, *Between
frameworks* (bench.reports.between), methodology differences, the levels' audits (token accounting,
output length), suspicious changes, the files left out, and the plots.

A result imported from another benchmark's file has its column headed `<framework>, imported
(<tool>)`, and each of its values that the tool derived differently from cellbench (its
`imported.methods`, bench.core.imported) is marked `(<tool>)`; an *Imported results* section says
where each came from and what is not comparable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.base.files import atomic_write
from bench.core import energy, imported
from bench.core.level_run import LevelKey, key_label, level_key, rate_text
from bench.core.metrics import audit_lines
from bench.core.metrics import table as metric_table
from bench.core.metrics.intervals import bound_text
from bench.core.metrics.table import Metric
from bench.core.noise import Floors
from bench.core.result_model import Level, Result
from bench.reports import between, plots
from bench.reports.between import INTERVALS_NOTE  # noqa: F401  (tests import it from here)
from bench.reports.comparison import Comparison, setting_differences

REPORT_FILE = "REPORT.md"
MISSING_LEVEL = "—"
NULL = "N/A"


def _num(value: float | None, digits: int, scale: float = 1.0, suffix: str = "") -> str:
    return NULL if value is None else f"{value * scale:.{digits}f}{suffix}"


def _key(level: Level, key: str, stat: str | None = None) -> float | None:
    """`level[key]` (or `level[key][stat]`) for a key ROWS names as data; None when absent (an
    imported level has no TPOT nor client block)."""
    return imported.metric_value(level, key if stat is None else f"{key}.{stat}")


def _stat(block: str, stat: str, digits: int = 1, scale: float = 1.0) -> Callable[[Level], str]:
    """The block's `stat`; a percentile with its 95% interval where the block has one (INTERVALS_NOTE)."""
    def cell(lv: Level) -> str:
        value = _num(_key(lv, block, stat), digits, scale)
        return value if value == NULL else value + bound_text(lv.get(block), stat, f".{digits}f", scale)
    return cell


def _field(key: str, digits: int = 1) -> Callable[[Level], str]:
    return lambda lv: _num(_key(lv, key), digits)


def _outcome(lv: Level) -> str:
    text = f"{lv['successful']} / {lv['failed']}"
    return f"{text} (partial: {lv['stop_reason']})" if lv["partial"] else text


def _gaps(key: str, stat: str, digits: int, scale: float) -> Callable[[Level], str]:
    """A per-gap metric (ITL) of a bundling framework is per chunk, not per token: say so in the cell."""
    def cell(lv: Level) -> str:
        value = _stat(key, stat, digits, scale)(lv)
        return f"{value} (per chunk)" if lv["itl_per_chunk"] and value != NULL else value
    return cell


def metric_rows(metric: Metric) -> list[tuple[str, Callable[[Level], str]]]:
    """A metric table row's REPORT.md rows (its `Shown`): "TTFT avg (ms)", "TTFT p50 (ms)", ..."""
    shown = metric.report
    if shown is None:
        return []
    render = _gaps if metric.per_gap else _stat
    return [(label, render(metric.key, stat, shown.digits, shown.scale)) for label, stat in shown.rows(metric)]


def _shown(when: tuple[str, ...], *, after_throughput: bool = False) -> list[tuple[str, Callable[[Level], str]]]:
    """The REPORT.md rows of the metric table's rows whose `when` is in `when`, in the table's order."""
    return [row for m in metric_table.METRICS if m.when in when and m.report is not None
            and m.report.after_throughput == after_throughput for row in metric_rows(m)]


_EVERY_LEVEL = ("always", "measured", "added")  # "added": an earlier result shows no value
Row = tuple[str, Callable[[Level], str]]


def level_rows() -> tuple[Row, ...]:
    """Every level's rows; the metrics' are the metric table's (bench.core.metrics.table), in its
    order. Milliseconds and tok/s to 1 decimal, seconds to 2 (the result stores E2EL in ms)."""
    return (
        ("Successful / Failed", _outcome),
        *_shown(_EVERY_LEVEL),
        ("Output throughput (tok/s)", lambda lv: between.rate_cell(lv, "output_throughput_tps", 1)),
        ("Input throughput (tok/s)", _field("input_throughput_tps")),
        ("Total throughput (tok/s)", _field("total_token_throughput_tps")),
        ("Request throughput (req/s)", lambda lv: between.rate_cell(lv, "request_throughput_rps", 2)),
        *_shown(_EVERY_LEVEL, after_throughput=True),
        ("Wall time (s)", _field("wall_time_s", 2)),
        ("Tokens per chunk", _field("tokens_per_chunk", 2)),
        ("Client CPU share", lambda lv: _num(lv["client"]["cpu_share"] if "client" in lv else None, 1, 100, "%")),
        ("Energy (J/output token)", lambda lv: energy.cell_text(lv["energy"]) if "energy" in lv else NULL),
    )


def reasoning_rows() -> tuple[Row, ...]:
    """Where a level of the table reasoned: the reasoning metrics' rows and the reasoning block's,
    after the rows of the metrics the table lists before the reasoning ones (TTFT): a reasoning
    model's TTFT ends at its first reasoning delta, its TTFA at the first answer delta
    (docs/metrics.md, Reasoning models)."""
    return (
        *_shown(("reasoning",)),
        ("Reasoning tokens avg", _stat("reasoning", "tokens_mean")),
        ("Reasoning / answer chunks", lambda lv: NULL if (block := lv.get("reasoning")) is None
         else f"{block['chunks_total']} / {block['answer_chunks_total']}"),
    )


def _reasoning_at(rows: tuple[Row, ...]) -> int:
    """Where in `rows` the reasoning rows go: after the last row of a metric listed before the first reasoning one."""
    metrics = metric_table.METRICS
    first = next((i for i, m in enumerate(metrics) if m.when == "reasoning"), len(metrics))
    before = {label for m in metrics[:first] for label, _ in metric_rows(m)}
    return max((i for i, (label, _) in enumerate(rows) if label in before), default=0) + 1


def open_loop_rows() -> tuple[Row, ...]:
    """Open-loop levels only: how the arrivals went, and the open-loop metrics' rows."""
    return (
        ("Offered rate (req/s)", _stat("open_loop", "offered_rate_rps", 2)),
        ("Achieved rate (req/s)", _stat("open_loop", "achieved_rate_rps", 2)),
        ("Queued / peak in flight", lambda lv: f"{lv['open_loop']['queued']} / {lv['open_loop']['peak_in_flight']}"
         if "open_loop" in lv else NULL),
        *_shown(("open_loop",)),
    )


ROWS = level_rows()  # as the table stands at import; the sections ask for the rows again


def _goodput(lv: Level) -> str:
    block = lv.get("goodput")
    if block is None:
        return NULL
    met = "SLO met" if block["slo_met"] else "SLO missed"
    return f"{_num(block['goodput_rps'], 2)} ({block['good_requests']} good, {met})"


# Levels judged against SLOs (--slo) only.
GOODPUT_ROWS: tuple[Row, ...] = (("Goodput (req/s)", _goodput),)
def row_metrics() -> dict[str, str]:
    """The metric each row shows, as an imported result labels its methods (bench.core.imported)."""
    return {
        "Successful / Failed": "failed",
        **{label: f"{m.key}.{stat}" for m in metric_table.METRICS if m.report is not None
           for label, stat in m.report.rows(m)},
        "Output throughput (tok/s)": "output_throughput_tps", "Input throughput (tok/s)": "input_throughput_tps",
        "Total throughput (tok/s)": "total_token_throughput_tps",
        "Request throughput (req/s)": "request_throughput_rps", "Wall time (s)": "wall_time_s",
        "Tokens per chunk": "tokens_per_chunk",
    }


def _cell(text: Any) -> str:
    """Table-safe text: a `|` would end the cell and a newline the row."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: list[str], rows: list[list[Any]], align: str = "---") -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |",
             "|" + "|".join(["---", *[align] * (len(header) - 1)]) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _value(result: Result, row: str, render: Callable[[Level], str], level: Level) -> str:
    """The row's value; an imported one its tool derived differently is marked `(<tool>)`."""
    text = render(level)
    source = imported.source(result)
    if source is None or text == NULL or imported.comparable(result, row_metrics().get(row, row)):
        return text
    return f"{text} ({source['label']})"


def _column(comparison: Comparison, fw: str) -> str:
    label = imported.label(comparison["results"][fw])
    return f"{fw}, {label}" if label else fw


def section_title(level: LevelKey) -> str:
    """"Concurrency 8", or "Request rate 4 req/s" (with its burstiness and cap when set)."""
    return f"Concurrency {level[1]}" if level[0] == "concurrency" else f"Request rate {key_label(level, full=True)}"


UNLIKE_ROW = "Differing settings"


def _level_section(comparison: Comparison, level: LevelKey | int, relabel: Callable[[str], str] = str) -> list[str]:
    frameworks, results = comparison["frameworks"], comparison["results"]
    key = ("concurrency", level) if isinstance(level, int) else level
    by_fw = {fw: {level_key(lv): lv for lv in results[fw]["levels"]} for fw in frameworks}
    present = [by_fw[fw][key] for fw in frameworks if key in by_fw[fw]]
    every = level_rows()
    reasoned = any(m.when == "reasoning" and m.key in lv for m in metric_table.METRICS for lv in present)
    at = _reasoning_at(every)
    rows_shown = [*every[:at], *(reasoning_rows() if reasoned else ()), *every[at:],
                  *(open_loop_rows() if key[0] == "rate" else ()),
                  *(GOODPUT_ROWS if any("goodput" in lv for lv in present) else ())]
    rows = [[relabel(label), *(_value(results[fw], label, render, by_fw[fw][key]) if key in by_fw[fw] else MISSING_LEVEL
                      for fw in frameworks)]
            for label, render in rows_shown]
    unlike = setting_differences({fw: results[fw]["run_config"] for fw in frameworks if key in by_fw[fw]})
    if unlike:  # said where the numbers are, not only in the warnings below (docs/results.md, Like with like)
        rows.insert(0, [UNLIKE_ROW, *("; ".join(f"{k}={v[fw]}" for k, v in unlike.items()) if fw in next(
            iter(unlike.values())) else MISSING_LEVEL for fw in frameworks)])
    header = ["Metric", *(_column(comparison, fw) for fw in frameworks)]
    note = [f"Not like with like: these columns ran with different {', '.join(unlike)}; a difference between them "
            "may be the settings', not the frameworks'.", ""] if unlike else []
    shown = between.interval_line({fw: by_fw[fw][key] for fw in frameworks if key in by_fw[fw]})
    return [f"## {section_title(key)}", "", *_table(header, rows, "---:"), "", *note, *shown]


def _sweep_section(comparison: Comparison) -> list[str]:
    """Each framework's `--request-rate sweep`: the highest rate that met the SLOs, and how it was found."""
    rows = []
    for fw in comparison["frameworks"]:
        sweep = comparison["results"][fw].get("sweep")
        if sweep is None:
            continue
        slo = ", ".join(f"{name}={limit:g}ms" for name, limit in sweep["slo"].items())
        tried = ", ".join(f"{rate_text(r)} {'met' if ok else 'missed'}"
                          for r, ok in zip(sweep["rates"], sweep["passed"], strict=True))
        best = "none met the SLO" if sweep["best_rps"] is None else f"{rate_text(sweep['best_rps'])} req/s"
        rows.append([_column(comparison, fw), slo, best, _num(sweep["goodput_rps"], 2),
                     "—" if sweep["failing_rps"] is None else f"{rate_text(sweep['failing_rps'])} req/s",
                     tried, sweep["stopped"]])
    if not rows:
        return []
    header = ["Framework", "SLO", "Highest rate meeting the SLO", "Goodput there (req/s)", "Lowest rate missing it",
              "Rates run (req/s)", "Stopped"]
    return ["## SLO sweep", "", "Open-loop levels from the start rate, doubled (or halved) until the SLO's outcome "
            "changed, then bisected to the tolerance; a rate meets the SLO when every SLO's attainment reached its "
            "percentile, the level ran to its end and it sent at 90% of its offered rate or more (docs/metrics.md).",
            "", *_table(header, rows), ""]


def _origin(result: Result) -> str:
    """` (imported (SiliconBench) from llamacpp_20261120_101500.json)`, or "" for a measured result."""
    source = imported.source(result)
    return f" ({imported.label(result)} from {Path(source['file']).name})" if source else ""


def _imported_notes(comparison: Comparison) -> list[str]:
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


def _header(comparison: Comparison) -> list[str]:
    frameworks = comparison["frameworks"]
    prov = comparison["provenance"]
    runs = [[fw, prov[fw]["run_id"], prov[fw]["finished_at"], prov[fw]["file"] + _origin(comparison["results"][fw]),
             prov[fw]["model_path"] or NULL] for fw in frameworks]
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
        *_table(["Framework", "Run id", "Finished", "File", "Model path"], runs),
        "",
        "## Verdicts",
        "",
        *_table(["Framework", "Verdict", "Reason", "Framework version"], verdicts),
        "",
    ]


OVERHEAD_PARTS = ("spawn_s", "ready_detect_bound_s", "teardown_s")


def suite_overhead(result: Result) -> dict[str, float] | None:
    """The suite's own seconds in a cell, per part and in total, and their share of the cell.

    part_s = Σ over the cell's servers of that part (spawn, readiness detection bound, teardown);
    total_s = Σ parts; share = total_s / duration_s (the cell's wall time, setup to result).
    The readiness part is an upper bound, so the share is too. None for a result without the
    servers' overhead (an endpoint, an imported result, a file of an earlier cellbench)."""
    spans = [server["overhead"] for server in result.get("servers", []) if "overhead" in server]
    if not spans or not result.get("duration_s"):
        return None
    parts = {part: sum(span.get(part, 0.0) for span in spans) for part in OVERHEAD_PARTS}
    total = sum(parts.values())
    return {**parts, "total_s": total, "share": total / result["duration_s"]}


def _overhead_section(comparison: Comparison) -> list[str]:
    rows = [[fw, *(f"{o[part]:.3f}" for part in OVERHEAD_PARTS), f"{o['total_s']:.3f}",
             f"{comparison['results'][fw]['duration_s']:.1f}", f"{o['share']:.2%}"]
            for fw in comparison["frameworks"] if (o := suite_overhead(comparison["results"][fw]))]
    if not rows:
        return []
    header = ["Framework", "Spawn (s)", "Readiness noticed within (s)", "Teardown (s)", "Total (s)",
              "Cell wall time (s)", "Share"]
    return ["## Suite overhead", "", "The suite's own time per cell: starting each server, noticing it is ready "
            "(an upper bound), stopping its process group; the framework's own load time is not in it.", "",
            *_table(header, rows, "---:"), ""]


def _bullets(title: str, items: list[str], none: str) -> list[str]:
    return [f"## {title}", "", *([f"- {_cell(i)}" for i in items] or [none]), ""]


def _audits_section(comparison: Comparison) -> list[str]:
    """A line per framework and level whose audit fired, and per audit a framework could not make
    (bench.core.metrics.audits); an annotation of the cell, never its verdict."""
    results = comparison["results"]
    lines = [f"{fw}: {line}" for fw in comparison["frameworks"] for line in audit_lines(results[fw]["levels"])]
    return _bullets("Audits", lines, "None: every level audited passed token accounting (5% of its requests or "
                    "fewer off their chunk count) and ran every request to its max_tokens.")


def _caption(plot: Path, levels: list[LevelKey]) -> str:
    if plot.name == plots.THROUGHPUT_PNG:
        return "Output throughput against concurrency"
    if plot.name == plots.THROUGHPUT_RATE_PNG:
        return "Output throughput against request rate (open loop)"
    if plot.name == plots.RESOURCES_PNG:
        return "Server memory and CPU over the cell"
    level = next((key for key in levels if plots.latency_png(key) == plot.name), None)
    return f"TTFT and TPOT at {section_title(level).lower() if level else plot.stem}"


def render_report(comparison: Comparison, plot_files: list[Path], floors: Floors | None = None, *,
                  relabel: Callable[[str], str] = str, note: tuple[str, ...] = ()) -> str:
    """The markdown text; `plot_files` are embedded by name, relative to the report; `floors`: the
    machine's noise floors of these cells, for *Between frameworks* (bench.reports.between); `relabel`
    renames the level tables' rows and `note` goes under the title (`cellbench report --as`)."""
    if not comparison["frameworks"]:
        body = ["No result of this machine in this directory.", ""]
    else:
        body = [line for level in plots.all_levels(comparison) for line in _level_section(comparison, level, relabel)]
        body += between.interval_notes(comparison)
        body += between.between_section(comparison, plots.all_levels(comparison), floors, section_title)
        body += _sweep_section(comparison)
    notes = [
        *_bullets("Methodology warnings", comparison["methodology_warnings"],
                  "None: every framework ran with the same levels, requests, warm-up, server sharing and prompts."),
        *_audits_section(comparison),
        *_bullets("Suspicious results", [f"{fw}: {why}" for fw, why in sorted(comparison["suspicious"].items())],
                  "None: no output throughput changed 10x or more against the previous run of its cell."),
        *_bullets("Ignored files", [f"{i['file']}: {i['reason']}" for i in comparison["ignored"]], "None."),
        *(_bullets("Imported results", notes, "") if (notes := _imported_notes(comparison)) else []),
        *_overhead_section(comparison),
    ]
    levels = plots.all_levels(comparison) if comparison["frameworks"] else []
    figures = ["## Plots", "", *[f"![{_caption(p, levels)}]({plots.PLOTS_DIR}/{p.name})\n" for p in plot_files]]
    header = _header(comparison)
    return "\n".join([*header[:2], *(f"{line}\n" for line in note), *header[2:], *body, *notes, *figures])


def write_report(split_dir: Path, comparison: Comparison) -> Path:
    """Write the plots and `<split_dir>/REPORT.md` (atomically: a reader never sees half a report)."""
    split_dir = Path(split_dir)
    plot_files = plots.write_plots(comparison, split_dir)
    path = split_dir / REPORT_FILE
    atomic_write(path, render_report(comparison, plot_files, Floors(split_dir)))
    return path
