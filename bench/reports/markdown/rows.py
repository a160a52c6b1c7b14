"""The rows of REPORT.md's level tables: each a label and how a level renders in it.

The per-request metrics' rows are the metric table's (bench.core.metrics.table), in its order;
reasoning, open-loop and goodput rows join a table only where one of its levels has them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bench.base.dotted import json_path_or
from bench.core import figures
from bench.core.figures.declare import LevelFigure
from bench.core.figures.declare import Row as FigureRow
from bench.core.lenses import energy
from bench.core.metrics import table as metric_table
from bench.core.metrics.stats.intervals import bound_text
from bench.core.metrics.table import Metric
from bench.core.result import imported
from bench.core.result.model import Level
from bench.reports import between
from bench.reports.markdown.text import NULL, num


def _key(level: Level, key: str, stat: str | None = None) -> float | None:
    """`level[key]` (or `level[key][stat]`) for a key ROWS names as data; None when absent (an
    imported level has no TPOT nor client block)."""
    return imported.metric_value(level, key if stat is None else f"{key}.{stat}")


def _stat(block: str, stat: str, digits: int = 1, scale: float = 1.0) -> Callable[[Level], str]:
    """The block's `stat`; a percentile with its 95% interval where the block has one (INTERVALS_NOTE)."""
    def cell(lv: Level) -> str:
        value = num(_key(lv, block, stat), digits, scale)
        return value if value == NULL else value + bound_text(lv.get(block), stat, f".{digits}f", scale)
    return cell


def _field(key: str, digits: int = 1) -> Callable[[Level], str]:
    return lambda lv: num(_key(lv, key), digits)


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
        ("Client CPU share", lambda lv: num(lv["client"]["cpu_share"] if "client" in lv else None, 1, 100, "%")),
        ("Energy (J/output token)", lambda lv: energy.cell_text(lv["energy"]) if "energy" in lv else NULL),
    )


def figure_rows(levels: Iterable[Level]) -> tuple[Row, ...]:
    """The rows of each level figure (bench.core.figures) some level of `levels` has a value of, in
    the declarations' order: the field in the row's unit, with its 95% interval across rounds
    where the block has one ("812 [805, 820]"), — in a level without it (one measured before the
    figure was declared, or on a machine without its source)."""
    def render(f: LevelFigure[Any], row: FigureRow) -> Callable[[Level], str]:
        def cell(lv: Level) -> str:
            shown = num(_key(lv, f.path(row)), row.digits, row.scale)
            block = dict(figures.block_of(lv, f.key))
            return shown if shown == NULL else shown + bound_text(block, row.field, f".{row.digits}f", row.scale)
        return cell
    levels = list(levels)
    return tuple((row.title(), render(f, row)) for f in figures.FIGURES for row in f.rows
                 if any(_key(lv, f.path(row)) is not None for lv in levels))


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


def reasoning_at(rows: tuple[Row, ...]) -> int:
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
    return f"{num(block['goodput_rps'], 2)} ({block['good_requests']} good, {met})"


def _slo_decision(lv: Level) -> str:
    """The level's SLO verdict at 95% confidence: "met", "missed", or "cannot tell (299 requests would
    decide ttft_p99)" (bench.core.metrics.stats.attainment)."""
    block = lv.get("goodput")
    if block is None or "slo_decision" not in block:
        return NULL
    decision = block["slo_decision"]
    if decision != "cannot tell":
        return decision
    undecided = [f"{need} requests would decide {name}" if (need := v["decides_at"]) is not None
                 else f"no count decides {name}" for name, v in block["slo_verdicts"].items()
                 if v["decision"] == "cannot tell"]
    return f"cannot tell ({'; '.join(undecided)})"


# Levels judged against SLOs (--slo) only.
GOODPUT_ROWS: tuple[Row, ...] = (("Goodput (req/s)", _goodput), ("SLO at 95% confidence", _slo_decision))
def row_metrics() -> dict[str, str]:
    """The metric each row shows, as an imported result labels its methods (bench.core.result.imported)."""
    return {
        "Successful / Failed": "failed",
        **{label: f"{m.key}.{stat}" for m in metric_table.METRICS if m.report is not None
           for label, stat in m.report.rows(m)},
        "Output throughput (tok/s)": "output_throughput_tps", "Input throughput (tok/s)": "input_throughput_tps",
        "Total throughput (tok/s)": "total_token_throughput_tps",
        "Request throughput (req/s)": "request_throughput_rps", "Wall time (s)": "wall_time_s",
        "Tokens per chunk": "tokens_per_chunk",
        **{row.title(): f.path(row) for f in figures.FIGURES for row in f.rows},
    }


# ------------------------------------------------------------------ the server's own view


def _figure(level: Level, path: str) -> float | None:
    """A number of the level's `server_metrics` block (`gauges.waiting.mean`); None where absent."""
    value = json_path_or(level.get("server_metrics"), path)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _mean_max(path: str, digits: int = 1, scale: float = 1.0, suffix: str = "") -> Callable[[Level], str]:
    def cell(lv: Level) -> str:
        mean, top = _figure(lv, f"{path}.mean"), _figure(lv, f"{path}.max")
        return NULL if mean is None or top is None else \
            f"{num(mean, digits, scale, suffix)} / {num(top, digits, scale, suffix)}"
    return cell


def _hit_share(lv: Level) -> str:
    hits, queries = _figure(lv, "counters.prefix_cache_hits"), _figure(lv, "counters.prefix_cache_queries")
    return NULL if hits is None or not queries else f"{num(hits / queries, 1, 100, '%')} of {queries:.0f}"


def _client(lv: Level) -> Mapping[str, Any]:
    return lv.get("client") or {}


def _limited_by(lv: Level) -> str:
    client = _client(lv)
    cause = client.get("limited_by")
    if cause is None:
        return NULL
    return f"{cause} ({client['server_queue']})" if cause == "server" and "server_queue" in client else cause


# Each row: its label, the figure whose presence in a level of the table shows the row, its cell.
SERVER_ROWS: tuple[tuple[str, str, Callable[[Level], str]], ...] = (
    ("Server: TTFT avg (ms)", "histograms.ttft.mean_ms", lambda lv: num(_figure(lv, "histograms.ttft.mean_ms"), 1)),
    ("Server: queue wait avg (ms)", "histograms.queue.mean_ms",
     lambda lv: num(_figure(lv, "histograms.queue.mean_ms"), 1)),
    ("Server: running mean / max", "gauges.running.mean", _mean_max("gauges.running")),
    ("Server: waiting mean / max", "gauges.waiting.mean", _mean_max("gauges.waiting")),
    ("Server: KV cache use mean / max", "gauges.kv_cache_usage.mean", _mean_max("gauges.kv_cache_usage", 1, 100, "%")),
    ("Server: prefix-cache hits", "counters.prefix_cache_queries", _hit_share),
    ("Server: generated tokens", "counters.generated_tokens",
     lambda lv: num(_figure(lv, "counters.generated_tokens"), 0)),
)
SERVER_NOTE = ("Server rows: the server's own /metrics over each level, its warm-up requests included; a gauge's "
               "mean and maximum are over the scrapes while the level ran, none for a level shorter than the scrape "
               "interval (docs/metrics.md, The server's own view).")


def server_rows(levels: Iterable[Level]) -> tuple[Row, ...]:
    """The server rows some level of `levels` has a figure for, then *Limited by* where a level was
    limited by something (its client, the host, the server's queue)."""
    levels = list(levels)
    rows: list[Row] = [(label, render) for label, shows, render in SERVER_ROWS
                       if any(_figure(lv, shows) is not None for lv in levels)]
    if any(_client(lv).get("limited_by") for lv in levels):
        rows.append(("Limited by", _limited_by))
    return tuple(rows)
