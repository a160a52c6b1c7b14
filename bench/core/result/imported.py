"""Imported results: how every layer tells one from a measured result, names it, and compares.

A result converted from another benchmark's file (`cellbench import`, bench.imports) carries an
`imported` block: the original file, its sha256 and timestamp, and per metric how the other tool
derived it (`methods`). A metric whose method is not cellbench's (SiliconBench's ITL is per
chunk, its percentiles are nearest-rank) must never be set beside a measured number as if it
meant the same; this module only reads those labels, it never guesses them, so a new importer
decides comparability once, where it knows the other tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath

from bench.core.level_run import LevelKey, key_label, level_key, levels_text
from bench.core.result.model import Imported, Level, Result

# Human names of the metric keys an importer labels (`<level field>` or `<stats block>.<stat>`).
METRIC_NAMES = {
    "output_throughput_tps": "output tok/s",
    "input_throughput_tps": "input tok/s",
    "total_token_throughput_tps": "total tok/s",
    "request_throughput_rps": "req/s",
    "output_tokens_total": "output tokens",
    "input_tokens_total": "input tokens",
    "chunks_total": "chunks",
    "tokens_per_chunk": "tokens per chunk",
    "itl_per_chunk": "chunk bundling",
    "usage_available": "usage reported",
    "chunk_divergence": "chunk divergence",
    "wall_time_s": "wall time",
    "failed": "failures",
    "errors": "error types",
    "ttft_ms.mean": "TTFT avg",
    "ttft_ms.p50": "TTFT p50",
    "ttft_ms.p99": "TTFT p99",
    "itl_ms.mean": "ITL avg",
    "itl_ms.p50": "ITL p50",
    "e2el_ms.mean": "latency avg",
    "e2el_ms.p50": "latency p50",
    "e2el_ms.p99": "latency p99",
    "decode_tps.mean": "decode rate avg",
    "decode_tps.p50": "decode rate p50",
}
# What a comparison line sets side by side, when the imported result says it is comparable.
HEADLINE: tuple[tuple[str, Callable[[float], str]], ...] = (
    ("output_throughput_tps", lambda v: f"{v:.1f}"),
    ("ttft_ms.mean", lambda v: f"{v:.0f} ms"),
)


def source(result: Result) -> Imported | None:
    """The `imported` block, or None for a measured result."""
    return result.get("imported")


@dataclass(frozen=True)
class Origin:
    """Where an imported result came from, as the reports name it: the other tool and its file."""

    tool: str  # the `imported` block's label: "SiliconBench"
    file: str  # the original file

    @property
    def label(self) -> str:
        """`imported (SiliconBench)`."""
        return f"imported ({self.tool})"


def origin(data: Mapping[str, object]) -> Origin | None:
    """The origin named by `data`'s `imported` block, or None for a measured result. `data`: a
    Result, or the part of one a report row carries as JSON (bench.reports.standing.facts)."""
    block = data.get("imported")
    if not isinstance(block, Mapping):
        return None
    return Origin(str(block["label"]), str(block["file"]))


def label(data: Mapping[str, object]) -> str | None:
    """`imported (SiliconBench)`, or None for a measured result (`data` as `origin` takes it)."""
    found = origin(data)
    return found.label if found else None


def describe(result: Result) -> str:
    """`imported SiliconBench result of 2026-11-20 (llamacpp_20261120_101500.json)`, or `run <id>`."""
    block = source(result)
    if block is None:
        return f"run {result['run_id']}"
    return f"imported {block['label']} result of {block['timestamp'][:10]} ({PurePath(block['file']).name})"


def comparable(result: Result, metric: str) -> bool:
    """Whether `metric` of `result` means what cellbench's does: always for a measured result;
    for an imported one only when its method says so (an unlabelled metric is not)."""
    block = source(result)
    if block is None:
        return True
    method = block["methods"].get(metric)
    return bool(method and method["comparable"])


def metric_value(level: Mapping[str, object], metric: str) -> float | None:
    """`level[metric]`, or `level[block][stat]` for `block.stat` (a metric named as data: a
    TypedDict is indexed by literals only); None when absent or not a number."""
    block, _, stat = metric.partition(".")
    value = level.get(block)
    if stat:
        value = value.get(stat) if isinstance(value, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def left_out(result: Result) -> str:
    """The metrics of an imported result that are not compared, grouped by why:
    `ITL avg, ITL p50 not compared (SiliconBench's is per chunk)`; "" for a measured result."""
    block = source(result)
    if block is None:
        return ""
    by_note: dict[str, list[str]] = {}
    for metric, method in block["methods"].items():
        if not method["comparable"]:
            by_note.setdefault(method["note"], []).append(METRIC_NAMES.get(metric, metric))
    return "; ".join(f"{', '.join(names)} not compared ({note})" for note, names in by_note.items())


def _levels(result: Result) -> dict[LevelKey, Level]:
    """The levels with a success, by key: an imported (closed-loop) level never meets a rate level."""
    return {level_key(lv): lv for lv in result["levels"] if lv["successful"]}


def comparison_line(current: Result, previous: Result) -> str | None:
    """The journal's line comparing a measured result with the imported one before it, e.g.
    `llamacpp / chat vs imported SiliconBench result of 2026-11-20 (llamacpp_....json): output
    tok/s 41.2 -> 39.8 at c=4; ITL avg not compared (SiliconBench's is per chunk)`.
    None when `previous` is not imported. Only comparable metrics, at levels both measured with a
    success, are set side by side; the rest are named with the reason they are left out."""
    if source(previous) is None:
        return None
    now, before = _levels(current), _levels(previous)
    common = sorted(set(now) & set(before))
    parts = []
    for metric, fmt in HEADLINE:
        if not comparable(previous, metric):
            continue
        pairs = [(c, metric_value(before[c], metric), metric_value(now[c], metric)) for c in common]
        shown = [f"{fmt(old)} -> {fmt(new)} at {key_label(c)}" for c, old, new in pairs
                 if old is not None and new is not None]
        if shown:
            parts.append(f"{METRIC_NAMES[metric]} " + ", ".join(shown))
    if not common:
        parts.append(f"no level measured by both (imported {levels_text(before[k] for k in sorted(before)) or 'none'}; "
                     f"this run {levels_text(now[k] for k in sorted(now)) or 'none'})")
    if why := left_out(previous):
        parts.append(why)
    head = f"{current['framework']['name']} / {current['split']} vs {describe(previous)}"
    return f"{head}: " + "; ".join(parts)
