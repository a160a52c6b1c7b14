"""The host a perf measurement runs on: which CPUs the client and the server get (`cores`), the CPU
the hypervisor took meanwhile (`steal_s`), and the host lock every cell holds, held while measuring
so that no cell runs beside the measurement (`host_lock`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.base import clock
from bench.base.paths import host_lock_path


def cores(pin: bool) -> tuple[int | None, int | None]:
    """(client CPU, server CPU): the first two usable CPUs when pinning and there are two."""
    usable = sorted(os.sched_getaffinity(0))
    return (usable[0], usable[1]) if pin and len(usable) >= 2 else (None, None)


def steal_s() -> float | None:
    """Seconds of CPU the hypervisor has taken from this VM since boot, all CPUs (/proc/stat's
    8th `cpu` field; None where there is none)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else None
    except (OSError, ValueError):
        return None


def ms_between(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else (b - a) * 1e3


@contextlib.contextmanager
def host_lock(timeout_s: float) -> Iterator[None]:
    """Hold the host-wide lock every cell holds (bench.base.paths.host_lock_path) while measuring:
    a cell beside the comparison would be measured too. Raises TimeoutError after `timeout_s`."""
    path = host_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with path.open("a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"waited {timeout_s:g} s for the host lock {path}") from None
                time.sleep(0.5)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "command": shlex.join(sys.orig_argv), "since": time.time(),
                                 "started_at": clock.now_iso()}) + "\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
