"""Which CPUs the client and the server run on, and how busy the CPUs were while a level ran.

Placement (Linux `sched_setaffinity`; macOS has no affinity API): `--client-cpus` pins the
whole pytest process for the duration of each level, `--server-cpus` pins the server before it
execs, so every process and thread it starts inherits the mask. `auto` (the default for both)
decides per host, see `resolve`.

Evidence (`CpuSample`): a snapshot of the process's CPU time, the host's per-CPU busy time, the
event-loop thread's run-queue wait and involuntary switches, and the host's CPU pressure. Two
snapshots around a measured phase say whether a late client was busy itself or was not let run.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import psutil

AUTO_MIN_CPUS = 4  # below this, one CPU for the client would take a third or more of the server's
_PROC = Path("/proc")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")  # one item of a CPU list: 3 or 0-2


class AffinityError(ValueError):
    """A CPU list that cannot be applied here; the message says why and what would work."""


def supported() -> bool:
    """True where a process's CPU affinity can be set (Linux)."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def usable_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (its affinity mask: a container's cpuset included)."""
    if supported():
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def parse_cpus(text: str) -> tuple[int, ...]:
    """`0-3,6` -> (0, 1, 2, 3, 6), as `taskset -c` reads it."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        match = _RANGE.fullmatch(part)
        if match is None or int(match[2] or match[1]) < int(match[1]):
            raise AffinityError(f"not a CPU list: {text!r} (e.g. 3, 0-2 or 0,2-3)")
        cpus.update(range(int(match[1]), int(match[2] or match[1]) + 1))
    return tuple(sorted(cpus))


def format_cpus(cpus: Iterable[int]) -> str:
    """(0, 1, 2, 5) -> `0-2,5`."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


class CpuAffinity(TypedDict):
    """A result's `run_config.cpu_affinity`: `Placement.to_json` (bench.core.result.model names it too)."""

    client: list[int] | None
    server: list[int] | None
    how: str


@dataclass(frozen=True)
class Placement:
    """Where the client and the server run; None: wherever the kernel puts them."""

    client: tuple[int, ...] | None = None
    server: tuple[int, ...] | None = None
    how: str = "off"  # how it was decided, for the result: "explicit", "auto: ...", "off: ..."

    def to_json(self) -> CpuAffinity:
        return {"client": None if self.client is None else list(self.client),
                "server": None if self.server is None else list(self.server),
                "how": self.how}


def resolve(client: str, server: str, *, endpoint: bool = False, gpu: bool = False,
            cpus: tuple[int, ...] | None = None) -> Placement:
    """The placement that `--client-cpus CLIENT --server-cpus SERVER` ask for on this host.

    Each is a CPU list, `off`, or `auto`. An explicit list on one side and `auto` on the other
    gives the other side the remaining CPUs. Both `auto`: on a host with at least 4 usable CPUs,
    no GPU and a server of our own, the client gets the last CPU and the server the rest (a
    CPU server's threads fill every core, and a client that waits for a core stamps its wait
    into TTFT; a quarter or less of the cores is the price). Otherwise off: on 2 or 3 CPUs
    that price is a third to a half of the server, on a GPU host the server's CPU threads
    rarely fill the cores, and an --endpoint server is not ours to place.
    Raises AffinityError for lists this host cannot apply."""
    usable = usable_cpus() if cpus is None else cpus
    wanted = {"client": client.strip().lower(), "server": server.strip().lower()}
    explicit = {side: v for side, v in wanted.items() if v not in ("auto", "off")}
    if explicit and not supported():
        raise AffinityError(f"--{next(iter(explicit))}-cpus: {platform.system()} has no CPU affinity API; "
                            f"only auto or off work here")
    if endpoint and "server" in explicit:
        raise AffinityError("--server-cpus pins a server cellbench starts; an --endpoint server is not ours: "
                            "pin it where you start it (e.g. taskset -c LIST)")
    lists = {side: _usable_list(side, text, usable) for side, text in explicit.items()}
    if not supported():
        return Placement(how=f"off: {platform.system()} has no CPU affinity API")
    if lists:
        return _complete(lists, wanted, usable, endpoint)
    if "off" in wanted.values():
        return Placement(how="off")
    if endpoint:
        return Placement(how="auto: off with --endpoint (its server is not ours to place)")
    if gpu:
        return Placement(how="auto: off on a GPU host")
    if len(usable) < AUTO_MIN_CPUS:
        return Placement(how=f"auto: off with {len(usable)} CPUs (one for the client would cost the server "
                             f"{1 / len(usable):.0%} of them); --client-cpus and --server-cpus trade it")
    return Placement(client=usable[-1:], server=usable[:-1],
                     how=f"auto: client on CPU {usable[-1]}, server on CPUs {format_cpus(usable[:-1])}")


def _usable_list(side: str, text: str, usable: tuple[int, ...]) -> tuple[int, ...]:
    try:
        cpus = parse_cpus(text)
    except AffinityError as exc:
        raise AffinityError(f"--{side}-cpus: {exc}") from None
    outside = sorted(set(cpus) - set(usable))
    if outside:
        raise AffinityError(f"--{side}-cpus {text}: CPU {format_cpus(outside)} is not available to this process "
                            f"(usable: {format_cpus(usable)})")
    return cpus


def _complete(lists: dict[str, tuple[int, ...]], wanted: dict[str, str], usable: tuple[int, ...],
              endpoint: bool) -> Placement:
    """One or both sides given as lists: an `auto` side gets the CPUs the other leaves."""
    placed = dict(lists)
    for side, value in wanted.items():
        if side in placed or value != "auto" or (side == "server" and endpoint):
            continue
        other = placed["client" if side == "server" else "server"]
        rest = tuple(c for c in usable if c not in other)
        if not rest:
            raise AffinityError(f"--{side}-cpus auto: the other side takes every usable CPU "
                                f"({format_cpus(usable)}); give --{side}-cpus a list or off")
        placed[side] = rest
    return Placement(client=placed.get("client"), server=placed.get("server"), how="explicit")


# ------------------------------------------------------------------ applying it


def _threads() -> list[int]:
    """The ids of this process's threads (Linux), else just the process."""
    try:
        return [int(tid) for tid in os.listdir(_PROC / "self" / "task")]
    except OSError:
        return [0]


@contextlib.contextmanager
def pinned(cpus: tuple[int, ...] | None) -> Iterator[tuple[int, ...] | None]:
    """Run the block with every thread of this process on `cpus` (threads started inside it
    inherit the mask); each thread gets its own mask back afterwards. Yields the CPUs the
    calling thread may run on inside the block (None where affinity is not supported)."""
    if cpus is None or not supported():
        yield usable_cpus() if supported() else None
        return
    before: dict[int, set[int]] = {}
    try:
        for tid in _threads():
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                mask = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cpus)
                before[tid] = mask
        yield tuple(sorted(os.sched_getaffinity(0)))
    finally:
        for tid, mask in before.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, mask)


@contextlib.contextmanager
def inherited(cpus: tuple[int, ...] | None) -> Iterator[None]:
    """Processes started inside the block begin on `cpus`: a child inherits the mask of the
    thread that forks it, before it execs, and passes it on to its own children and threads.
    Only the calling thread's mask changes, and only for the block."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:  # a CPU outside the container's cpuset, or offline
        raise AffinityError(f"cannot run on CPUs {format_cpus(cpus)}: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# ------------------------------------------------------------------ evidence


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
        cpus=tuple(sorted(os.sched_getaffinity(0))) if supported() else None,
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
