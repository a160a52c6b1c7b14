"""Which CPUs the client and the server run on (Linux `sched_setaffinity`; macOS has no affinity
API): `--client-cpus` pins the whole pytest process for the duration of each level,
`--server-cpus` pins the server before it execs, so every process and thread it starts inherits
the mask. `auto` (the default for both) decides per host, see `resolve`. How busy the CPUs were
while a level ran: bench.host.cpus.usage."""

from __future__ import annotations

import contextlib
import os
import platform
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypedDict

from bench.base.doc import Doc

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
    """--client-cpus / --server-cpus as applied: the CPUs the client (the pytest process, during each level) and
    each server (and everything it starts) ran on."""

    client: Annotated[list[Annotated[int, Doc(minimum=0)]] | None, Doc("The client's CPUs; null: not pinned.")]
    server: Annotated[list[Annotated[int, Doc(minimum=0)]] | None, Doc("The servers' CPUs; null: not pinned.")]
    how: Annotated[str, Doc("explicit, or why auto chose this (e.g. 'auto: off with 2 CPUs ...').")]


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
