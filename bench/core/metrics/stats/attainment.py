"""How sure an SLO verdict is: the share of requests within a limit, judged by an exact binomial test.

An SLO `ttft_p90=500ms` asks that 90% of the requests have TTFT within 500 ms: that the true share
θ of requests within the limit (the attainment; a failed request is never within) be at least the
target p = 0.90. A level measures k of its n requests within. Taken as n independent draws, k is
Binomial(n, θ), and the verdict is the exact one-sided test of each side at 95%:

- `met` where k or more within would happen at most 5% of the time were θ only p: P(B >= k | p)
  <= 5%, B ~ Binomial(n, p). Equivalently the one-sided 95% Clopper-Pearson lower bound of θ is at
  least p. A level whose true attainment falls short of the target is called `met` in at most 5%
  of runs, whatever its latency distribution.
- `missed` where k or fewer would happen at most 5% of the time were θ p: P(B <= k | p) <= 5%
  (the one-sided upper bound is under p).
- `cannot tell` otherwise: the data cannot put θ on either side of p. `decides_at` is the number of
  requests that would decide it were the share within stay k/n, or None where it sits on p itself
  or needs more than MAX_REQUESTS.

An SLO on a high percentile needs many requests to be `met` at all: with every request within,
p99 needs n >= 299 (0.99^n <= 5%), p90 needs 29; a level of 100 requests can only ever call a
p99 SLO missed or cannot tell. That is the point: the measured share of a short level is not a
guarantee, and the verdict says so instead of reading 100/100 as a pass.

The bounds come from `binomial_tails` (bench.core.metrics.stats.intervals), in log space: exact to
far better than the 5% they are held to.
"""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple, TypedDict

from bench.base.doc import Doc
from bench.core.metrics.stats.intervals import binomial_tails

ALPHA = 0.05  # each side's one-sided test
MAX_REQUESTS = 1_000_000  # decides_at searches no further
Decision = Literal["met", "missed", "cannot tell"]


class Tails(NamedTuple):
    at_least: float  # P(B >= k | n, p)
    at_most: float  # P(B <= k | n, p)


def tails(k: int, n: int, p: float) -> Tails:
    below, at_least = binomial_tails(n, p)
    return Tails(float(at_least[k]), float(below[k + 1]))


def decide(k: int, n: int, p: float) -> Decision:
    """`met`, `missed` or `cannot tell` for k of n within and a target share p (0 < p < 1)."""
    if n == 0:
        return "cannot tell"
    t = tails(k, n, p)
    if t.at_least <= ALPHA:
        return "met"
    if t.at_most <= ALPHA:
        return "missed"
    return "cannot tell"


def decides_at(k: int, n: int, p: float) -> int | None:
    """The fewest requests at which the same share k/n would be decided: `met` above p, `missed` below;
    None where k/n is p or no count up to MAX_REQUESTS decides it. n itself where it is decided."""
    if n == 0 or k * 1.0 == p * n:
        return None
    share = k / n

    def decided(m: int) -> bool:
        return decide(round(share * m), m, p) != "cannot tell"

    if decided(n):
        return n
    high = n
    while not decided(high):
        if high >= MAX_REQUESTS:
            return None
        high = min(MAX_REQUESTS, high * 2)
    low = high // 2 if high > n else n  # not decided at low (the last doubling step, or n)
    while high - low > 1:  # decided at high, not at low: the first count that decides, to one request
        middle = (low + high) // 2
        if decided(middle):
            high = middle
        else:
            low = middle
    return high


def bound(k: int, n: int, side: Literal["low", "high"]) -> float:
    """The one-sided 95% Clopper-Pearson bound of the share: the lowest θ with P(B >= k | θ) > 5%
    (`low`), or the highest with P(B <= k | θ) > 5% (`high`), by bisection to 1e-6."""
    if side == "low" and k == 0:
        return 0.0
    if side == "high" and k == n:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        t = tails(k, n, mid)
        if side == "low":
            lo, hi = (mid, hi) if t.at_least <= ALPHA else (lo, mid)
        else:
            lo, hi = (lo, mid) if t.at_most <= ALPHA else (mid, hi)
    return round(hi if side == "low" else lo, 6)


class SloVerdict(TypedDict):
    """One SLO of a level judged with confidence (bench.core.metrics.stats.attainment)."""

    decision: Annotated[Decision, Doc(
        "met: the share within the limit reaches the target at 95% confidence (an exact one-sided binomial test); "
        "missed: it falls short at 95%; cannot tell: neither.")]
    within: Annotated[int, Doc("Measured requests within the limit (a failed request is not).", minimum=0)]
    requests: Annotated[int, Doc("Measured requests.", minimum=0)]
    target: Annotated[float, Doc("The share the SLO asks for: its percentile / 100.", exclusiveMinimum=0,
                                 exclusiveMaximum=1)]
    low: Annotated[float | None, Doc("The share's one-sided 95% lower bound (Clopper-Pearson); null without "
                                     "requests.", minimum=0, maximum=1)]
    high: Annotated[float | None, Doc("The share's one-sided 95% upper bound; null without requests.", minimum=0,
                                      maximum=1)]
    decides_at: Annotated[int | None, Doc(
        "Cannot tell: the requests that would decide it were the share within to stay as measured; null where the "
        "share is the target itself or more than a million would be needed. Decided: the requests measured.",
        minimum=1)]


def verdict(k: int, n: int, p: float) -> SloVerdict:
    return {"decision": decide(k, n, p), "within": k, "requests": n, "target": p,
            "low": bound(k, n, "low") if n else None, "high": bound(k, n, "high") if n else None,
            "decides_at": decides_at(k, n, p)}


def overall(verdicts: list[SloVerdict]) -> Decision:
    """A level's verdict on all its SLOs: missed where one is, met where all are, else cannot tell."""
    decisions = [v["decision"] for v in verdicts]
    if "missed" in decisions:
        return "missed"
    return "met" if decisions and all(d == "met" for d in decisions) else "cannot tell"
