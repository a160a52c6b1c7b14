"""How busy the CPUs were while a level ran, as the client saw it.

Evidence (`CpuSample`): a snapshot of the process's CPU time, the host's per-CPU busy time, the
event-loop thread's run-queue wait and involuntary switches, and the host's CPU pressure. Two
snapshots around a measured phase say whether a late client was busy itself or was not let run.
"""


from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.host.cpus import placement

_PROC = Path("/proc")


@dataclass(frozen=True)
class CpuSample:
    """What a moment looked like to the client: take one before and one after a phase."""

    wall: float  # time.perf_counter()
    process_cpu_s: float  # time.process_time(): every thread of this process
    cpu_busy_s: dict[int, tuple[float, float]]  # per CPU: (busy, busy + idle) seconds since boot
    cpus: tuple[int, ...] | None  # the CPUs the sampling thread may run on
    run_delay_s: float | None  # sampling thread: time spent runnable, waiting for a CPU
    involuntary_switches: int | None  # sampling thread (Linux) or process: preempted
    pressure_some_s: float | None  # host: time some task waited for a CPU (/proc/pressure/cpu)


def sample() -> CpuSample:
    """A snapshot of the calling thread, its process and the host's CPUs (wall clock taken last)."""
    process_cpu = time.process_time()
    return CpuSample(
        process_cpu_s=process_cpu,
        cpu_busy_s=_cpu_times(),
        cpus=tuple(sorted(os.sched_getaffinity(0))) if placement.supported() else None,
        run_delay_s=_run_delay(),
        involuntary_switches=_involuntary_switches(),
        pressure_some_s=_pressure_some(),
        wall=time.perf_counter(),
    )


@dataclass(frozen=True)
class CpuUse:
    """Two samples apart: how the phase between them used the CPUs."""

    cpu_share: float  # process CPU seconds / wall seconds (1.0 = one core)
    host_cpus: int | None  # CPUs the host counts
    host_busy: float | None  # cores busy host-wide, every process (2.0 = two cores)
    client_cpus: tuple[int, ...] | None  # CPUs the client could run on
    client_cpus_busy: float | None  # busy share of those CPUs, every process (1.0 = all busy)
    run_queue_wait_share: float | None  # the loop thread: waiting for a CPU / wall
    involuntary_switches: int | None
    cpu_pressure_some: float | None  # host: share of the phase some task waited for a CPU


def between(first: CpuSample, last: CpuSample) -> CpuUse:
    """The phase from `first` to `last`; None for evidence either sample lacks."""
    wall = last.wall - first.wall
    if wall <= 0:
        return CpuUse(0.0, None, None, last.cpus, None, None, None, None)

    def per_wall(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else max(0.0, b - a) / wall

    busy = {cpu: (last.cpu_busy_s[cpu][0] - t[0], last.cpu_busy_s[cpu][1] - t[1])
            for cpu, t in first.cpu_busy_s.items() if cpu in last.cpu_busy_s}
    host_busy = _busy_cores(busy.values(), wall)
    mine = [busy[c] for c in (last.cpus or ()) if c in busy] or list(busy.values())
    mine_busy = _busy_cores(mine, wall)
    switches = None
    if first.involuntary_switches is not None and last.involuntary_switches is not None:
        switches = last.involuntary_switches - first.involuntary_switches
    return CpuUse(
        cpu_share=max(0.0, last.process_cpu_s - first.process_cpu_s) / wall,
        host_cpus=len(busy) or None,
        host_busy=host_busy,
        client_cpus=last.cpus,
        client_cpus_busy=None if mine_busy is None else min(1.0, mine_busy / len(mine)),
        run_queue_wait_share=per_wall(first.run_delay_s, last.run_delay_s),
        involuntary_switches=switches,
        cpu_pressure_some=per_wall(first.pressure_some_s, last.pressure_some_s),
    )


def _busy_cores(deltas: Iterable[tuple[float, float]], wall: float) -> float | None:
    """Σ busy / Σ (busy + idle) of `deltas`, in cores (the kernel's tick counts are coarse, so
    the share of counted time, not busy time over wall time)."""
    deltas = list(deltas)
    total = sum(t for _, t in deltas)
    if not deltas or total <= 0:
        return None
    return sum(b for b, _ in deltas) / total * len(deltas)


def _cpu_times() -> dict[int, tuple[float, float]]:
    """Per CPU (by its number): (busy, busy + idle) seconds since boot. Busy counts user, nice,
    system, irq, softirq and steal (a VM's CPU taken by the hypervisor is not the client's)."""
    with contextlib.suppress(OSError, ValueError):
        return _proc_stat()
    try:
        times = psutil.cpu_times(percpu=True)
    except (OSError, psutil.Error):
        return {}
    return {i: (t.user + t.system + getattr(t, "nice", 0.0),
                t.user + t.system + getattr(t, "nice", 0.0) + t.idle) for i, t in enumerate(times)}


def _proc_stat() -> dict[int, tuple[float, float]]:
    """/proc/stat's `cpuN user nice system idle iowait irq softirq steal ...` lines, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[float, float]] = {}
    for line in (_PROC / "stat").read_text().splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        user, nice, system, idle, iowait, irq, softirq, steal = (int(f) for f in (fields + ["0"] * 8)[:8])
        busy = user + nice + system + irq + softirq + steal
        out[int(name[3:])] = (busy / tick, (busy + idle + iowait) / tick)
    if not out:
        raise ValueError("no per-CPU lines in /proc/stat")
    return out


def _run_delay() -> float | None:
    """/proc/thread-self/schedstat's second field: ns this thread spent waiting on a run queue."""
    try:
        return int((_PROC / "thread-self" / "schedstat").read_text().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _involuntary_switches() -> int | None:
    """Times the calling thread (Linux; elsewhere the process) was preempted."""
    with contextlib.suppress(OSError, ValueError):
        for line in (_PROC / "thread-self" / "status").read_text().splitlines():
            if line.startswith("nonvoluntary_ctxt_switches:"):
                return int(line.split(":")[1])
    try:
        return psutil.Process().num_ctx_switches().involuntary
    except (psutil.Error, OSError, AttributeError):
        return None


def _pressure_some() -> float | None:
    """/proc/pressure/cpu `some ... total=US`: seconds in which some task waited for a CPU."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (_PROC / "pressure" / "cpu").read_text().splitlines():
            if line.startswith("some "):
                return int(line.rsplit("total=", 1)[1]) / 1e6
    return None
