"""The plan of a cell's levels: which it measures, in what order, with how many requests each."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from bench.core.level_run import OpenLoop
from bench.core.sessions import Conversation, Sessions
from bench.run.config import CellConfig
from bench.run.levels.sweep import ConcurrencySweep, RateSweep
from bench.setup.prompts import Prompt
from bench.setup.sessions import conversations, recorded
from bench.setup.traces import Synthesiser, tokenizer_path

Point = int | OpenLoop
"""A level to run: a closed-loop concurrency, or an open-loop schedule."""
Step = tuple[Point, int]
"""A level and its round (1-based; 1 without --rounds)."""


def point_text(point: Point) -> str:
    """"c=8" or "4 req/s", as messages name a level."""
    return f"c={point}" if isinstance(point, int) else point.label


def point_json(point: Point) -> int | str:
    """A level as a result's server and run_config blocks list it: 8, or "4 req/s"."""
    return point if isinstance(point, int) else point.label


def step_text(step: Step, rounds: int) -> str:
    """"c=8", or with rounds "c=8 round 2 of 3", as messages name a level."""
    point, k = step
    return point_text(point) if rounds < 2 else f"{point_text(point)} round {k} of {rounds}"


class LevelPlan:
    """Which levels a cell measures, in what order and with how many requests each: its
    concurrencies, its open-loop rates or trace, or a sweep's rates as the search chooses them;
    each level `rounds` times, round-major."""

    def __init__(self, cfg: CellConfig, prompts: Sequence[Prompt] = ()) -> None:
        self.cfg = cfg
        asked = cfg.load.sessions  # --sessions: each level runs these conversations (bench.load.sessions)
        self.sessions = None if asked is None else Sessions(
            self._conversations(prompts), asked.think_s, asked.think_drawn, asked.header,
            rate_per_s=asked.rate_per_s)
        plan = cfg.load.plan
        self.search: RateSweep | None = None
        if plan is not None and plan.sweep is not None:
            self.search = RateSweep(plan.sweep, plan.slos)
        elif plan is not None and plan.concurrency_sweep is not None:
            self.search = ConcurrencySweep(plan.concurrency_sweep, plan.slos)
        self.rounds = 1 if self.search is not None else cfg.load.rounds  # a sweep's levels are never repeated

    def _conversations(self, prompts: Sequence[Prompt]) -> tuple[Conversation, ...]:
        """The sessions: the prompts' conversations, or --sessions-file's Weka traces made whole."""
        asked = self.cfg.load.sessions
        assert asked is not None
        if not asked.weka:
            return conversations(prompts, asked.count, asked.turns)
        synth = Synthesiser(tokenizer_path(self.cfg.profile.builtin, self.cfg.profile.name))
        return recorded(asked.weka, synth, asked.count, asked.turns)

    def points(self) -> list[Point]:
        """The levels asked for, in order (a sweep's are chosen as it goes: `swept`)."""
        plan = self.cfg.load.plan
        if plan is None or not plan.open_loop:
            return list(self.cfg.load.concurrency)
        if (trace := plan.trace_schedule()) is not None:  # one level: the trace, at the rate its offsets offer
            return [OpenLoop(trace.offered_rate, max_concurrency=plan.max_concurrency, seed=plan.seed, trace=trace,
                             stop_over_saturated=plan.stops_over_saturated)]
        return [self.open_loop(rate) for rate in plan.rates]

    def open_loop(self, rate: float) -> OpenLoop:
        plan = self.cfg.load.plan
        assert plan is not None, "open-loop levels come from a load plan"
        return OpenLoop(rate, plan.burstiness, plan.max_concurrency, plan.seed, ramp=plan.ramp(rate),
                        stop_over_saturated=plan.stops_over_saturated)

    def requests(self, point: Point) -> int:
        """A level's measured requests: --requests, a trace's entries, or its sessions' turns."""
        if self.sessions is not None:
            return self.sessions.turns
        requests = self.cfg.load.requests
        return point.measured(requests) if isinstance(point, OpenLoop) else requests

    def swept(self) -> Iterator[Step]:
        assert self.search is not None
        while (load := self.search.next_rate()) is not None:
            yield (int(load) if isinstance(self.search, ConcurrencySweep) else self.open_loop(load)), 1

    def sized_for(self) -> int:
        """The requests in flight a server is started for: the highest concurrency level (a
        concurrency sweep's highest reach: its start doubled at every level), or the open-loop
        levels' --max-concurrency (without one: as for the concurrency levels)."""
        plan = self.cfg.load.plan
        if plan is not None and plan.open_loop and plan.max_concurrency is not None:
            return plan.max_concurrency
        if plan is not None and (search := plan.concurrency_sweep) is not None:
            return int(search.start) * 2 ** (search.max_levels - 1)
        return max(self.cfg.load.concurrency)

    def steps(self) -> list[Step]:
        """Every (level, round) to measure, round-major: all the levels of round 1, then of round 2, ..."""
        return [(point, k) for k in range(1, self.rounds + 1) for point in self.points()]

    def todo(self) -> Iterable[Step]:
        """The (level, round) steps in the order they run: a sweep's as it chooses them."""
        return self.swept() if self.search is not None else self.steps()
