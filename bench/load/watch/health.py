"""The client's health over a level's measured phase: its CPU share, its event loop's lag, its
schedule lag, and what the host's CPUs did meanwhile (`bench.core.level_run.ClientHealth`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.core import metrics
from bench.core.level_run import ClientHealth, ConnectionCounts
from bench.core.records import RequestRecord
from bench.host.cpus import usage

_perf = time.perf_counter


@dataclass
class PhaseSamples:
    """(process CPU, wall) and the host's CPUs when the measured phase opened and closed."""

    opened: tuple[float, float] = (0.0, 0.0)
    closed: tuple[float, float] = (0.0, 0.0)
    cpu_opened: usage.CpuSample | None = None
    cpu_closed: usage.CpuSample | None = None

    def open(self) -> float:
        """Sample at the phase's start; returns its wall time (perf_counter)."""
        self.cpu_opened = usage.sample()
        self.opened = (time.process_time(), _perf())
        return self.opened[1]

    def close(self) -> None:
        self.closed = (time.process_time(), _perf())
        self.cpu_closed = usage.sample()

    @property
    def wall_s(self) -> float:
        return self.closed[1] - self.opened[1]

    def cpu_use(self) -> usage.CpuUse | None:
        """How the phase used the CPUs; None when it has no opening or closing sample."""
        if self.cpu_opened is None or self.cpu_closed is None:
            return None
        return usage.between(self.cpu_opened, self.cpu_closed)


def measured_health(phase: PhaseSamples, records: Sequence[RequestRecord], loop_lags: Sequence[float],
                    pinned: bool, connections: ConnectionCounts | None = None) -> ClientHealth:
    """The health of a phase that ran to its end: CPU share = process CPU / wall over the phase,
    the p99s of the loop-lag samples and of the records' schedule lags (in ms), and what the
    level's connections did."""
    wall = phase.wall_s
    lags = [lag for lag in map(metrics.schedule_lag, records) if lag is not None]
    return ClientHealth(
        cpu_share=(phase.closed[0] - phase.opened[0]) / wall if wall > 0 else 0.0,
        loop_lag_p99_ms=_ms(metrics.percentile(loop_lags, 99)),
        schedule_lag_p99_ms=_ms(metrics.percentile(lags, 99)),
        pinned=pinned,
        host=phase.cpu_use(),
        connections=connections,
    )


def unmeasured_health(pinned: bool) -> ClientHealth:
    """The health of a level an interrupt ended: nothing was measured."""
    return ClientHealth(cpu_share=0.0, loop_lag_p99_ms=None, schedule_lag_p99_ms=None, pinned=pinned)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0
