"""How sure a figure measured more than once is: rounds of a level, time windows within one.

A percentile of one run gets its interval from order statistics (bench.core.metrics.intervals);
what these functions bound is a figure that exists once per repetition, so its spread can be seen:

- `rounds_interval`: K rounds of a level (each on a fresh server, docs/metrics.md "Rounds"), the
  figure shown being the median of the K round values. On the log scale (latencies and rates vary
  by factors, and a ratio is what comparisons report): m = log(median), s = the standard deviation
  of the K logs (ddof 1), se = s * sqrt(c / K) with c = 1 for K <= 2 (the median is the mean) and
  pi / 2 for K >= 3 (a median's variance over a mean's, for normal data), and the interval
  exp(m -/+ t(0.975, K - 1) * se). It holds run-to-run noise: each round is a whole run.
- `windows_interval`: one run's rate, from W equal time windows of the level (batch means): the
  mean of the W per-window rates (which is the level's own rate) -/+ t(0.975, W - 1) * sd / sqrt(W).
  Within-run only: it cannot see what differs between two runs (a busier host, a new server).

The Student t quantile is computed, not tabled: bisection on the CDF, the density integrated
with Simpson's rule; within 1e-6 of the exact value for any degrees of freedom >= 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bench.core.metrics.intervals import CONFIDENCE, Interval

MEDIAN_VARIANCE = math.pi / 2  # var(median) / var(mean) of a large normal sample
MIN_WINDOWS = 4  # fewer windows than this give no interval: t(0.975, 2) = 4.3 is all guess


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided `confidence` quantile of Student's t with `df` degrees of freedom (1.96 for
    df = inf at 95%; 12.706 at df = 1, 2.262 at df = 9). df may be fractional (Welch's)."""
    tail = (1 + confidence) / 2
    if math.isinf(df):
        return _normal_quantile(tail)
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, not {df}")
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float) -> float:
        grid = np.linspace(0.0, x, 4001)
        density = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid * grid / df))
        h = x / 4000
        return 0.5 + h / 3 * float(density[0] + density[-1] + 4 * density[1:-1:2].sum() + 2 * density[2:-1:2].sum())

    low, high = 0.0, 1.0
    while cdf(high) < tail:
        low, high = high, high * 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < tail else (low, mid)
    return (low + high) / 2


def _normal_quantile(p: float) -> float:
    low, high = 0.0, 10.0
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p else (low, mid)
    return (low + high) / 2


def median_log_se(values: Sequence[float]) -> float:
    """The standard error of log(median) of K > 1 positive values (the module docstring's se)."""
    k = len(values)
    logs = np.log(np.asarray(values, dtype=float))
    factor = 1.0 if k <= 2 else MEDIAN_VARIANCE
    return float(np.std(logs, ddof=1)) * math.sqrt(factor / k)


def rounds_interval(values: Sequence[float | None]) -> Interval | None:
    """The 95% interval of the median of the rounds' `values` (module docstring); None unless
    there are at least two values and all are positive numbers (a round without the figure, or a
    zero rate, leaves nothing to put on a log scale)."""
    if len(values) < 2 or any(v is None or not v > 0 for v in values):
        return None
    known = [float(v) for v in values if v is not None]
    centre = math.log(float(np.median(known)))
    half = t_quantile(len(known) - 1) * median_log_se(known)
    return {"low": math.exp(centre - half), "high": math.exp(centre + half)}


def window_rates(times: Sequence[float], amounts: Sequence[float], start: float, end: float,
                 windows: int) -> list[float]:
    """The rate (amount per second) in each of `windows` equal windows of [start, end]: an event at
    times[i] adds amounts[i] to the window it falls in (one at `end` to the last)."""
    width = (end - start) / windows
    totals = [0.0] * windows
    for t, amount in zip(times, amounts, strict=True):
        if start <= t <= end:
            totals[min(int((t - start) / width), windows - 1)] += amount
    return [total / width for total in totals]


def windows_interval(rates: Sequence[float]) -> Interval | None:
    """The 95% within-run interval of a level's rate from its per-window `rates` (batch means,
    module docstring); None with fewer than MIN_WINDOWS windows."""
    w = len(rates)
    if w < MIN_WINDOWS:
        return None
    mean = float(np.mean(rates))
    half = t_quantile(w - 1) * float(np.std(rates, ddof=1)) / math.sqrt(w)
    return {"low": max(0.0, mean - half), "high": mean + half}
