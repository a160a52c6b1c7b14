"""CSV beside comparison.json, for spreadsheets and for the scripts users keep for guidellm's and
AIPerf's CSV exports: `comparison.csv`, every figure of every chosen result, and on request a
result's per-request log as CSV.

comparison.csv is long, one row per framework x level x metric x statistic, so a new metric or
statistic adds rows, never columns, and a filter on `metric` and `statistic` picks one figure
across frameworks and levels:

    model,machine,split,framework,run_id,verdict,standing,level,concurrency,request_rate,metric,statistic,value,unit,ci95_low,ci95_high

`standing` is the result's flag (bench.reports.standing): `ok`, or its marks, each with what a
reader needs ("degraded", "not from this run (run X of 2026-12-01)", "wrong-model (served M)");
filter on `standing` = `ok` for the figures that may be compared. The rows of the ok results come
first. A wrong-model result's rows name the model its server served in `model`, not the one asked.

A level's counts and throughputs are `statistic` "value" (their units: LEVEL_FIGURES); every
distribution of the metric table (bench.core.metrics.table) gives n, mean, min, max, stdev and its
percentiles, in the table's unit; a level's energy per power source (`energy.gpu`: joules, avg_w,
j_per_output_token) and the server's own metrics (`server.generated_tokens` increase,
`server.waiting` mean and max, `server.ttft` count and mean) follow, then each level figure's rows
(bench.core.figures: `metric` the figure's key and field, statistic "value", in the unit the result
holds it in). `ci95_low`/`ci95_high` are
the 95% interval where the result holds one (a percentile's distribution-free interval, the
throughputs' `throughput_ci95`), empty where it does not (too few requests for a p99's interval:
the result says how many it needs).

`<result>.requests.csv` (`cellbench report --requests-csv`) has one row per request of the
`.requests.jsonl` sidecar, warm-up included (its `warmup` column says so): the sidecar's fields,
`chunk_times` as its count `chunks`, and each per-request metric of the table (TTFT, TPOT, E2E
latency, ...) in the table's unit by the table's own formula.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bench.core import figures as declared
from bench.core.level_run import key_label, level_key
from bench.core.metrics.table import METRICS
from bench.core.records import RequestRecord
from bench.reports.comparison import Comparison, standings

CSV_FILE = "comparison.csv"
HEADER = ("model", "machine", "split", "framework", "run_id", "verdict", "standing", "level", "concurrency",
          "request_rate", "metric", "statistic", "value", "unit", "ci95_low", "ci95_high")
# A level's single figures: (key, unit, its key in the level's throughput_ci95 block or None).
LEVEL_FIGURES = (
    ("num_requests", "requests", None), ("successful", "requests", None), ("failed", "requests", None),
    ("wall_time_s", "s", None), ("output_tokens_total", "tokens", None), ("input_tokens_total", "tokens", None),
    ("chunks_total", "chunks", None), ("output_throughput_tps", "tokens/s", "output_throughput_tps"),
    ("request_throughput_rps", "requests/s", "request_throughput_rps"), ("input_throughput_tps", "tokens/s", None),
    ("total_token_throughput_tps", "tokens/s", None), ("tokens_per_chunk", "tokens/chunk", None),
)
STATISTICS = ("n", "mean", "min", "max", "stdev", "p50", "p90", "p95", "p99")
_RECORD_FIELDS = [f.name for f in dataclasses.fields(RequestRecord)]


def comparison_rows(comparison: Comparison) -> Iterator[tuple[Any, ...]]:
    """Every figure of `comparison`'s chosen results, one HEADER row each, the ok results' first."""
    marks = standings(comparison)
    for framework in comparison["frameworks"]:
        result: dict[str, Any] = dict(comparison["results"][framework])
        verdict = (result.get("verdict") or {}).get("verdict", "")
        model = marks[framework].served_model or comparison["model"]  # a wrong-model result's figures are its
        cell = (model, comparison["machine"], comparison["split"], framework, result.get("run_id", ""), verdict,
                marks[framework].short())
        for level in result.get("levels") or []:
            key = level_key(level)
            where = (level_text(key), key[1] if key[0] == "concurrency" else "",
                     level["request_rate"] if key[0] != "concurrency" else "")
            for row in _level_rows(level):
                yield (*cell, *where, *row)


def level_text(key: tuple[Any, ...]) -> str:
    """c=8, rate=4, or a trace's or ramp's label ("trace t.jsonl", "rate=4, linear ramp from 0.4 req/s")."""
    if key[0] == "trace":
        return key_label(key)
    return (f"c={key[1]}" if key[0] == "concurrency" else f"rate={key[1]:g}") + (f", {key[4]}" if len(key) > 4 else "")


def _level_rows(level: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """(metric, statistic, value, unit, ci95_low, ci95_high) of each figure the level holds."""
    intervals = level.get("throughput_ci95") or {}
    for key, unit, ci_key in LEVEL_FIGURES:
        if key in level:
            ci = (intervals.get(ci_key) or {}) if ci_key else {}
            yield key, "value", _cell(level[key]), unit, _cell(ci.get("low")), _cell(ci.get("high"))
    for metric in METRICS:
        block = level.get(metric.key)
        if not isinstance(block, dict):
            continue
        cis = block.get("ci95") or {}
        for stat in STATISTICS:
            if stat in block:
                ci = cis.get(stat) or {}
                unit = "requests" if stat == "n" else metric.unit
                yield metric.key, stat, _cell(block[stat]), unit, _cell(ci.get("low")), _cell(ci.get("high"))
    yield from _server_rows(level)
    for figure in declared.FIGURES:  # each level figure's rows (bench.core.figures), as stored: no scale
        block = level.get(figure.key)
        if isinstance(block, dict):
            for row in figure.rows:
                ci = (block.get("ci95") or {}).get(row.field) or {}  # across rounds, where declared
                yield (figure.path(row), "value", _cell(block.get(row.field)), row.unit, _cell(ci.get("low")),
                       _cell(ci.get("high")))


# The server's own view (a level's server_metrics block): each gauge's unit; counters count tokens.
GAUGE_UNITS = {"running": "requests", "waiting": "requests", "kv_cache_usage": "share",
               "prefix_cache_hit_rate": "share"}


def _server_rows(level: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """The level's energy per power source and the server's own metrics, without intervals (one
    integral, one scrape series per level)."""
    for entry in (level.get("energy") or {}).get("sources", []):
        name = f"energy.{entry['device']}"
        yield name, "joules", _cell(entry["joules"]), "J", "", ""
        yield name, "avg_w", _cell(entry["avg_w"]), "W", "", ""
        yield name, "j_per_output_token", _cell(entry["j_per_output_token"]), "J/token", "", ""
    seen = level.get("server_metrics") or {}
    for name, value in sorted((seen.get("counters") or {}).items()):
        yield f"server.{name}", "increase", _cell(value), "tokens", "", ""
    for name, figures in sorted((seen.get("gauges") or {}).items()):
        for stat in ("mean", "max"):
            yield f"server.{name}", stat, _cell(figures[stat]), GAUGE_UNITS.get(name, ""), "", ""
    for name, figures in sorted((seen.get("histograms") or {}).items()):
        yield f"server.{name}", "count", _cell(figures["count"]), "observations", "", ""
        yield f"server.{name}", "mean", _cell(figures["mean_ms"]), "ms", "", ""


def _cell(value: Any) -> Any:
    """None as an empty cell; the rest as CSV writes it."""
    return "" if value is None else value


def comparison_csv(comparisons: Iterable[Comparison]) -> str:
    """HEADER and the rows of every comparison, as CSV text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for comparison in comparisons:
        writer.writerows(comparison_rows(comparison))
    return out.getvalue()


def write_comparison_csv(split_dir: Path, comparison: Comparison) -> Path:
    """`split_dir`/comparison.csv of `comparison`; its path."""
    path = split_dir / CSV_FILE
    tmp = path.with_suffix(".csv.tmp")
    tmp.write_text(comparison_csv([comparison]))
    tmp.replace(path)
    return path


def requests_csv(sidecar: Path) -> Path:
    """`<stem>.requests.csv` beside `sidecar` (`<stem>.requests.jsonl`): one row per request; its path."""
    path = sidecar.with_name(sidecar.name.removesuffix(".jsonl") + ".csv")
    per_request = [m for m in METRICS if not m.per_gap]
    columns = [name for name in _RECORD_FIELDS if name != "chunk_times"]
    header = ["level", *columns, "chunks", *(f"{m.key}" for m in per_request)]
    tmp = path.with_suffix(".csv.tmp")
    with sidecar.open() as lines, tmp.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        for line in lines:
            if not line.strip():
                continue
            raw = json.loads(line)
            record = RequestRecord(**{k: v for k, v in raw.items() if k in _RECORD_FIELDS and k != "error"})
            error = raw.get("error")
            # a failed request has no TTFT or TPOT: the table takes those over the successful ones
            values = [None if error is not None and m.over == "successful" else m.of(record) for m in per_request]
            writer.writerow([
                level_text(level_key(raw)),
                *(_flat(error if name == "error" else raw.get(name)) for name in columns),
                len(raw.get("chunk_times") or []),
                *("" if v is None or isinstance(v, list) else v * m.scale for v, m in zip(values, per_request,
                                                                                          strict=True)),
            ])
    tmp.replace(path)
    return path


def _flat(value: Any) -> Any:
    """A nested value (an error's type and message) as compact JSON; None as empty."""
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":")) if isinstance(value, dict | list) else value
