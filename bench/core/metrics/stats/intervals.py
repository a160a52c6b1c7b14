"""How sure a percentile is: distribution-free 95% confidence intervals from order statistics.

Of n independent draws from any continuous distribution, the number B that fall at or below its
true p-quantile is Binomial(n, p). The sorted sample's l-th value is at or below the quantile when
B >= l, and its u-th value is above it when B < u, so [x_(l), x_(u)] covers the quantile with
probability P(l <= B < u), whatever the distribution: no normal approximation, no bootstrap.

The ranks (`ranks`) are equal-tailed where the sample allows it: l the highest rank whose lower
tail P(B < l) is at most 2.5%, u the lowest whose upper tail P(B >= u) is. Where no rank within
1..n leaves a tail that small (p90 of 32: P(B = 32) = 0.9^32 = 3.4%), the extreme rank (1 or n)
takes that tail and the other side gets the rest of the 5%. Where even ranks 1 and n cover less
than 95% ((1-p)^n + p^n > 5%), the sample cannot bound the percentile: `needs_n` is the
smallest n that could. Pure numpy: the binomial probabilities are summed from the pmf in log space,
within 1e-11 (relative) at n = 5,000 and 1e-7 at a million (a long level's ITL gaps), far
finer than the 2.5% the tails are held to; a million values take about a fifth of a second.

Values in groups (`clustered_interval`): ITL has a value per chunk gap, and the gaps of one
request move together, so n gaps are worth fewer independent values. With x the pooled values'
q-th percentile, group g holding m_g values of which a_g are at or below x, and p = sum(a) / n,
the variance of p counted by group (a ratio estimator over G groups) is
G / (G - 1) * sum((a_g - p m_g)^2) / n^2, against p (1 - p) / n were the values independent. Their
ratio, at least 1, is the design effect; n_eff = n / design effect * (Z95 / t(0.975, G - 1))^2,
the last factor Korn and Graubard's allowance for a design effect estimated from G groups. The
interval is the ranks for n_eff (`ranks`) taken at the same fractions of the pooled values; each
entry says its `effective_n`, and n_eff below `needs_n` leaves it unbounded.

A figure measured more than once has its own spread to go by instead:

- `rounds_interval`: K rounds of a level (each on a fresh server, docs/metrics.md "Rounds"), the
  figure shown being the median of the K round values. On the log scale (latencies and rates vary
  by factors, and a ratio is what comparisons report): m = log(median), s = the standard deviation
  of the K logs (ddof 1), se = s * sqrt(c / K) with c = 1 for K <= 2 (the median is the mean) and
  pi / 2 for K >= 3 (a median's variance over a mean's, for normal data), and the interval
  exp(m -/+ t(0.975, K - 1) * se). It holds run-to-run noise: each round is a whole run.
- `windows_interval`: one run's rate, from W equal time windows of the level (batch means): the
  mean of the W per-window rates (which is the level's own rate) -/+ t(0.975, W - 1) * sd / sqrt(W).
  Within-run only: it cannot see what differs between two runs (a busier host, a new server).
- `gap_rounds_interval`: K rounds of a per-gap percentile (ITL). Every round must bound it with
  its own gaps; then the wider of `rounds_interval` and the rounds' own intervals, each read as
  +-Z95 standard errors of its log, their mean square times c / K for the median.

The Student t quantile is computed, not tabled: Newton's method on the CDF, integrated with
Simpson's rule after x = sqrt(df) tan(u); exact to 1e-9 where a closed form exists (1 and 2
degrees of freedom), for any degrees of freedom >= 1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from bench.core.metrics.stats.blocks import Interval, Intervals, PercentileInterval

CONFIDENCE = 0.95
MISS = 1.0 - CONFIDENCE  # the two tails together
TAIL = MISS / 2  # each tail, equal-tailed
Z95 = 1.959964  # the normal's 97.5% quantile: a 95% interval read as +-Z95 standard errors


def binomial_tails(n: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """(below, at_least), each of n + 2 entries: below[k] = P(B < k) and at_least[k] = P(B >= k)
    for B ~ Binomial(n, p), 0 < p < 1, k = 0..n+1. The pmf is exp(log C(n, k) + k log p +
    (n - k) log(1 - p)), log C(n, k) a running sum of log((n - j + 1) / j); each tail is summed
    from its own end, so a small tail is not the difference of two numbers near 1."""
    j = np.arange(1, n + 1, dtype=float)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(n - j + 1) - np.log(j))))
    k = np.arange(n + 1, dtype=float)
    pmf = np.exp(log_choose + k * np.log(p) + (n - k) * np.log1p(-p))
    below = np.concatenate(([0.0], np.cumsum(pmf)))
    at_least = np.concatenate((np.cumsum(pmf[::-1])[::-1], [0.0]))
    return np.minimum(below, 1.0), np.minimum(at_least, 1.0)


@functools.lru_cache(maxsize=4096)  # a function of n and q alone; levels of one size ask for the same
def ranks(n: int, q: float) -> tuple[int, int] | None:
    """1-based ranks (l, u), l < u, of the sorted sample of n whose [x_(l), x_(u)] covers the true
    q-th percentile (0 < q < 100) with probability P(l <= B < u) >= 95%, B ~ Binomial(n, q/100);
    each tail at most 2.5% where a rank within 1..n allows it (module docstring). None when no
    ranks within 1..n cover 95%."""
    if n < 1:
        return None
    below, at_least = binomial_tails(n, q / 100)
    low, high = _highest(below, TAIL, n), _lowest(at_least, TAIL, n)
    if low is not None and high is not None:
        return low, high
    if high is not None:  # no lower rank leaves 2.5% below it: rank 1 takes its tail, the upper side the rest
        high = _lowest(at_least, MISS - below[1], n)
        return (1, high) if high is not None and high > 1 else None
    if low is not None:  # the mirror image: rank n takes its tail
        low = _highest(below, MISS - at_least[n], n)
        return (low, n) if low is not None and low < n else None
    return (1, n) if n > 1 and below[1] + at_least[n] <= MISS else None


def _highest(below: np.ndarray, limit: float, n: int) -> int | None:
    """The highest rank l in 1..n with P(B < l) = below[l] <= limit (below ascends); None if none."""
    rank = min(int(np.searchsorted(below, limit, side="right")) - 1, n)
    return rank if rank >= 1 else None


def _lowest(at_least: np.ndarray, limit: float, n: int) -> int | None:
    """The lowest rank u in 1..n with P(B >= u) = at_least[u] <= limit (at_least descends); None if none."""
    rank = max(int(np.searchsorted(-at_least, -limit, side="left")), 1)
    return rank if rank <= n else None


@functools.lru_cache(maxsize=64)
def needs_n(q: float, *, equal_tails: bool = False) -> int:
    """The smallest n whose sample can bound the q-th percentile at 95% (`ranks` is not None from
    there on): ranks 1 and n miss (1 - p)^n + p^n, which must be at most 5%. With `equal_tails`,
    the smallest n where each of the two may be at most 2.5% (p99: 0.99^n <= 0.025)."""
    p, n = q / 100, 1
    while (max((1 - p) ** n, p ** n) > TAIL) if equal_tails else ((1 - p) ** n + p ** n > MISS):
        n += 1
    return n


def interval(ordered: np.ndarray, q: float) -> PercentileInterval:
    """The 95% interval of the q-th percentile of the ascending values `ordered`."""
    found = ranks(int(ordered.size), q)
    if found is None:
        return {"low": None, "high": None, "needs_n": needs_n(q)}
    low, high = found
    return {"low": float(ordered[low - 1]), "high": float(ordered[high - 1])}


def intervals(values: Sequence[float] | np.ndarray) -> Intervals:
    """Each percentile's 95% interval (p50, p90, p95, p99) of `values`, in any order."""
    ordered = np.sort(np.asarray(values, dtype=float))
    return {"p50": interval(ordered, 50), "p90": interval(ordered, 90), "p95": interval(ordered, 95),
            "p99": interval(ordered, 99)}


def clustered_intervals(groups: Sequence[Sequence[float] | np.ndarray]) -> Intervals:
    """Each percentile's 95% interval of the values of `groups` pooled, where the values of one
    group (the gaps of one request) move together: `clustered_interval` of each."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    pooled = np.concatenate(arrays) if arrays else np.empty(0)
    order = np.argsort(pooled)  # any order among equal values: `effective_n` counts all of them or none
    owner = np.repeat(np.arange(len(arrays)), [a.size for a in arrays])[order]
    sizes = np.array([a.size for a in arrays], dtype=float)
    ordered = pooled[order]
    return {"p50": clustered_interval(ordered, owner, sizes, 50), "p90": clustered_interval(ordered, owner, sizes, 90),
            "p95": clustered_interval(ordered, owner, sizes, 95), "p99": clustered_interval(ordered, owner, sizes, 99)}


def sorted_percentile(ordered: np.ndarray, q: float) -> float:
    """`np.percentile(ordered, q)` (linear interpolation), the same float, of values already
    ascending: read at its rank, with no partition of the whole array."""
    at = (ordered.size - 1) * (q / 100)
    low = math.floor(at)
    if low >= ordered.size - 1:
        return float(ordered[-1])
    a, b = float(ordered[low]), float(ordered[low + 1])
    t = at - low
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t  # numpy's two-sided lerp


def effective_n(ordered: np.ndarray, owner: np.ndarray, sizes: np.ndarray, q: float) -> int:
    """How many independent values the ascending pooled values `ordered` (value i of group
    owner[i]; group g holds sizes[g] of them) count as for their q-th percentile (module
    docstring, Values in groups): n / design effect x (Z95 / t(0.975, G - 1))^2, never more
    than n; 0 with fewer than two groups, which cannot show how groups differ."""
    n, groups = int(ordered.size), int(sizes.size)
    if groups < 2:
        return 0
    at = sorted_percentile(ordered, q)
    below = np.bincount(owner[: int(np.searchsorted(ordered, at, side="right"))], minlength=groups)
    p = float(below.sum()) / n
    independent = p * (1 - p) / n
    clustered = groups / (groups - 1) * float(np.sum((below - p * sizes) ** 2)) / (n * n)
    design = max(clustered / independent, 1.0) if independent > 0 else 1.0  # ties at the percentile: none to see
    return int(n / design * (Z95 / t_quantile(groups - 1)) ** 2)


def clustered_interval(ordered: np.ndarray, owner: np.ndarray, sizes: np.ndarray, q: float) -> PercentileInterval:
    """The 95% interval of the q-th percentile of values in groups (`effective_n`'s arguments):
    the ranks (l, u) that bound it among n_eff independent values (`ranks`), taken at the same
    fractions of the pooled values, l / n_eff rounded down and u / n_eff up; null with `needs_n`
    where n_eff cannot bound it. Each entry says its `effective_n`; with n_eff = n it is `interval`."""
    n, eff = int(ordered.size), effective_n(ordered, owner, sizes, q)
    found = ranks(eff, q)
    if found is None:
        return {"low": None, "high": None, "needs_n": needs_n(q), "effective_n": eff}
    low, high = found
    at_low, at_high = max(low * n // eff, 1), min(-(-high * n // eff), n)
    return {"low": float(ordered[at_low - 1]), "high": float(ordered[at_high - 1]), "effective_n": eff}


def bound_text(block: object, stat: str, spec: str, scale: float = 1.0) -> str:
    """What a report puts after a percentile's value: " [low, high]" (times `scale`, in the format
    `spec`: ".1f"), " (n<N)" where its n could not bound it, " (no interval)" where rounds could not
    (a round's value zero), "" where the block has no interval (a result written before them, an
    imported one) or `stat` is not a percentile."""
    ci95 = block.get("ci95") if isinstance(block, dict) else None
    found = ci95.get(stat) if isinstance(ci95, dict) else None
    if not isinstance(found, dict):
        return ""
    low, high = found.get("low"), found.get("high")
    if low is None or high is None:
        if "needs_n" not in found:
            return " (no interval)"
        return f" (eff. n<{found['needs_n']})" if "effective_n" in found else f" (n<{found['needs_n']})"
    return f" [{format(low * scale, spec)}, {format(high * scale, spec)}]"


def has_intervals(levels: Iterable[Mapping[str, object]]) -> bool:
    """Whether a stats block of `levels` has intervals (a result written before them has none)."""
    return any(isinstance(block, dict) and "ci95" in block for lv in levels for block in lv.values())

LARGE_DF = 1e6  # t(0.975, 1e6) - z(0.975) < 3e-6
MEDIAN_VARIANCE = math.pi / 2  # var(median) / var(mean) of a large normal sample
MIN_WINDOWS = 4  # fewer windows than this give no interval: t(0.975, 2) = 4.3 is all guess


@functools.lru_cache(maxsize=1024)  # a few ms each; a level asks for the same few again and again
def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided `confidence` quantile of Student's t with `df` degrees of freedom (1.96 for
    df = inf at 95%; 12.706 at df = 1, 2.262 at df = 9). df may be fractional (Welch's)."""
    tail = (1 + confidence) / 2
    if df > LARGE_DF:  # within 1e-6 of the normal's, and the grid below would be too coarse
        return _normal_quantile(tail)
    if df < 1 - 1e-9:  # a rounds' or Welch's df is at least 1 (Welch's within float rounding of it)
        raise ValueError(f"t quantiles here need at least 1 degree of freedom, not {df}")
    # With x = sqrt(df) tan(u), t's cdf is 1/2 + c * integral of cos(u)^(df - 1) from 0 to u:
    # a smooth integrand at most 1 (df >= 1), integrated by Simpson's rule on 4,000 intervals.
    power = max(df, 1.0) - 1
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(math.pi)
    target = (tail - 0.5) / c

    def integral(u: float) -> float:
        f = np.cos(np.linspace(0.0, u, 4001)) ** power
        return u / 12000 * float(f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())

    # Newton's method from the normal's quantile, which lies below t's: the integral is concave in
    # u, so every step stays below the root and climbs to it (a few steps, not a bisection's 60).
    u = math.atan(_normal_quantile(tail) / math.sqrt(df))
    for _ in range(100):
        step = (target - integral(u)) / math.cos(u) ** power
        u += step
        if step <= 1e-15 * u:
            break
    return math.sqrt(df) * math.tan(u)


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


def gap_rounds_spread(values: Sequence[float], bounds: Sequence[Mapping[str, object]]) -> tuple[float, float] | None:
    """(log se, degrees of freedom) of the median of K >= 2 rounds' positive `values` of a per-gap
    percentile whose rounds' own intervals are `bounds` (each bounded, `clustered_interval`):
    whichever of two gives the wider 95% interval, the rounds' spread (`median_log_se`, K - 1 df)
    or the rounds' own intervals (each read as +-Z95 standard errors of its log; their mean
    square times c / K, c as in `median_log_se`). None where a value is not positive, or with
    fewer than two rounds (a cell stopped, or still running, after its first round of a level)."""
    if len(values) < 2 or any(not v > 0 for v in values):
        return None
    k = len(values)
    spread = median_log_se(values)
    ses = []
    for v, b in zip(values, bounds, strict=True):
        low, high = float(b["low"]), float(b["high"])  # type: ignore[arg-type]
        ses.append((math.log(high) - math.log(low)) / (2 * Z95) if low > 0 else (high - low) / (2 * Z95 * v))
    factor = 1.0 if k <= 2 else MEDIAN_VARIANCE
    within = math.sqrt(factor / k * float(np.mean(np.square(ses))))
    return (spread, k - 1) if t_quantile(k - 1) * spread >= Z95 * within else (within, math.inf)


def gap_rounds_interval(values: Sequence[float], bounds: Sequence[Mapping[str, object]]) -> PercentileInterval:
    """The 95% interval of the median of K rounds' `values` of a per-gap percentile, their own
    intervals `bounds` (`gap_rounds_spread`): null with `needs_n` where a round's cannot bound it
    (every round must), and without it where a round's value is not positive; `effective_n` the
    least round's."""
    least = min(int(b["effective_n"]) for b in bounds)  # type: ignore[call-overload]
    unbounded = [b for b in bounds if b.get("low") is None or b.get("high") is None]
    if unbounded:
        needs = [int(b["needs_n"]) for b in unbounded if "needs_n" in b]  # type: ignore[call-overload]
        if needs:
            return {"low": None, "high": None, "needs_n": max(needs), "effective_n": least}
        return {"low": None, "high": None, "effective_n": least}
    spread = gap_rounds_spread(values, bounds)
    if spread is None:
        return {"low": None, "high": None, "effective_n": least}
    se, df = spread
    centre, half = math.log(float(np.median(values))), t_quantile(df) * se
    return {"low": math.exp(centre - half), "high": math.exp(centre + half), "effective_n": least}


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
