"""The interval blocks of a result, declared: each field's type, description and bounds, from which
the schema's `interval`, `rate_interval` and `intervals` entries are generated
(bench.core.schema.generate). bench.core.metrics.stats.intervals computes them."""

from __future__ import annotations

from typing import Annotated, TypedDict

from bench.base.doc import Doc, constrain


class _IntervalEnds(TypedDict):
    low: Annotated[float | None, Doc("The lower end; null when unbounded.")]
    high: Annotated[float | None, Doc("The upper end; null when unbounded.")]


class Interval(_IntervalEnds, total=False):
    """A throughput's 95% interval: low and high; or both null where it cannot be bounded, with needs_n where
    more successful requests would give its time windows (within-run), without it where a round's value is
    missing or zero (rounds: the log scale cannot take it)."""

    needs_n: Annotated[int, Doc("Only when unbounded: the smallest n that could bound it. A percentile's: of the "
                                "level's values (p50 6, p90 29, p95 59, p99 299; for ITL, of independent gaps, "
                                "effective_n); a throughput's: the successful requests a level needs for a within-run "
                                "interval.", minimum=1)]


class PercentileInterval(Interval, total=False):
    """One percentile's interval: low and high (one round: two values of the sample, by order statistics; K
    rounds: the interval of the median of the rounds' values); or both null: with needs_n where the level's n
    values cannot bound the percentile at 95%, without it where a round's value is zero or missing (the rounds'
    log scale cannot take it)."""

    effective_n: Annotated[int, Doc("ITL only (a per-gap metric, whose gaps of one request move together): how many "
                                    "independent values the level's gaps count as for this percentile "
                                    "(docs/metrics.md, Gaps that move together); with rounds, the least round's. An "
                                    "ITL interval without it (written before) takes every gap as independent, and "
                                    "comparisons do not judge by it.", minimum=0)]


_BOTH_ENDS_OR_NONE = {
    "if": {"required": ["needs_n"]},
    "then": {"properties": {"low": {"type": "null"}, "high": {"type": "null"}}},
    "else": {"anyOf": [{"properties": {"low": {"type": "number"}, "high": {"type": "number"}}},
                       {"properties": {"low": {"type": "null"}, "high": {"type": "null"}}}]},
}  # an interval is bounded at both ends or at neither, and one with needs_n at neither
constrain(Interval, _BOTH_ENDS_OR_NONE)
constrain(PercentileInterval, _BOTH_ENDS_OR_NONE)


class Intervals(TypedDict):
    """The 95% interval of each percentile of a stats block, from the sorted sample's order statistics [x_(l),
    x_(u)], ranks l < u chosen so that P(l <= B < u) >= 0.95 for B ~ Binomial(n, p); ITL's with n its gaps'
    effective number (effective_n), the ranks taken at the same fractions of its gaps."""

    p50: Annotated[PercentileInterval, Doc("The interval of p50.")]
    p90: Annotated[PercentileInterval, Doc("The interval of p90.")]
    p95: Annotated[PercentileInterval, Doc("The interval of p95.")]
    p99: Annotated[PercentileInterval, Doc("The interval of p99.")]
