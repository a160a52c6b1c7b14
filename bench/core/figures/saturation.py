"""The over-saturation stop: an open-loop level whose queue grows without bound ends early
(docs/metrics.md, Over-saturation).

Offered more than it serves, a server's queue (the requests that have arrived and not ended, in
the server or waiting for a place under --max-concurrency) grows for as long as the level lasts,
and every latency figure of the level then measures how long the level was: the same server at
the same rate reports a p99 TTFT twice as high from a level twice as long. Such a level has nothing
more to say once its queue is seen growing, and a search for the highest load meeting an SLO has
its answer for it: missed.

The rule is in counts, never in the host's speed. At `elapsed` seconds into the measured phase
(or the last arrival's offset, if that came first: a queue cannot grow once nothing arrives), over
the window [elapsed / 2, elapsed], A requests arrived and E ended (failed ones too: they left the
queue), so the queue grew by D = A - E. A stable queue's length is stationary: D hovers around
zero with Poisson-sized swings of a few sqrt(A); an over-saturated one grows by about
A (1 - served / offered). The level is over-saturated when

    A >= MIN_ARRIVALS  and  D >= max(MARGIN x A, Z x sqrt(A))  and  elapsed / 2 >= SETTLE x S

where S is the shortest time any request of the level took from its arrival to its end: a server
that batches holds about rate x (its latency) requests in flight once it is full, and the window
opens only after that filling is over. So fewer than 75% of the window's arrivals were matched by
an end, by more than three Poisson standard deviations, on a server past its filling. A server
offered twice what it serves is stopped once its window holds 36 arrivals, at 1.5x once it holds
81; at 1.2x (a 17% shortfall, within the margin) only where chance makes the shortfall look
larger. Simulated (tests/core/test_saturation.py: 1 and 4 servers, Poisson arrivals, 400
requests, 30 seeds each): no level offered up to 95% of what it serves was stopped; every one
offered 1.5x was (half of them within the first 30% of the schedule, the latest at 87%), and
every one offered 2x or 4x within the first 35%; of those offered 1.2x, 8 of 30.

The stop cancels the requests still in flight: they are the level's `cut`, not its failures
(they were ours to end), and the arrivals never sent (not yet due, or waiting for a place under
--max-concurrency) are `unsent`. The level's figures are those of the requests that ended
before it, marked: its `stop_reason` is the rule's finding and the block says what was left
out. The same idea (stop a level whose queue is seen to grow, judged on its trend) is guidellm's
`--stop-over-saturated`; the thresholds and the counts are cellbench's.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, TypedDict

from bench.core.crosswalk.entry import none
from bench.core.figures.declare import Doc, LevelFigure, Row, by_field, total
from bench.core.level_run import LevelRun

MIN_ARRIVALS = 30  # arrivals in the window before the rule may fire
MARGIN = 0.25  # the share of the window's arrivals left unserved, at least
Z = 3.0  # and at least this many Poisson standard deviations of the window's arrivals
SETTLE = 4.0  # the window opens this many of the level's shortest request times after its start, or later


@dataclass(frozen=True)
class Growth:
    """The queue over the window [start_s, end_s] (offsets from the measured phase's start)."""

    start_s: float
    end_s: float
    arrived: int
    ended: int
    settled: bool  # the window opened SETTLE shortest request times after the start, or later

    @property
    def grew(self) -> int:
        return self.arrived - self.ended

    @property
    def over_saturated(self) -> bool:
        a = self.arrived
        return self.settled and a >= MIN_ARRIVALS and self.grew >= max(MARGIN * a, Z * math.sqrt(a))

    def text(self) -> str:
        return (f"over-saturated: from {self.start_s:.1f} s to {self.end_s:.1f} s into the level {self.arrived} "
                f"requests arrived and {self.ended} ended, so the queue grew by {self.grew}: the server does not "
                f"keep up with the offered rate")


def growth(arrivals: Sequence[float], ends: Sequence[float], elapsed_s: float, shortest_s: float | None) -> Growth:
    """The queue's growth over the second half of the phase so far: `arrivals` the schedule's
    offsets (sorted), `ends` the offsets at which requests ended (sorted), `shortest_s` the
    shortest arrival-to-end time of the requests that ended (None: none has)."""
    end = min(elapsed_s, arrivals[-1]) if arrivals else elapsed_s
    start = end / 2.0
    settled = shortest_s is not None and start >= SETTLE * shortest_s
    return Growth(start, end, _between(arrivals, start, end), _between(ends, start, end), settled)


def _between(sorted_offsets: Sequence[float], lo: float, hi: float) -> int:
    """How many offsets lie in (lo, hi]."""
    return bisect_right(sorted_offsets, hi) - bisect_right(sorted_offsets, lo)


class OverSaturated(TypedDict):
    """An open-loop level stopped because its queue grew without bound (bench.core.figures.saturation)."""

    reason: Annotated[str, Doc("What the rule saw: the window, the requests that arrived and ended in it.")]
    window_start_s: Annotated[float, Doc("The window's start, seconds into the measured phase.", minimum=0)]
    window_end_s: Annotated[float, Doc("Its end: when the rule fired, or the last arrival before it.", minimum=0)]
    arrived: Annotated[int, Doc("Requests that arrived in the window.", minimum=0)]
    ended: Annotated[int, Doc("Requests that ended in it, failed ones included.", minimum=0)]
    cut: Annotated[int, Doc("Requests in flight when the level stopped, cancelled and left out of its figures "
                            "(they were not the server's failures).", minimum=0)]
    unsent: Annotated[int, Doc("Arrivals of the schedule never sent: not yet due, or due and waiting for a place "
                               "under --max-concurrency.", minimum=0)]
    rounds: Annotated[int, Doc("Rounds that stopped so (1 for one round).", minimum=1)]


def measure(run: LevelRun) -> OverSaturated | None:
    if (found := run.over_saturated) is None:
        return None
    return OverSaturated(reason=found["reason"], window_start_s=found["window_start_s"],
                         window_end_s=found["window_end_s"], arrived=found["arrived"], ended=found["ended"],
                         cut=found["cut"], unsent=found["unsent"], rounds=1)


def _first(values: list[object]) -> object:
    return values[0] if values else None


FIGURE = LevelFigure(
    key="over_saturated",
    block=OverSaturated,
    description=("An open-loop level stopped early because its queue grew without bound (--stop-over-saturated, "
                 "and every level of a sweep): the rule's finding and what the stop left out; absent where the "
                 "level ran to its end (bench.core.figures.saturation)."),
    measure=measure,
    pool=by_field({"reason": _first, "window_start_s": _first, "window_end_s": _first, "arrived": total,
                   "ended": total, "cut": total, "unsent": total, "rounds": total}),
    rows=(Row("cut", "Cut when over-saturated", "requests", digits=0),),
    peers={
        "vllm": (none("over_saturated.cut", "no over-saturation stop: a level runs all its requests",
                      "vllm/benchmarks/serve.py"),),
        "aiperf": (none("over_saturated.cut", "no over-saturation stop; its metrics are AIPerf's metric classes",
                        "aiperf/metrics/types/"),),
        "guidellm": (none("over_saturated.cut", "its OverSaturationConstraint (--stop-over-saturated) ends a "
                          "benchmark it judges over-saturated; no figure counts the requests that stop cut",
                          "guidellm/scheduler/"),),
        "siliconbench": (none("over_saturated.cut", "closed loop only: nothing to stop", "scripts/benchmark.py"),),
    },
)
