"""Is a difference real? One figure of one level on two sides (two runs, two frameworks, two
machines), judged by the 95% interval of the ratio new / old.

Each side is an `Estimate`: the figure as its level shows it and the standard error of its log,
from the best evidence the level has (docs/comparisons.md, "How a change is judged"):

- K >= 2 rounds: the rounds' own spread (bench.core.metrics.stats.intervals.median_log_se), K - 1
  degrees of freedom. It holds run-to-run noise.
- one round: the level's within-run interval (a percentile's order-statistic `ci95`, a rate's
  `throughput_ci95` from time windows), read as +-1.96 standard errors of the log. It cannot see
  run-to-run noise, and says so.
- a per-gap figure (ITL): its intervals count the gaps of one request as moving together
  (`effective_n`, bench.core.metrics.stats.intervals.clustered_interval). With rounds, every round must
  bound the percentile with its own gaps, and the wider of the rounds' spread and the rounds' own
  intervals is taken (`gap_rounds_spread`). One round is judged only beside a floor (its own
  interval where wider): ITL moves between runs far more than within one (docs/comparisons.md).
  An ITL interval written before `effective_n` took every gap as an independent draw, far too
  narrow (two alike runs came out "+0.1% [+0.1%, +0.1%]"): it is judged by a floor alone (with
  rounds, by their spread or the floor), or not at all.
- a level figure declared compared (bench.core.figures: the server's peak memory) is one value per
  level: with K >= 2 rounds their spread; with one round it has no interval of its own and is
  judged only beside a noise floor (`ONE_FIGURE`).
- either, with a noise floor of the machine (`FloorSpread`: one run's log standard deviation between
  identical runs, bench.core.noise): the floor's se for K rounds, where it is larger than the
  level's own, with the floor's runs - 1 degrees of freedom.

The change is d = log(new) - log(old) with se = sqrt(se_old^2 + se_new^2) and Welch-Satterthwaite
degrees of freedom; its interval is exp(d -/+ t * se) - 1. Outside zero on the worse side it is a
`regression`, on the better side an `improvement`; across zero, `no detectable change`, with
`detectable` = exp(t * se) - 1, the smallest change that would have left zero outside the
interval. A side without an interval, or with a percentile its requests cannot bound, is
`cannot tell`, with why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bench.core import figures as declared
from bench.core.metrics.stats.intervals import MEDIAN_VARIANCE, Z95, gap_rounds_spread, median_log_se, t_quantile
from bench.core.metrics.table import METRICS

Decision = Literal["regression", "improvement", "no detectable change", "cannot tell"]
PERCENTILES = ("p50", "p99")  # of each compared metric: the typical request and the tail
PER_GAP = ("its interval takes every chunk gap as an independent draw (written before intervals counted the gaps of "
           "one request together): too narrow to judge by; measure it again, or compare it with a noise floor")
ONE_ROUND = ("one round's interval sees only how its own requests scattered, and ITL moves most between runs (the "
             "host's scheduling, the client's reads): compare it with --rounds or a noise floor")


@dataclass(frozen=True)
class Figure:
    """One figure comparisons judge: a level's rate, or a percentile of a stats block."""

    key: str  # "output_throughput_tps", or "ttft_ms.p50"
    label: str  # "output tok/s", "TTFT p50 (ms)"
    higher_is_better: bool
    per_gap: bool = False  # a value per chunk gap (ITL): its within-run interval is too narrow to judge by
    one_figure: bool = False  # one value per level (a level figure's): no within-run interval (ONE_FIGURE)
    scale: float = 1.0  # the value as its label's unit gives it: bytes shown in MiB

    @property
    def block(self) -> str:
        return self.key.split(".")[0]

    @property
    def stat(self) -> str | None:
        return self.key.split(".")[1] if "." in self.key else None


RATES = (Figure("output_throughput_tps", "output tok/s", True), Figure("request_throughput_rps", "req/s", True))
FIGURES: tuple[Figure, ...] = RATES + tuple(
    Figure(f"{m.key}.{p}", f"{m.label} {p} ({m.unit})", m.higher_is_better, m.per_gap)
    for m in METRICS if m.compared for p in PERCENTILES) + tuple(
    Figure(f.path(row), row.title(), row.better == "higher", one_figure=True, scale=row.scale)
    for f in declared.FIGURES for row in f.rows if row.better is not None)
"""The figures comparisons judge: the rates, the compared metrics' p50 and p99, and each level figure's
rows declared `better` (bench.core.figures)."""
ONE_FIGURE = ("one round: a level figure (a peak, a mean over the level) has no within-run interval; compare "
              "results of --rounds 2 or more, or with a noise floor (cellbench noise)")


@dataclass(frozen=True)
class FloorSpread:
    """A noise floor's spread of one figure at one level: the standard deviation of its log
    between `runs` identical runs of one round each, measured at `measured_at` (UTC)."""

    log_sd: float
    runs: int
    measured_at: str


@dataclass(frozen=True)
class Estimate:
    value: float | None  # as the level shows it; None: the level lacks the figure
    log_se: float | None  # None: no standard error (`why`)
    df: float
    basis: str  # "3 rounds", "within-run", "noise floor of 2026-12-01 (5 runs)"
    why: str | None = None


@dataclass(frozen=True)
class Change:
    figure: Figure
    old: float | None
    new: float | None
    decision: Decision
    change: float | None = None  # new / old - 1
    low: float | None = None  # the 95% interval of `change`
    high: float | None = None
    detectable: float | None = None  # the smallest |change| this data could have told from noise
    basis: str = ""
    why: str | None = None

    def text(self) -> str:
        """"-31.2% [-38.0%, -24.0%]: regression" or "+2.1% [-9.5%, +15.1%]: no detectable change
        (could detect 12.4%)" or "cannot tell: ..."."""
        if self.change is None or self.low is None or self.high is None:
            return f"cannot tell: {self.why}"
        head = f"{self.change:+.1%} [{self.low:+.1%}, {self.high:+.1%}]: {self.decision}"
        if self.decision == "no detectable change" and self.detectable is not None:
            head += f" (could detect {self.detectable:.1%})"
        return head

    def to_json(self) -> dict[str, Any]:
        return {"figure": self.figure.key, "label": self.figure.label, "old": self.old, "new": self.new,
                "decision": self.decision, "change": self.change, "low": self.low, "high": self.high,
                "detectable": self.detectable, "basis": self.basis, "why": self.why}


def value(level: Mapping[str, Any], figure: Figure) -> float | None:
    found = level.get(figure.block)
    if figure.stat is not None:
        found = found.get(figure.stat) if isinstance(found, Mapping) else None
    return float(found) if isinstance(found, (int, float)) and not isinstance(found, bool) else None


def _interval(level: Mapping[str, Any], figure: Figure) -> Mapping[str, Any] | None:
    if figure.stat is None:
        found = (level.get("throughput_ci95") or {}).get(figure.key)
    else:
        found = ((level.get(figure.block) or {}).get("ci95") or {}).get(figure.stat)
    return found if isinstance(found, Mapping) else None


def estimate(level: Mapping[str, Any], figure: Figure, floor: FloorSpread | None = None) -> Estimate:
    """The figure of `level` and its log standard error (module docstring)."""
    shown = value(level, figure)
    if shown is None:
        return Estimate(None, None, math.inf, "", "the level does not have it")
    if shown <= 0:
        return Estimate(shown, None, math.inf, "", "it is zero: no ratio to take")
    bound = _interval(level, figure)
    if bound is not None and bound.get("low") is None and "needs_n" in bound:
        return Estimate(shown, None, math.inf, "", _needs(figure, bound, bool(level.get("rounds"))))
    rounds = [r for r in level.get("rounds") or () if isinstance(r, Mapping)]
    k = max(len(rounds), 1)
    if figure.per_gap:
        own = _per_gap(shown, figure, bound, rounds, floor)
    elif k >= 2:
        values = [value(r, figure) for r in rounds]
        if any(v is None or v <= 0 for v in values):
            return Estimate(shown, None, math.inf, "", "a round lacks it")
        own = Estimate(shown, median_log_se([v for v in values if v is not None]), k - 1, f"{k} rounds")
    elif figure.one_figure:
        if floor is None:
            return Estimate(shown, None, math.inf, "", ONE_FIGURE)
        own = Estimate(shown, 0.0, math.inf, "within-run")
    elif bound is None or bound.get("low") is None or bound.get("high") is None:
        return Estimate(shown, None, math.inf, "", "no interval in this result (written before intervals)")
    else:
        own = Estimate(shown, _within_se(bound, shown), math.inf, "within-run")
    if floor is None or own.log_se is None:
        return own
    factor = 1.0 if k <= 2 else MEDIAN_VARIANCE
    floored = floor.log_sd * math.sqrt(factor / k)
    if floored <= own.log_se:
        return own
    return Estimate(shown, floored, max(floor.runs - 1, 1), f"noise floor of {floor.measured_at} ({floor.runs} runs)")


def _within_se(bound: Mapping[str, Any], shown: float) -> float:
    """A within-run 95% interval read as +-Z95 standard errors of the log (of the value where its
    low end is zero)."""
    low, high = float(bound["low"]), float(bound["high"])
    return (math.log(high) - math.log(low)) / (2 * Z95) if low > 0 else (high - low) / (2 * Z95 * shown)


def _per_gap(shown: float, figure: Figure, bound: Mapping[str, Any] | None, rounds: Sequence[Mapping[str, Any]],
             floor: FloorSpread | None) -> Estimate:
    """A per-gap figure's (ITL's) own estimate, before any floor (module docstring): with rounds
    whose intervals count a request's gaps together, every round bounding it, `gap_rounds_spread`;
    with one round, its own interval only beside a floor (ONE_ROUND); an interval written before
    (no `effective_n`) gives nothing of its own (PER_GAP): one round has 0 beside a floor, rounds
    their spread beside a floor."""
    grouped = bound is not None and "effective_n" in bound
    if len(rounds) < 2:
        if floor is None:
            return Estimate(shown, None, math.inf, "", ONE_ROUND if grouped else PER_GAP)
        own = _within_se(bound, shown) if grouped and bound is not None and bound.get("low") is not None else 0.0
        return Estimate(shown, own, math.inf, "within-run")
    values = [value(r, figure) for r in rounds]
    if any(v is None or v <= 0 for v in values):
        return Estimate(shown, None, math.inf, "", "a round lacks it")
    known, k = [v for v in values if v is not None], len(rounds)
    if not grouped:
        if floor is None:
            return Estimate(shown, None, math.inf, "", PER_GAP)
        return Estimate(shown, median_log_se(known), k - 1, f"{k} rounds")
    bounds = [_interval(r, figure) or {} for r in rounds]
    if any(b.get("low") is None or b.get("high") is None or "effective_n" not in b for b in bounds):
        return Estimate(shown, None, math.inf, "", "a round cannot bound it")
    spread = gap_rounds_spread(known, bounds)
    if spread is None:
        return Estimate(shown, None, math.inf, "", "a round lacks it")
    return Estimate(shown, spread[0], spread[1], f"{k} rounds")


def _needs(figure: Figure, bound: Mapping[str, Any], rounds: bool) -> str:
    """Why a percentile its data cannot bound is not judged: the requests it needs, or for a
    per-gap figure the independent gaps it needs and what its gaps count as."""
    stat = figure.stat or figure.label
    if "effective_n" not in bound:
        return f"{stat} needs at least {bound['needs_n']} requests for a 95% bound"
    return (f"{stat} needs {bound['needs_n']} independent gaps for a 95% bound, and the gaps of one request move "
            f"together: {'a round' if rounds else 'the level'}'s count as {bound['effective_n']}")


def judge(figure: Figure, old: Estimate, new: Estimate) -> Change:
    """new against old (module docstring)."""
    for side, e in (("old", old), ("new", new)):
        if e.value is None or e.log_se is None:
            return Change(figure, old.value, new.value, "cannot tell", why=f"{side}: {e.why}")
    assert old.value is not None and new.value is not None and old.log_se is not None and new.log_se is not None
    d = math.log(new.value / old.value)
    se = math.hypot(old.log_se, new.log_se)
    half = t_quantile(_welch_df([(old.log_se, old.df), (new.log_se, new.df)])) * se
    low, high = math.expm1(d - half), math.expm1(d + half)
    decision: Decision = "no detectable change"
    if low > 0 or high < 0:
        better = (low > 0) == figure.higher_is_better
        decision = "improvement" if better else "regression"
    basis = old.basis if old.basis == new.basis else f"old: {old.basis}; new: {new.basis}"
    return Change(figure, old.value, new.value, decision, math.expm1(d), low, high, math.expm1(half), basis)


def _welch_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variances se^2 with their own df."""
    total = sum(se * se for se, _ in parts)
    terms = sum((se * se) ** 2 / df for se, df in parts if not math.isinf(df))
    if total == 0:
        return math.inf
    return total * total / terms if terms > 0 else math.inf


def compare_levels(old: Mapping[str, Any], new: Mapping[str, Any], *,
                   old_floor: Mapping[str, FloorSpread] | None = None,
                   new_floor: Mapping[str, FloorSpread] | None = None) -> list[Change]:
    """Every figure either level has, judged new against old; a floor maps figure keys to spreads."""
    out = []
    for figure in FIGURES:
        if value(old, figure) is None and value(new, figure) is None:
            continue
        out.append(judge(figure, estimate(old, figure, (old_floor or {}).get(figure.key)),
                         estimate(new, figure, (new_floor or {}).get(figure.key))))
    return out
