"""One level as an open loop: requests arrive on a schedule at a rate, whatever the server does.

The schedule is fixed before the level starts (`schedule`: seeded gamma draws at a rate,
`arrival_offsets`, or rising to it, `ramp_offsets`, so two runs of one rate, burstiness and seed send
at the same offsets from the measured phase's start; or a trace file's own offsets). The dispatcher
sends request i at t0 + offset i; with `max_concurrency` an arrival that finds that many requests
in flight waits, in arrival order, for one to end. Each record keeps the three times apart:
`t_sched` (its arrival), `t_admitted` (when it got its place: the arrival itself when a place was
free by then, else the moment a request in flight released its connection) and `t_send`; TTFT
starts at the send, and the wait is its queueing delay (bench.core.metrics.queue_delay).

Everything else is the closed loop's (`bench.load.closed_loop.ClosedLoopLevel`): warm-up, the request
machinery, deadlines, the hang watchdog, server-gone detection, interrupts, progress.
"""

from __future__ import annotations

import asyncio
import math
import time
from bisect import insort
from collections import deque
from collections.abc import Sequence

import numpy as np

from bench.core.figures.saturation import growth
from bench.core.level_run import LevelConfig, LevelRun, OpenLoop, Ramp
from bench.load.closed_loop import ClosedLoopLevel
from bench.load.interrupts import retrieve
from bench.load.request import SATURATED
from bench.setup.prompts import Prompt

_perf = time.perf_counter
NAP_S = 0.05  # the dispatcher sleeps at most this long at a time, so a stopping level is seen soon
CHECK_S = 0.25  # how often a level under the over-saturation stop looks at its queue


def arrival_offsets(rate: float, burstiness: float, n: int, seed: int) -> tuple[float, ...]:
    """n arrival offsets in seconds, the first at 0: cumulative sums of n - 1 gamma-distributed
    gaps with shape `burstiness` and scale 1 / (rate x burstiness) (mean 1/rate, coefficient of
    variation 1/sqrt(burstiness); burstiness 1 is a Poisson process), drawn from numpy's
    default_rng(seed). rate = inf: every offset 0. The same arguments give the same offsets, and one
    seed at two rates gives the same schedule scaled (a sweep's levels share their randomness)."""
    if not rate > 0 or not burstiness > 0 or n < 0:
        raise ValueError(f"bad schedule: rate={rate}, burstiness={burstiness}, n={n}")
    if n == 0:
        return ()
    if math.isinf(rate):
        return (0.0,) * n
    gaps = np.random.default_rng(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n - 1)
    return (0.0, *(float(x) for x in np.cumsum(gaps)))


def ramp_offsets(rate: float, ramp: Ramp, burstiness: float, n: int, seed: int) -> tuple[float, ...]:
    """n arrival offsets whose rate rises from ramp.start_rate (R0) to `rate` (R) over the requests:
    gap k (k = 0 .. n-2, before request k+1) is the flat schedule's gap drawn at rate 1 (the same
    gamma draws `arrival_offsets` makes, so one seed gives one shape) divided by r_k, where with
    u = k / max(n - 2, 1) r_k = R0 + (R - R0) u (linear) or R0 (R / R0)^u (exponential): the first gap
    at R0, the last at R."""
    if not 0 < ramp.start_rate < rate or math.isinf(rate) or ramp.shape not in ("linear", "exponential"):
        raise ValueError(f"bad ramp: {ramp} to rate {rate}")
    unit = arrival_offsets(1.0, burstiness, n, seed)
    gaps = np.diff(np.asarray(unit))
    u = np.arange(len(gaps)) / max(n - 2, 1)
    r0 = ramp.start_rate
    rates = r0 + (rate - r0) * u if ramp.shape == "linear" else r0 * (rate / r0) ** u
    return (0.0, *(float(x) for x in np.cumsum(gaps / rates)))[:n] if n else ()


def schedule(ol: OpenLoop, n: int) -> tuple[float, ...]:
    """The level's first n arrival offsets: the trace's own, a ramp's or the flat rate's."""
    if ol.trace is not None:
        return ol.trace.offsets[:n]
    if ol.ramp is not None:
        return ramp_offsets(ol.rate, ol.ramp, ol.burstiness, n, ol.seed)
    return arrival_offsets(ol.rate, ol.burstiness, n, ol.seed)


class OpenLoopLevel(ClosedLoopLevel):
    """A level whose measured requests arrive on `cfg.open_loop`'s schedule."""

    def __init__(self, cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> None:
        super().__init__(cfg, prompts, warmup_prompts)
        ol = cfg.open_loop
        if ol is None:
            raise ValueError("an open-loop level needs LevelConfig.open_loop")
        self.ol = ol
        self.cap = ol.max_concurrency
        self.schedule = schedule(ol, cfg.requests)
        self.holding = 0  # requests admitted and not yet released: what the cap counts
        self.peak = 0
        # The cap's free places, each with the moment it became free (in that order; -inf: never
        # taken), and the dispatcher's wait for one when none is free.
        self._free: deque[float] = deque([-math.inf] * (self.cap or 0))
        self._vacancy: asyncio.Future[float] | None = None
        # The over-saturation stop's evidence: when each request ended (offsets from t0, in order),
        # the shortest arrival-to-end time, and what it found (bench.core.figures.saturation).
        self.ends: list[float] = []
        self.shortest: float | None = None
        self.over_saturated: dict[str, object] | None = None

    async def run(self) -> LevelRun:
        run = await super().run()
        run.schedule, run.peak_in_flight, run.over_saturated = self.schedule, self.peak, self.over_saturated
        return run

    def interrupted_run(self, why: BaseException) -> LevelRun:
        run = super().interrupted_run(why)
        run.schedule, run.peak_in_flight = self.schedule, self.peak
        return run

    async def _saturation_watch(self) -> None:
        """Every CHECK_S while requests are due or in flight: the queue's growth; once it shows the
        level over-saturated, nothing more is sent and what is in flight is cut."""
        while self.stop_reason is None:
            await asyncio.sleep(CHECK_S)
            found = growth(self.schedule, self.ends, _perf() - self.t0, self.shortest)
            if found.over_saturated and self.stop_reason is None:
                unsent = len(self.schedule) - self.next_index
                self.stop_reason = found.text()
                cut = self._cancel_all(SATURATED)
                self.over_saturated = {"reason": found.text(), "window_start_s": found.start_s,
                                       "window_end_s": found.end_s, "arrived": found.arrived, "ended": found.ended,
                                       "cut": cut, "unsent": unsent}

    async def _measure(self) -> None:
        """Send each request at its arrival (or when the cap lets it go), each in its own task;
        then wait for them all. A stopping level sends nothing more."""
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task] = []
        watch = asyncio.ensure_future(self._saturation_watch()) if self.ol.stop_over_saturated else None
        try:
            for i, offset in enumerate(self.schedule):
                t_sched = self.t0 + offset
                while (wait := t_sched - _perf()) > 0 and self._may_send():
                    await asyncio.sleep(min(wait, NAP_S))
                if not self._may_send():
                    break
                t_admitted = t_sched
                if self.cap is not None:  # the place it takes became free at `freed_at`
                    if self._free:
                        freed_at = self._free.popleft()
                    else:
                        self._vacancy = loop.create_future()
                        freed_at = await self._vacancy
                        self._vacancy = None
                    t_admitted = max(t_sched, freed_at)
                    if not self._may_send():
                        break
                self.holding += 1
                self.peak = max(self.peak, self.holding)
                self.next_index = i + 1
                tasks.append(asyncio.ensure_future(self._arrival(i, t_sched, t_admitted)))
            if tasks:
                await asyncio.gather(*tasks)
        except BaseException:  # cancelled (an interrupt): the requests go down with the level
            for task in tasks:
                if not task.done():
                    task.cancel()
                    task.add_done_callback(retrieve)
            raise
        finally:
            if watch is not None:
                watch.cancel()
                watch.add_done_callback(retrieve)

    async def _arrival(self, i: int, t_sched: float, t_admitted: float) -> None:
        prompt, body = self.measured[i % len(self.measured)]  # = prompts[i % len(prompts)]
        released_at = None
        try:
            flight = await self._request(i, prompt, body, warmup=False, t_sched=t_sched, t_admitted=t_admitted)
            released_at = flight.released_at
            if flight.reason == SATURATED:  # cut by the over-saturation stop: ours to end, not a failure
                return
            self.records.append(flight.record)
            self.failed += not flight.record.ok
            ended = (flight.record.t_end or _perf()) - self.t0
            insort(self.ends, ended)
            took = ended - (t_sched - self.t0)
            self.shortest = took if self.shortest is None else min(self.shortest, took)
        finally:
            self._release(released_at or _perf())

    def _release(self, at: float) -> None:
        """A request gave its place back at `at`: the waiting arrival, if any, takes it."""
        self.holding -= 1
        if self.cap is None:
            return
        if self._vacancy is not None and not self._vacancy.done():
            self._vacancy.set_result(at)
        else:
            self._free.append(at)
