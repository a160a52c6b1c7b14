"""One level as a closed loop: sequential warm-up requests, then `concurrency` slots that each
send the next measured request as soon as their previous one is over.

Every request is its own task with a per-request timer. The level stops early, cancelling what
is in flight, at its deadline, when the hang watchdog sees no progress, or when the server is
gone; `stop_reason` says which and how far it got. One `ChatClient` per level: a connection per
request, or kept-alive connections reused (`LevelConfig.client.keep_alive`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from bench.core import metrics
from bench.core.level_run import LevelConfig, LevelRun
from bench.core.records import RequestRecord
from bench.load.bodies import asked_max_tokens, encode_bodies
from bench.load.interrupts import retrieve
from bench.load.request import DEADLINE, SERVER_GONE, STALL, TIMEOUT, ChatClient, Flight
from bench.load.watch.health import PhaseSamples, measured_health, unmeasured_health
from bench.load.watch.ticker import Watch
from bench.setup.prompts import Prompt

_perf = time.perf_counter


class ClosedLoopLevel:
    """The state of one level while it runs; `run` drives it, `interrupted_run` salvages it."""

    def __init__(self, cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> None:
        self.cfg = cfg
        self.measured = encode_bodies(cfg, prompts, cfg.requests)
        self.warm = encode_bodies(cfg, warmup_prompts, cfg.warmup, kind="w")
        self.records: list[RequestRecord] = []
        self.warmup_records: list[RequestRecord] = []
        self.started_at = time.time()  # wall clock, for reports
        self.in_flight: dict[asyncio.Task, Flight] = {}
        self.next_index = 0
        self.stop_reason: str | None = None
        self.duration_over = False  # --duration: the measured phase's time is up; nothing more is sent
        self.output_events = 0  # output events received, for progress and the watchdog
        self.failed = 0
        self.finished = 0  # requests over, warm-up included: the watchdog's sign of life
        self.t0 = 0.0  # start of the measured phase
        self.measuring = False
        self.watch = Watch(cfg, self)
        self.client: ChatClient

    @property
    def done(self) -> int:
        return len(self.records)

    async def run(self) -> LevelRun:
        cfg = self.cfg
        self.started_at = time.time()
        loop = asyncio.get_running_loop()
        deadline_timer = None
        if cfg.deadline is not None:
            deadline_timer = loop.call_later(max(0.0, cfg.deadline - _perf()), self._on_deadline)
        phase = PhaseSamples()
        # The slots are the only bound on concurrency; the client's only timer is the level's
        # per-request one (`_request`).
        self.client = ChatClient(cfg.base_url, cfg.client.request_timeout_s, keep_alive=cfg.client.keep_alive,
                                 on_output=self._on_output, on_lost=self.probe_server, headers=cfg.headers)
        try:
            await self._watched(self._phases(phase))
        finally:
            self.client.close()
            if deadline_timer is not None:
                deadline_timer.cancel()
        self.records.sort(key=lambda r: r.index)
        wall = phase.wall_s
        self.watch.report(phase.closed[1], self.output_events / wall if wall > 0 else 0.0)  # the final count
        span = metrics.wall_span(self.records) or (phase.opened[1], phase.opened[1])
        return LevelRun(
            config=cfg,
            records=self.records,
            warmup_records=self.warmup_records,
            t_start=span[0],
            t_end=span[1],
            started_at=self.started_at,
            partial=self.stop_reason is not None,
            stop_reason=self.stop_reason,
            ended_by=None if cfg.duration_s is None else "duration" if self.duration_over else "requests",
            client=measured_health(phase, self.records, self.watch.loop_lags, cfg.client_cpus is not None,
                                   self.client.connections),
        )

    def interrupted_run(self, why: BaseException) -> LevelRun:
        """What the level finished before an interrupt ended it (requests still in flight are not
        in it), so that a Ctrl-C or SIGTERM keeps the measured part of the level it landed in."""
        self.records.sort(key=lambda r: r.index)
        span = metrics.wall_span(self.records) or (self.t0, self.t0)
        return LevelRun(config=self.cfg, records=list(self.records), warmup_records=list(self.warmup_records),
                        t_start=span[0], t_end=span[1], started_at=self.started_at, partial=True,
                        stop_reason=f"interrupted ({str(why) or type(why).__name__})",
                        client=unmeasured_health(self.cfg.client_cpus is not None))

    # ------------------------------------------------------------ phases, slots, requests

    async def _phases(self, phase: PhaseSamples) -> None:
        """Warm-up, then the measured slots. A level stopped in warm-up (watchdog, deadline, a
        server gone) still keeps its warm-up records, and its slots send nothing."""
        await self._warmup()
        self.t0 = phase.open()
        self.measuring = True
        self.output_events = 0  # progress counts the measured phase only, as its elapsed time does
        await self._measure()
        phase.close()

    async def _measure(self) -> None:
        """The measured phase: `concurrency` slots (bench.load.arrivals overrides it: open loop)."""
        await asyncio.gather(*(self._slot(self.t0) for _ in range(self.cfg.concurrency)))

    async def _watched(self, coro: Any) -> None:
        """Run the level's phases beside the ticker from the first warm-up request on. The ticker
        only ever ends by raising (an interrupt can land in it), and that must end the level, not
        sit in a lost task."""
        work = asyncio.ensure_future(coro)
        ticker = asyncio.ensure_future(self.watch.run())
        try:
            done, _ = await asyncio.wait((work, ticker), return_when=asyncio.FIRST_COMPLETED)
            if ticker in done:
                ticker.result()
            await work
        finally:
            ticker.cancel()
            if not work.done():  # interrupted: the slots go down with their requests, unawaited
                work.cancel()
                work.add_done_callback(retrieve)

    async def _warmup(self) -> None:
        for i in range(self.cfg.warmup):
            if not self._may_send():
                break
            flight = await self._request(i, *self.warm[i % len(self.warm)], warmup=True, t_sched=_perf())
            self.warmup_records.append(flight.record)

    async def _slot(self, t_open: float) -> None:
        """One closed-loop slot: the next request goes out when the previous one is over.

        t_sched = the moment the slot opened: level start for the first request, then the moment
        the previous request released its connection (not its [DONE]: a server that is slow to
        close the response holds the slot, and that is not the client's delay)."""
        t_sched = t_open
        while self.next_index < self.cfg.requests and self._may_send():
            i = self.next_index
            self.next_index += 1
            prompt, body = self.measured[i % len(self.measured)]  # = prompts[i % len(prompts)]
            flight = await self._request(i, prompt, body, warmup=False, t_sched=t_sched)
            self.records.append(flight.record)
            self.failed += not flight.record.ok
            t_sched = flight.released_at

    async def _request(self, index: int, prompt: Prompt, body: bytes, *, warmup: bool, t_sched: float,
                       t_admitted: float | None = None, record: RequestRecord | None = None,
                       headers: bytes = b"") -> Flight:
        """One request in flight until it ends; `record`: one made by the caller (a session's turn)."""
        flight = Flight(record or RequestRecord(index=index, prompt_name=prompt.name, warmup=warmup, t_sched=t_sched,
                                                t_admitted=t_admitted, max_tokens=asked_max_tokens(self.cfg, prompt)))
        task = asyncio.ensure_future(self.client.exchange(flight, body, headers))
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.cfg.client.request_timeout_s, self._cancel, task, TIMEOUT)
        self.in_flight[task] = flight
        try:
            await task
        finally:
            timer.cancel()
            del self.in_flight[task]
            self.finished += 1
        return flight

    def _on_output(self, n: int) -> None:
        self.output_events += n

    # ------------------------------------------------------------ stopping

    def _may_send(self) -> bool:
        """False once the level is stopping (checked here too: the deadline timer may lag), or once
        its --duration is up: then what is in flight finishes, and nothing more is sent."""
        if self.stop_reason is None and self.cfg.deadline is not None and _perf() >= self.cfg.deadline:
            self._on_deadline()
        if (self.measuring and not self.duration_over and self.cfg.duration_s is not None
                and _perf() >= self.t0 + self.cfg.duration_s):
            self.duration_over = True
        return self.stop_reason is None and not self.duration_over

    def _cancel(self, task: asyncio.Task, reason: str) -> bool:
        flight = self.in_flight.get(task)
        # A request whose record already failed is ending by itself (it may be the task asking).
        if flight is not None and not task.done() and flight.reason is None and flight.record.error is None:
            flight.reason = reason
            task.cancel()
            return True
        return False

    def _cancel_all(self, reason: str) -> int:
        return sum(self._cancel(task, reason) for task in list(self.in_flight))

    def _on_deadline(self) -> None:
        cfg = self.cfg
        if (self.next_index >= cfg.requests or self.duration_over) and not self.in_flight:
            return  # finished just in time
        phase = "" if self.measuring else " during warm-up"
        self.stop_reason = (
            f"deadline reached{phase}: {self.next_index}/{cfg.requests} measured requests sent, "
            f"{len(self.in_flight)} in flight cancelled"
        )
        self._cancel_all(DEADLINE)

    def on_stall(self, quiet_s: float) -> None:
        """The hang watchdog fired: nothing happened for `quiet_s`."""
        if self.stop_reason is not None:
            return
        span = f"{quiet_s / 60:.0f} min" if quiet_s >= 120 else f"{quiet_s:.0f} s"
        phase = "" if self.measuring else " during warm-up"
        self.stop_reason = (f"no progress for {span}{phase}: no output and no finished request; "
                            f"{len(self.records)}/{self.cfg.requests} measured requests done, "
                            f"{len(self.in_flight)} in flight cancelled")
        self._cancel_all(STALL)

    def probe_server(self) -> None:
        """A server that is gone ends the level at once: what is in flight cannot finish, and every
        request sent after it would only measure a refused connection."""
        if self.stop_reason is not None or self.cfg.server_gone is None:
            return
        gone = self.cfg.server_gone()
        if gone is None:
            return
        done = len(self.records)
        cancelled = self._cancel_all(SERVER_GONE)
        self.stop_reason = f"{gone}; {done}/{self.cfg.requests} measured requests done, {cancelled} in flight cut off"
