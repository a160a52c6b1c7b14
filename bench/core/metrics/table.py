"""The per-request distribution metrics of a level, each declared once: the metric table.

A row (`Metric`) says everything the suite knows of one metric: the level's key, the per-request
function (its docstring is the formula), the scale from seconds, the unit, the requests it is
taken over (successful ones, or every measured request sent), when a level has it, the schema's
description and how the reports show it. `level_stats` builds a level's stats blocks from it,
`schema_entries` the schema's per-level entries (bench.core.schema.generate writes them into
bench/core/schema/result.schema.json), and REPORT.md (bench.reports.markdown) and the HTML
review (bench.reports.review.columns) take their metric rows and columns from it.

Adding a metric: a per-request function (in bench.core.metrics.requests, or here), one `Metric`
row in METRICS, its key in `RequiredStats` or `OptionalStats` (so mypy knows it), the schema file
regenerated (`python -m bench.core.schema.generate`), its formula in docs/metrics.md, and what
each peer tool calls it (bench.core.crosswalk). tests/core/test_metric_table.py checks the table,
these TypedDicts and the schema agree; tests/core/test_crosswalk.py that the crosswalk
covers the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

from bench.core.metrics import requests as per_request
from bench.core.metrics.reasoning import Reasoned, Reasoning
from bench.core.metrics.stats.statistics import Stats, grouped_stats_block, stats_block
from bench.core.records import RequestRecord

When = Literal["always", "measured", "added", "reasoning", "open_loop"]
"""When a level has the metric: "always" (every result, imported ones too), "measured" (every
result cellbench measured; another benchmark's imported one may lack it), "added" (every level
measured since the row was added: results written before it lack it, so the schema requires it
nowhere and they stay readable), "reasoning" (only where a successful request reasoned, beside the
level's `reasoning` block), "open_loop" (every open-loop level, no closed-loop one)."""


@dataclass(frozen=True)
class Shown:
    """How REPORT.md shows a metric: one row per statistic, "<label> <avg|pNN> (<unit>)"."""

    stats: tuple[str, ...]  # Stats keys: "mean" (shown as "avg"), "p50", "p99", ...
    label: str | None = None  # the metric's own label when None
    unit: str | None = None  # the metric's own unit when None
    scale: float = 1.0  # times the level's value (ms -> s: 1e-3)
    digits: int = 1
    after_throughput: bool = False  # a row of the request-level part of the table (Latency), not of the token timing

    def rows(self, metric: Metric) -> list[tuple[str, str]]:
        """(row label, Stats key) of each row."""
        label, unit = self.label or metric.label, self.unit or metric.unit
        return [(f"{label} {'avg' if s == 'mean' else s} ({unit})", s) for s in self.stats]


@dataclass(frozen=True)
class Metric:
    key: str  # the level's key: a Stats block
    of: Callable[[RequestRecord], float | None | list[float]]  # per request: a value, or a list (`per_gap`)
    label: str  # "TTFT": the reports' name for it
    unit: str  # of the level's values: "ms", "tokens/s"
    description: str  # the schema's
    scale: float = 1000.0  # level value = per-request value (s) x scale
    over: Literal["successful", "sent"] = "successful"  # the level's successful requests, or every measured one sent
    when: When = "measured"
    # `of` returns the gaps between a request's chunks, each one value: per chunk, not per token
    # where a framework bundles tokens in a chunk (the level's itl_per_chunk)
    per_gap: bool = False
    report: Shown | None = None  # REPORT.md's rows; None: not in REPORT.md
    review: str | None = None  # the HTML review's level table: its p50, in this format; None: not there
    higher_is_better: bool = False  # a rate (decode tok/s); a latency is better lower. Comparisons' direction
    compared: bool = False  # judged by comparisons (bench.core.metrics.stats.change): a server figure, not the client's

    def values(self, records: Iterable[RequestRecord]) -> list[float | None]:
        """The per-request (or per-gap) values over `records`, unscaled."""
        out: list[float | None] = []
        for r in records:
            value = self.of(r)
            if isinstance(value, list):
                out.extend(value)
            else:
                out.append(value)
        return out

    def summarize(self, records: Iterable[RequestRecord]) -> Stats:
        """The Stats block of the values over `records`; a per-gap metric's intervals count the
        gaps of one request as moving together (bench.core.metrics.stats.statistics.grouped_stats_block)."""
        if self.per_gap:
            return grouped_stats_block([v if isinstance(v, list) else [] for v in map(self.of, records)], self.scale)
        return stats_block(self.values(records), self.scale)


METRICS: tuple[Metric, ...] = (
    Metric("ttft_ms", per_request.ttft, "TTFT", "ms", when="always",
           description="Time to first token (first output chunk: content, reasoning or a tool call), ms.",
           report=Shown(("mean", "p50", "p99")), review=".1f", compared=True),
    Metric("ttfa_ms", per_request.ttfa, "TTFA", "ms", when="reasoning",
           description="Time to first answer (first content or tool-call chunk, after any reasoning), ms, over the "
                       "successful requests whose answer came; only in a level where a successful request reasoned "
                       "(with `reasoning`).",
           report=Shown(("mean", "p50", "p99")), review=".1f"),
    Metric("ttfb_ms", per_request.ttfb, "TTFB", "ms", description="Time to first byte of the response, ms."),
    Metric("tpot_ms", per_request.tpot, "TPOT", "ms", description="Time per output token after the first, ms.",
           report=Shown(("mean", "p50")), review=".2f", compared=True),
    Metric("itl_ms", per_request.itl, "ITL", "ms", when="always", per_gap=True,
           description="Gaps between consecutive content chunks, ms (per chunk).", report=Shown(("mean", "p50")),
           compared=True),
    Metric("e2el_ms", per_request.e2el, "E2EL", "ms", when="always",
           description="End-to-end latency of a request, ms.",
           report=Shown(("mean", "p50", "p99"), label="Latency", unit="s", scale=1e-3, digits=2,
                        after_throughput=True), review=".1f", compared=True),
    Metric("decode_tps", per_request.decode_rate, "Decode rate", "tok/s", scale=1.0, when="always",
           description="Per-request decode rate after the first token, tokens/s.", report=Shown(("p50",)),
           higher_is_better=True, compared=True),
    Metric("schedule_lag_ms", per_request.schedule_lag, "Schedule lag", "ms",
           description="t_send - t_sched per request (open loop: t_send - t_admitted): how late the client sent "
                       "it, ms."),
    Metric("queue_delay_ms", per_request.queue_delay, "Queueing delay", "ms", over="sent", when="open_loop",
           description="An open-loop level's queueing delay, t_admitted - t_sched per measured request sent: how "
                       "long it waited for a place under --max-concurrency (0 without a wait), ms. Not in TTFT or "
                       "E2EL, which start at the send.",
           report=Shown(("p50", "p99"))),
)
BY_KEY = {m.key: m for m in METRICS}


class RequiredStats(TypedDict):
    """The stats blocks every level has (METRICS' rows `when="always"`)."""

    ttft_ms: Stats
    itl_ms: Stats
    e2el_ms: Stats
    decode_tps: Stats


class OptionalStats(TypedDict, total=False):
    """The stats blocks a level has when its row's `when` holds."""

    ttfa_ms: Stats
    ttfb_ms: Stats
    tpot_ms: Stats
    schedule_lag_ms: Stats
    queue_delay_ms: Stats


class LevelStats(RequiredStats, OptionalStats, Reasoned):
    """A level's stats blocks (`level_stats`), with a reasoning model's `reasoning` block beside
    its reasoning metrics."""


def present(metric: Metric, *, open_loop: bool, reasoned: bool) -> bool:
    """Whether a level measured by cellbench has the metric."""
    if metric.when == "open_loop":
        return open_loop
    return reasoned if metric.when == "reasoning" else True


def level_stats(ok: Sequence[RequestRecord], sent: Sequence[RequestRecord], *, open_loop: bool,
                reasoning: Reasoning | None, figures: Mapping[str, Mapping[str, Any]] | None = None) -> LevelStats:
    """Each present metric's Stats, in METRICS' order, over the successful requests `ok` or the
    measured requests `sent` (its `over`); `reasoning` (bench.core.metrics.reasoning), when a
    request reasoned, right after the last reasoning metric (TTFA: TTFT, TTFA, reasoning, ...);
    then the level figures' blocks (`figures`, bench.core.figures.measured: keys the schema has
    from the figures' declarations, which the Level type leaves to them)."""
    blocks: dict[str, Stats | Reasoning | Mapping[str, Any]] = {}
    last_reasoning = max((i for i, m in enumerate(METRICS) if m.when == "reasoning"), default=None)
    for i, m in enumerate(METRICS):
        if present(m, open_loop=open_loop, reasoned=reasoning is not None):
            blocks[m.key] = m.summarize(ok if m.over == "successful" else sent)
        if i == last_reasoning and reasoning is not None:
            blocks["reasoning"] = reasoning
    blocks.update(figures or {})
    # The keys are METRICS' keys (and `reasoning`), which tests/core/test_metric_table.py checks
    # against LevelStats: the one place a level's dict is typed by a check, not by mypy.
    return cast(LevelStats, blocks)


def schema_entries(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (the result schema as the result's TypedDicts give it, bench.core.schema.generate)
    with each metric's per-level entry, as bench.core.schema.generate writes the schema file: a
    property of the level (a Stats block with the row's description), required as its `when`
    says: in every level, in a measured result's levels, in an open-loop level."""
    level = schema["$defs"]["level"]
    measured = schema["else"]["properties"]["levels"]["items"]["required"]
    open_branch = next(b for b in level["oneOf"] if "request_rate" in b["required"])
    for m in METRICS:
        level["properties"][m.key] = {"description": m.description, "$ref": "#/$defs/stats"}
        required = {"always": level["required"], "measured": measured, "open_loop": open_branch["required"]}.get(m.when)
        if required is not None and m.key not in required:
            required.append(m.key)
    return schema
