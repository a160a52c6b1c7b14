"""The null server's precise pacer: every scheduled chunk written at its due time, to within tens
of microseconds, so that a client's timing error can be read against the schedule.

asyncio's default epoll selector rounds every wait up to a whole millisecond and uvloop's clock
counts milliseconds: either makes the server late by about the errors to be measured. `loop()`
is asyncio's selector loop waiting in `select()` on the epoll descriptor, whose timeout has
microsecond resolution, with the kernel's timer slack cut to a microsecond, so a timer fires
within tens of microseconds of its time. The pacer waits on such a timer for the next due write;
it never spins, so on a shared core the scheduler treats it as the sleeper it is and wakes it
promptly; the server also lets it write what is due before each piece of its own work (`flush`).
How late it wrote each chunk is kept (`stats()`), and when it wrote each stream's chunks
(`log()`): on a busy host the server is late too, and a client's timing error is then read
against what the server actually did.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import select
import selectors
import time
from collections.abc import Callable
from typing import Any

from bench.core.metrics import percentile

PR_SET_TIMERSLACK = 29  # linux/prctl.h

# One scheduled write: called at its due time (time.monotonic(), the loop's clock), it writes and
# returns the stream's next due time, or None when the stream is over.
Step = Callable[[], float | None]


class _PreciseSelector(selectors.DefaultSelector):
    """The platform's best selector (epoll on Linux), but waiting in select() on its own file
    descriptor: readable when any registered one is, with a microsecond timeout, where epoll's
    own wait rounds up to whole milliseconds. Then it collects the events without waiting."""

    def select(self, timeout: float | None = None) -> list:
        if timeout is None or timeout > 0:
            select.select([self.fileno()], [], [], timeout)
        return super().select(0)


def loop() -> asyncio.AbstractEventLoop:
    """An event loop whose timers keep microseconds (`_PreciseSelector`, a 1 us timer slack on
    Linux) and whose waits cost the same for 2 connections or 200."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the default slack (50 us there) stays
        pass
    selector = _PreciseSelector() if hasattr(selectors.DefaultSelector, "fileno") else selectors.SelectSelector()
    return asyncio.SelectorEventLoop(selector)


class Pacer:
    """A heap of (due, step) and one timer on the server's loop, set for the earliest due write;
    `add` schedules a stream's first write, each step schedules the next. A timer callback, not a
    task: a wake costs one loop turn, which is what a chunk costs at 10,000 a second."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Step]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._late: list[float] = []  # seconds past due, per write
        self._streams: dict[int, list[float]] = {}  # stream id: [request received, chunk 1 written, ...]
        self._ids = itertools.count(1)

    def open_stream(self, received: float) -> tuple[int, list[float]]:
        """A new stream's id and its log, which starts with the moment its request was read; the
        server appends the moment it hands each chunk to the kernel."""
        sid = next(self._ids)
        self._streams[sid] = times = [received]
        return sid, times

    def log(self) -> dict[str, list[float]]:
        """Every stream's log since the last call (time.monotonic() seconds), by id; then forgets them."""
        out, self._streams = {str(k): v for k, v in self._streams.items()}, {}
        return out

    def add(self, due: float, step: Step) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), step))
        if self._timer is None or due < self._timer.when():
            self._arm()

    def flush(self) -> None:
        """Write every chunk that is due now. Called on the timer and by the server before any
        other work (a connection accepted, a request read), so a burst of new requests delays a
        due write by one callback, not by the whole burst."""
        heap, clock = self._heap, time.monotonic
        while heap and heap[0][0] <= clock():
            due, _, step = heapq.heappop(heap)
            self._late.append(clock() - due)
            following = step()
            if following is not None:
                heapq.heappush(heap, (following, next(self._seq), step))

    def _fire(self) -> None:
        self._timer = None
        self.flush()
        if self._heap:
            self._arm()

    def _arm(self) -> None:
        """The one timer, set for the earliest due write (the loop's clock is time.monotonic())."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(self._heap[0][0], self._fire)

    def stats(self, reset: bool = True) -> dict[str, Any]:
        """Lateness of the writes since the last reset, microseconds: `n`, `p50_us`, `p99_us`,
        `max_us`. Lateness = the moment the write began - its scheduled time."""
        late = sorted(x * 1e6 for x in self._late)
        if reset:
            self._late = []
        if not late:
            return {"n": 0}
        return {"n": len(late), "p50_us": round(percentile(late, 50) or 0.0, 1),
                "p99_us": round(percentile(late, 99) or 0.0, 1), "max_us": round(late[-1], 1)}
