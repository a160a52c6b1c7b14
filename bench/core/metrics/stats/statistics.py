"""The statistics a level reports of each per-request metric.

mean, min, max, population stdev (ddof=0, numpy's default) and percentiles by linear
interpolation (numpy's default; p99 of 1..100 is 99.01, never nearest-rank), and beside them each
percentile's distribution-free 95% interval (bench.core.metrics.stats.intervals): of values drawn
apart (one per request), or of values in groups that move together (a request's chunk gaps).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, TypedDict

import numpy as np

from bench.base.doc import Doc
from bench.core.metrics.stats.blocks import Intervals
from bench.core.metrics.stats.intervals import clustered_intervals, intervals

PERCENTILES = (50, 90, 95, 99)


class _StatsRequired(TypedDict):

    n: Annotated[int, Doc("How many requests had a value.", minimum=0)]
    mean: Annotated[float | None, Doc("Mean.")]
    min: Annotated[float | None, Doc("Smallest value.")]
    max: Annotated[float | None, Doc("Largest value.")]
    stdev: Annotated[float | None, Doc("Population standard deviation (ddof 0).")]
    p50: Annotated[float | None, Doc("Median.")]
    p90: Annotated[float | None, Doc("90th percentile.")]
    p95: Annotated[float | None, Doc("95th percentile.")]
    p99: Annotated[float | None, Doc("99th percentile.")]


class Stats(_StatsRequired, total=False):
    """Distribution of one per-request metric over the level's successful measured requests; every value null
    when n is 0. stdev is the population standard deviation; percentiles are linear, and ci95 says how sure each
    is."""

    ci95: Annotated[Intervals, Doc("Each percentile's distribution-free 95% confidence interval for the true "
                                   "percentile (docs/metrics.md, How sure a percentile is); absent in results written "
                                   "before cellbench wrote it.")]


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile by linear interpolation (numpy default); None for no values."""
    return float(np.percentile(values, q)) if len(values) else None


def stats_block(values: Iterable[float | None], scale: float = 1.0) -> Stats:
    """{n, mean, min, max, stdev, p50, p90, p95, p99, ci95} of the non-None values times `scale`.

    stdev is the population standard deviation (ddof=0). All values None when n == 0; ci95 (each
    percentile's 95% interval, `intervals`) then says the n each percentile needs."""
    arr = np.array([v for v in values if v is not None], dtype=float) * scale
    return _block(arr, intervals(arr))


def grouped_stats_block(groups: Iterable[Sequence[float] | np.ndarray], scale: float = 1.0) -> Stats:
    """`stats_block` of the values of `groups` pooled (each group a request's gaps), times
    `scale`; ci95 counts the values of one group as moving together (`clustered_intervals`)."""
    arrays = [np.asarray(g, dtype=float) * scale for g in groups]
    return _block(np.concatenate(arrays) if arrays else np.empty(0), clustered_intervals(arrays))


def _block(arr: np.ndarray, ci95: Intervals) -> Stats:
    if arr.size == 0:
        return {"n": 0, "mean": None, "min": None, "max": None, "stdev": None,
                "p50": None, "p90": None, "p95": None, "p99": None, "ci95": ci95}
    p50, p90, p95, p99 = (float(v) for v in np.percentile(arr, PERCENTILES))
    return {"n": int(arr.size), "mean": float(arr.mean()), "min": float(arr.min()), "max": float(arr.max()),
            "stdev": float(arr.std()), "p50": p50, "p90": p90, "p95": p95, "p99": p99, "ci95": ci95}


def arrival_rate(times: Sequence[float]) -> float | None:
    """(n - 1) / (last - first) of n >= 2 arrival times in any order; None otherwise or for a zero span."""
    if len(times) < 2:
        return None
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None
