"""A level measured in rounds (--rounds K), combined into the one level the result shows.

Each round is a complete `Level` (bench.core.metrics.level.summarize_level) with its `round`
(1-based). `combine_rounds` builds the combined level field by field from RULES, a table that
says how each field of the rounds becomes one: counts are summed, throughputs and the stats
blocks' centres are the median across rounds (with the interval of that median from
bench.core.metrics.stats.intervals.rounds_interval), and the evidence blocks a verdict or a reader
judges by (client health, audits, chunk divergence, goodput) are the worst round's, so a fault in
any round shows. docs/metrics.md "Rounds" says the same for readers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from bench.core import figures
from bench.core.figures.declare import median, total
from bench.core.lenses import energy
from bench.core.level_run import level_key
from bench.core.metrics.blocks import Level, ThroughputIntervals, Uncertainty
from bench.core.metrics.level import ERROR_SAMPLES_PER_TYPE
from bench.core.metrics.server_view import GaugeFigures, HistogramFigures, ServerMetricsBlock
from bench.core.metrics.stats.blocks import Interval, PercentileInterval
from bench.core.metrics.stats.intervals import (
    gap_rounds_interval,
    needs_n,
    rounds_interval,
)
from bench.core.metrics.stats.statistics import PERCENTILES, Stats
from bench.core.metrics.table import METRICS

Rule = Callable[[list[Any]], Any]
"""Combines one field's values, one per round that has the field, into the combined level's."""

CENTRES = ("mean", "stdev", "p50", "p90", "p95", "p99")  # a stats block's fields taken as the median of rounds
THROUGHPUTS = ("output_throughput_tps", "request_throughput_rps", "input_throughput_tps", "total_token_throughput_tps")


def first(values: list[Any]) -> Any:
    return values[0]


def first_known(values: list[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def counts(values: list[Mapping[str, int]]) -> dict[str, int]:
    """{key: count} dicts summed (errors by type, content encodings)."""
    summed: Counter[str] = Counter()
    for value in values:
        summed.update(value)
    return dict(summed)


def samples(values: list[Mapping[str, list[Any]]]) -> dict[str, list[Any]]:
    """Error samples of every round, at most ERROR_SAMPLES_PER_TYPE per type, earlier rounds first."""
    merged: dict[str, list[Any]] = {}
    for value in values:
        for kind, found in value.items():
            bucket = merged.setdefault(kind, [])
            bucket.extend(s for s in found if s not in bucket)
            del bucket[ERROR_SAMPLES_PER_TYPE:]
    return merged


def worst(score: Callable[[Any], Any]) -> Rule:
    """The value of the round that `score` ranks highest (the first such round on a tie)."""
    return lambda values: max(values, key=score)


def stats(values: list[Stats], *, per_gap: bool = False) -> Stats:
    """A stats block of the rounds: n summed, min of the mins, max of the maxes, the median of
    each centre (CENTRES), and each percentile's ci95 (`percentile_interval`; a per-gap metric's,
    ITL's, `gap_interval`)."""
    pooled = sum(v["n"] for v in values)
    block: dict[str, Any] = {"n": pooled, "min": _known(min, [v["min"] for v in values]),
                             "max": _known(max, [v["max"] for v in values])}
    rows = [cast(Mapping[str, Any], v) for v in values]
    block.update({key: median([v[key] for v in rows]) for key in CENTRES})
    block["ci95"] = {f"p{q}": gap_interval(rows, q) if per_gap else
                     percentile_interval([v[f"p{q}"] for v in rows], q, pooled) for q in PERCENTILES}
    return cast(Stats, {key: block[key] for key in ("n", "mean", "min", "max", "stdev", "p50", "p90", "p95", "p99",
                                                   "ci95")})


def gap_stats(values: list[Stats]) -> Stats:
    """`stats` of a per-gap metric's rounds (ITL)."""
    return stats(values, per_gap=True)


def gap_interval(rows: list[Mapping[str, Any]], q: float) -> PercentileInterval:
    """The q-th percentile's interval of a per-gap metric over rounds whose blocks are `rows`
    (bench.core.metrics.stats.intervals.gap_rounds_interval: every round must bound it with its own
    gaps, counted as moving together within a request, and the wider of the rounds' spread and
    their own intervals is taken); null where a round lacks the figure or its interval predates
    `effective_n` (an interval that counts each gap as independent is not one)."""
    key = f"p{q}"
    bounds = [(row.get("ci95") or {}).get(key) for row in rows]
    values = [v for row in rows if isinstance(v := row.get(key), (int, float))]
    if any(not isinstance(b, Mapping) or "effective_n" not in b for b in bounds) or len(values) < len(rows):
        return {"low": None, "high": None}
    return gap_rounds_interval([float(v) for v in values], cast(list[Mapping[str, Any]], bounds))


def percentile_interval(values: list[float | None], q: float, pooled: int) -> Interval:
    """The q-th percentile's interval over rounds whose values are `values` and whose n sum to `pooled`:
    null with `needs_n` while the pooled n could not bound it even as one sample; else the 95%
    interval of the median of the rounds' values (rounds_interval, on the log scale); null without
    needs_n where that scale cannot take them (a round's value zero, or missing in a round without
    values): no interval is better than one that is not 95%."""
    least = needs_n(q)
    known = [v for v in values if v is not None]
    if pooled < least or not known:
        return {"low": None, "high": None, "needs_n": least}
    found = rounds_interval(known)
    return found if found is not None else {"low": None, "high": None}


def _known(pick: Callable[[list[float]], float], values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def dominant(values: list[Any]) -> Any:
    """The (type, HTTP status) pair the rounds' dominant errors count most of, counts summed."""
    pairs: Counter[tuple[str, int | None]] = Counter()
    for v in values:
        if v is not None:
            pairs[(v["type"], v["http_status"])] += v["count"]
    if not pairs:
        return None
    (kind, status), n = pairs.most_common(1)[0]
    return {"type": kind, "http_status": status, "count": n}


def warmup(values: list[Mapping[str, Any]]) -> dict[str, Any]:
    block = {key: sum(v[key] for v in values) for key in ("requests", "successful", "failed", "wall_time_s")}
    block["errors"] = counts([v["errors"] for v in values])
    block["error_samples"] = samples([v.get("error_samples", {}) for v in values])
    return block


def reasoning(values: list[Mapping[str, Any]]) -> dict[str, Any]:
    block = {key: sum(v[key] for v in values) for key in ("requests", "unanswered", "chunks_total",
                                                          "answer_chunks_total")}
    tokens = total([v["tokens_total"] for v in values])
    block["tokens_total"] = tokens
    block["tokens_mean"] = tokens / block["requests"] if tokens is not None and block["requests"] else None
    return block


def open_loop(values: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The schedule is each round's (the same seed); rates are the median, queued summed, peak the most."""
    block = dict(values[0])
    block.update(offered_rate_rps=median([v["offered_rate_rps"] for v in values]),
                 achieved_rate_rps=median([v["achieved_rate_rps"] for v in values]),
                 queued=sum(v["queued"] for v in values), peak_in_flight=max(v["peak_in_flight"] for v in values))
    if "trace" in block:  # each round replays the trace; a --duration may cut one round's shorter
        block["trace"] = {**block["trace"], "sent": min(v["trace"]["sent"] for v in values)}
    return block


def duration(values: list[Mapping[str, Any]]) -> dict[str, Any]:
    """--duration over the rounds: the duration ended the level if it ended any round; sent and asked summed."""
    ended = "duration" if any(v["ended_by"] == "duration" for v in values) else "requests"
    return {"limit_s": values[0]["limit_s"], "ended_by": ended, "sent": sum(v["sent"] for v in values),
            "asked": sum(v["asked"] for v in values)}


def _audit_score(audits: Mapping[str, Any]) -> tuple[int, int]:
    accounting, length = audits["token_accounting"], audits["output_length"]
    return ((accounting["outcome"] == "diverges") + (length["outcome"] == "stopped short"),
            accounting["diverging"] + length["short"])


def _client_score(client: Mapping[str, Any]) -> tuple[bool, int, float]:
    return client["client_bound"], len(client["reasons"]), client["cpu_share"]


def _goodput_score(block: Mapping[str, Any]) -> tuple[bool, float]:
    rate = block["goodput_rps"]
    return not block["slo_met"], -(rate if rate is not None else 0.0)


def _reuse_score(block: Mapping[str, Any]) -> tuple[bool, bool]:
    return block["may_hit_cache"], block["server_warmed"]


def server_metrics(blocks: list[ServerMetricsBlock]) -> ServerMetricsBlock:
    """The rounds' server_metrics as one level's: counters and histogram counts summed, a gauge's
    mean weighted by its samples and its maximum the rounds' largest, a histogram's mean weighted
    by its count; the rounds without figures (`note`: a scrape missing) are left out, and said."""
    measured = [b for b in blocks if "counters" in b]
    block: ServerMetricsBlock = {**blocks[0], "errors": sorted({e for b in blocks for e in b["errors"]})}
    for key in ("note", "scrapes", "counters", "gauges", "histograms"):
        block.pop(key, None)  # type: ignore[misc]
    if len(measured) < len(blocks):
        block["note"] = f"{len(blocks) - len(measured)} of {len(blocks)} rounds without figures: " + \
            "; ".join(sorted({b["note"] for b in blocks if "note" in b}))
    if not measured:
        return block
    block["scrapes"] = sum(b.get("scrapes", 0) for b in measured)
    block["counters"] = {name: sum(b["counters"][name] for b in measured if name in b["counters"])
                         for name in {c for b in measured for c in b["counters"]}}
    gauges: dict[str, GaugeFigures] = {}
    for name in {g for b in measured for g in b.get("gauges", {})}:
        seen = [b["gauges"][name] for b in measured if name in b.get("gauges", {})]
        n = sum(f["samples"] for f in seen)
        gauges[name] = {"mean": sum(f["mean"] * f["samples"] for f in seen) / n, "max": max(f["max"] for f in seen),
                        "samples": n}
    block["gauges"] = gauges
    histograms: dict[str, HistogramFigures] = {}
    for name in {h for b in measured for h in b.get("histograms", {})}:
        observed = [b["histograms"][name] for b in measured if name in b.get("histograms", {})]
        known = [(h["mean_ms"], h["count"]) for h in observed if h["mean_ms"] is not None]  # count 0: none
        counted = sum(n for _, n in known)
        histograms[name] = {"count": sum(h["count"] for h in observed),
                            "mean_ms": sum(m * n for m, n in known) / counted if counted else None}
    block["histograms"] = histograms
    return block


RULES: dict[str, Rule] = {
    "concurrency": first, "request_rate": first, "open_loop": open_loop,
    "num_requests": sum, "successful": sum, "failed": sum, "partial": any, "stop_reason": first_known,
    "wall_time_s": sum, "started_at": min,
    "output_tokens_total": sum, "input_tokens_total": total, "chunks_total": sum,
    **dict.fromkeys(THROUGHPUTS, median),
    "usage_available": all, "itl_per_chunk": any,
    "chunk_divergence": worst(lambda b: b["fraction"] if b["fraction"] is not None else -1.0),
    "audits": worst(_audit_score),
    **{m.key: gap_stats if m.per_gap else stats for m in METRICS},
    "reasoning": reasoning,
    "errors": counts, "error_samples": samples, "dominant_error": dominant,
    "served_models": lambda values: sorted(set().union(*values)),
    "client": worst(_client_score),
    "prompt_reuse": worst(_reuse_score),
    "warmup": warmup,
    "content_encodings": counts,
    "goodput": worst(_goodput_score),
    "duration": duration,
    "energy": energy.combined,
    "server_metrics": server_metrics,
}
"""How each field of the rounds becomes the combined level's: a field not listed (a round's own
`round`, `throughput_ci95`, `uncertainty`) is not carried over; `combine_rounds` makes those. A
level figure's block is pooled as its declaration says (bench.core.figures)."""


def combine_rounds(rounds: Sequence[Level], *, asked: int | None = None) -> Level:
    """The combined level of `rounds` (one level's rounds, in order, each with its `round`): RULES
    applied to every field a round has, `tokens_per_chunk` from the summed totals,
    `throughput_ci95` from the rounds (rounds_interval), `uncertainty` (basis "rounds", the
    rounds measured, and `rounds_asked` when `asked` is more), and the rounds themselves."""
    if not rounds:
        raise ValueError("combine_rounds needs at least one round")
    combined: dict[str, Any] = {}
    for key, rule in {**RULES, **{f.key: f.pool for f in figures.FIGURES}}.items():
        values = [lv[key] for lv in rounds if key in lv]  # type: ignore[literal-required]
        if values:
            combined[key] = rule(values)
    chunks = combined["chunks_total"]
    combined["tokens_per_chunk"] = combined["output_tokens_total"] / chunks if chunks else None
    intervals: ThroughputIntervals = {
        "output_throughput_tps": _rate_interval([lv["output_throughput_tps"] for lv in rounds]),
        "request_throughput_rps": _rate_interval([lv["request_throughput_rps"] for lv in rounds])}
    combined["throughput_ci95"] = intervals
    uncertainty: Uncertainty = {"basis": "rounds", "rounds": len(rounds), "windows": None}
    if asked is not None and asked > len(rounds):
        uncertainty["rounds_asked"] = asked
    combined["uncertainty"] = uncertainty
    combined["rounds"] = list(rounds)
    return cast(Level, combined)


def _rate_interval(values: list[float | None]) -> Interval:
    return rounds_interval(values) or {"low": None, "high": None}


def combined_levels(summaries: Sequence[Level], *, asked: int) -> list[Level]:
    """The result's levels from every (level, round) summary in the order measured: one combined
    level per level, in the order each level was first measured; with `asked` == 1 the
    summaries themselves (a level measured once is its own level)."""
    if asked < 2:
        return list(summaries)
    by_level: dict[Any, list[Level]] = {}
    for summary in summaries:
        by_level.setdefault(level_key(summary), []).append(summary)
    return [combine_rounds(group, asked=asked) for group in by_level.values()]
