"""`--request-rate sweep`: the highest request rate whose open-loop level meets the SLOs.

A bounded search over levels, each run in full and judged by its goodput block
(`bench.core.open_loop.goodput`: every SLO's attainment reached, the level complete, the
arrivals kept pace):

1. start at `start` req/s; while every rate so far passed, double it; while none passed, halve it;
2. once a passing rate lo and a failing rate hi above it are known, bisect: try (lo + hi) / 2
   (to 3 significant digits), and keep whichever side it lands on;
3. stop when hi <= lo x (1 + tolerance), or after `max_levels` levels, whichever comes first.

The answer is lo (`best_rps`), with hi (`failing_rps`) as the bracket's other side. Rates are
assumed to pass below some limit and fail above it; a noisy level that breaks that order is kept
as measured, and the bracket is always the highest pass and the lowest failure above it.

The search moves on each level's measured outcome (`slo_met`), which is a point estimate: near the
limit a level of a few hundred requests passes or fails by chance. Its answer with 95% confidence
is apart: each level's `slo_decision` (bench.core.metrics.stats.attainment), `best_met_rps` the
highest rate met at 95%, `lowest_missed_rps` the lowest missed at 95% above it, and the rates
neither could decide (`undecided_rps`) kept apart: the limit lies between the two, and the
undecided levels say where more requests would have to be measured.

`--concurrency sweep` searches closed-loop levels the same way (`ConcurrencySweep`), over whole
numbers of slots: doubled from `start` (1 unless given), halved down to 1, bisected to the nearest
whole number; it stops, besides the above, when no whole number lies between the two sides or
when c=1 already missed. Its answer is the result's `concurrency_sweep` block.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.core.metrics.stats.attainment import Decision
from bench.core.open_loop import ConcurrencySweepBlock, Slo, Sweep, round_rate, slo_json


@dataclass(frozen=True)
class SweepPlan:
    start: float = 1.0  # req/s, the first level
    tolerance: float = 0.1  # stop when the failing rate is within this share above the passing one
    max_levels: int = 8


@dataclass
class RateSweep:
    """The search's state: `next_rate()` asks for the next level, `record()` gives its outcome."""

    plan: SweepPlan
    slos: tuple[Slo, ...]
    tried: list[tuple[float, bool]] = field(default_factory=list)
    goodputs: dict[float, float | None] = field(default_factory=dict)
    decisions: list[Decision | None] = field(default_factory=list)  # each level's slo_decision (None: not judged)
    stopped: str = "not started"

    def bracket(self) -> tuple[float | None, float | None]:
        """(highest passing rate, lowest failing rate above it), None where not known yet."""
        lo = max((r for r, ok in self.tried if ok), default=None)
        hi = min((r for r, ok in self.tried if not ok and (lo is None or r > lo)), default=None)
        return lo, hi

    def name(self, load: float) -> str:
        """A level as `stopped` names it: "4 req/s" (a concurrency sweep's: "c=4")."""
        return f"{load:g} req/s"

    def up(self, load: float) -> float:
        return round_rate(load * 2)

    def down(self, load: float) -> float | None:
        """The next level below a failing `load`; None where there is none."""
        return round_rate(load / 2)

    def between(self, lo: float, hi: float) -> float:
        return round_rate((lo + hi) / 2)

    def next_rate(self) -> float | None:
        """The next level to run, or None when the search is over (`stopped` says why)."""
        if not self.tried:
            self.stopped = "running"
            return self.plan.start
        lo, hi = self.bracket()
        if lo is not None and hi is not None and hi <= lo * (1 + self.plan.tolerance) * (1 + 1e-9):
            self.stopped = f"within the tolerance: {self.name(hi)} failed, {self.name(lo)} passed"
            return None
        if len(self.tried) >= self.plan.max_levels:
            self.stopped = f"the level cap: {self.plan.max_levels} levels run"
            return None
        if hi is None:
            rate: float | None = self.up(lo) if lo is not None else self.plan.start
        elif lo is None:
            rate = self.down(hi)
            if rate is None:
                self.stopped = f"{self.name(hi)} failed, and there is no level below it"
                return None
        else:
            rate = self.between(lo, hi)
        if any(rate == r for r, _ in self.tried):  # rounding met a level already run: nothing left between
            self.stopped = f"no level left between {self.name(lo or 0)} and {self.name(hi or 0)}"
            return None
        return rate

    def record(self, rate: float, passed: bool, goodput_rps: float | None, decision: Decision | None = None) -> None:
        self.tried.append((rate, passed))
        self.goodputs[rate] = goodput_rps
        self.decisions.append(decision)

    def confident(self) -> tuple[float | None, float | None, list[float]]:
        """(highest rate met at 95%, lowest rate missed at 95% above it, the rates neither decided)."""
        judged = [(r, d) for (r, _), d in zip(self.tried, self.decisions, strict=True)]
        met = max((r for r, d in judged if d == "met"), default=None)
        missed = min((r for r, d in judged if d == "missed" and (met is None or r > met)), default=None)
        return met, missed, sorted({r for r, d in judged if d == "cannot tell"})

    def stop(self, why: str) -> None:
        """The cell stopped the search (a server gone, the budget spent, an interrupt)."""
        self.stopped = f"the cell stopped: {why}"

    def outcome(self) -> Sweep:
        lo, hi = self.bracket()
        met, missed, undecided = self.confident()
        return {
            "slo": slo_json(self.slos),
            "start_rps": self.plan.start,
            "tolerance": self.plan.tolerance,
            "max_levels": self.plan.max_levels,
            "rates": [r for r, _ in self.tried],
            "passed": [ok for _, ok in self.tried],
            "best_rps": lo,
            "failing_rps": hi,
            "goodput_rps": self.goodputs.get(lo) if lo is not None else None,
            "stopped": self.stopped,
            "decisions": list(self.decisions),
            "best_met_rps": met,
            "lowest_missed_rps": missed,
            "undecided_rps": undecided,
        }


class ConcurrencySweep(RateSweep):
    """`--concurrency sweep`: the same search over closed-loop levels, whole numbers of slots."""

    def name(self, load: float) -> str:
        return f"c={load:g}"

    def up(self, load: float) -> float:
        return int(load) * 2

    def down(self, load: float) -> float | None:
        return int(load) // 2 or None

    def between(self, lo: float, hi: float) -> float:
        return (int(lo) + int(hi)) // 2

    def concurrency_outcome(self) -> ConcurrencySweepBlock:
        lo, hi = self.bracket()
        met, missed, undecided = self.confident()
        return {
            "slo": slo_json(self.slos),
            "start": int(self.plan.start),
            "tolerance": self.plan.tolerance,
            "max_levels": self.plan.max_levels,
            "concurrencies": [int(c) for c, _ in self.tried],
            "passed": [ok for _, ok in self.tried],
            "best_concurrency": None if lo is None else int(lo),
            "failing_concurrency": None if hi is None else int(hi),
            "goodput_rps": self.goodputs.get(lo) if lo is not None else None,
            "stopped": self.stopped,
            "decisions": list(self.decisions),
            "best_met_concurrency": None if met is None else int(met),
            "lowest_missed_concurrency": None if missed is None else int(missed),
            "undecided_concurrencies": [int(c) for c in undecided],
        }
