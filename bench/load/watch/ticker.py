"""The level's 10 ms ticker: the hang watchdog, the server probe, loop-lag sampling and progress.

From the first warm-up request on, every tick checks for a stall (no output event and no
finished request for `hang_s` while a request is in flight: an open-loop level waiting
for its next arrival is idle, not stalled) and, four times a second, whether the server is gone.
In the measured phase each tick also records how late it woke up (the event loop's lag) and,
about once a second, reports `Progress`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from bench.core.level_run import LevelConfig, Progress

_perf = time.perf_counter
TICK_S = 0.010  # event-loop lag probe period
PROGRESS_S = 1.0
PROBE_S = 0.25  # how often LevelConfig.server_gone is asked
_log = logging.getLogger(__name__)


class Watched(Protocol):
    """What the ticker reads of a level, and what it asks the level to do."""

    output_events: int  # output events received (the measured phase's only, once it opened)
    finished: int  # requests over, warm-up included
    measuring: bool  # the measured phase has opened
    t0: float  # its start (perf_counter)
    @property
    def in_flight(self) -> Mapping[Any, Any]: ...  # the requests in flight

    @property
    def done(self) -> int: ...  # measured requests finished

    @property
    def failed(self) -> int: ...

    def on_stall(self, quiet_s: float) -> None: ...

    def probe_server(self) -> None: ...


class Watch:
    """Ticks beside one level; `run` only ever ends by raising (an interrupt can land in it)."""

    def __init__(self, cfg: LevelConfig, level: Watched) -> None:
        self.cfg = cfg
        self.level = level
        self.loop_lags: list[float] = []  # seconds, one per tick of the measured phase
        self._progress = cfg.progress

    async def run(self) -> None:
        level, cfg = self.level, self.cfg
        start = _perf()
        seen, seen_at = (level.output_events, level.finished), start
        next_probe = start
        last: tuple[float, int] | None = None  # (time, output events) of the last report
        while True:
            expected = _perf() + TICK_S
            await asyncio.sleep(TICK_S)
            now = _perf()
            if (level.output_events, level.finished) != seen or not level.in_flight:
                seen, seen_at = (level.output_events, level.finished), now
            elif cfg.hang_s is not None and now - seen_at >= cfg.hang_s:
                level.on_stall(now - seen_at)
            if cfg.server_gone is not None and now >= next_probe:
                next_probe = now + PROBE_S
                level.probe_server()
            if not level.measuring:
                continue
            if last is None:  # the measured phase opened: progress counts from its start, as elapsed does
                last = (level.t0, 0)
            self.loop_lags.append(max(0.0, now - expected))
            if now - last[0] >= PROGRESS_S:
                self.report(now, (level.output_events - last[1]) / (now - last[0]))
                last = (now, level.output_events)

    def report(self, now: float, output_tps: float) -> None:
        """Call the progress callback; a broken callback is dropped, never fatal to the level."""
        if self._progress is None:
            return
        level = self.level
        try:
            self._progress(Progress(level.done, self.cfg.requests, level.failed, output_tps, now - level.t0,
                                    level.output_events))
        except Exception:  # noqa: BLE001
            self._progress = None
            _log.exception("progress callback failed; disabled for the rest of the level")
