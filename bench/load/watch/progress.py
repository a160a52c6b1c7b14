"""A cell's progress line during long levels, rate-limited so that CI logs stay readable.

The load generator reports ~once a second (`bench.core.level_run.Progress`); `ProgressLine`
turns that into at most one plain line per `interval_s` per cell, and none at all for a level
that ends sooner: `llamacpp-chat c=8: 40/100 requests (2 failed), 512.3 tok/s, 31 s`. Plain
lines on a terminal too, never `\\r` animation: pytest writes each cell's status on the same
terminal line, and a rewritten line would swallow it.

`terminal_writer` puts the lines on pytest's terminal (capture suspended for the write). An
xdist worker has no terminal of its own: its stdout is the channel to the controller, so its
lines go to its stderr, which the worker inherits from the controller, tagged with the worker id.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import nullcontext

import pytest

from bench.core.level_run import Progress

DEFAULT_INTERVAL_S = 30.0

LevelProgress = Callable[[int | str, Progress], None]
"""What a cell calls with (concurrency, or an open-loop level's label, progress) while a level runs
(see CellConfig.progress)."""


def format_line(label: str, level: int | str, p: Progress, output_tps: float) -> str:
    """`llamacpp-chat c=8: ...` for a concurrency level, `llamacpp-chat 4 req/s: ...` for a rate."""
    failed = f" ({p.failed} failed)" if p.failed else ""
    at = f"c={level}" if isinstance(level, int) else level
    return f"{label} {at}: {p.done}/{p.total} requests{failed}, {output_tps:.1f} tok/s, {p.elapsed_s:.0f} s"


class ProgressLine:
    """A `LevelProgress` that writes at most one line per `interval_s` for one cell.

    A level's first line comes `interval_s` after its measured phase started, so a level shorter
    than that writes nothing; then one line every `interval_s`. The level's last report (all
    requests done) writes nothing either: the cell's verdict follows. The tok/s of a line is the
    output rate since the previous line (or the level start), not of the last second, which
    swings with every batch. `clock` is injectable for tests; the level start is taken as
    `clock() - progress.elapsed_s` at its first report."""

    def __init__(self, label: str, write: Callable[[str], None], *, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.write = write
        self.interval_s = interval_s
        self.clock = clock
        self._level: tuple[int | str, float] | None = None  # (level, elapsed at the last report)
        self._last_line = 0.0  # clock() of the last line, or of the level start
        self._since: tuple[float, int] = (0.0, 0)  # (elapsed, output events) at the last line

    def __call__(self, concurrency: int | str, p: Progress) -> None:
        now = self.clock()
        if self._level is None or self._level[0] != concurrency or p.elapsed_s < self._level[1]:
            self._last_line = now - p.elapsed_s  # a new level (the same concurrency twice restarts elapsed)
            self._since = (0.0, 0)
        self._level = (concurrency, p.elapsed_s)
        if self.interval_s <= 0 or p.done >= p.total or now - self._last_line < self.interval_s:
            return
        span, events = p.elapsed_s - self._since[0], p.output_events - self._since[1]
        self._last_line, self._since = now, (p.elapsed_s, p.output_events)
        self.write(format_line(self.label, concurrency, p, events / span if span > 0 else p.output_tps))


def terminal_writer(config: pytest.Config) -> Callable[[str], None]:
    """Write a line where the user sees it, around pytest's output capture."""
    capman = config.pluginmanager.getplugin("capturemanager")
    workerinput = getattr(config, "workerinput", None)

    def write(line: str) -> None:
        with capman.global_and_fixture_disabled() if capman else nullcontext():
            if workerinput is not None:
                sys.stderr.write(f"[{workerinput.get('workerid', 'worker')}] {line}\n")
                sys.stderr.flush()
                return
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(line)

    return write
