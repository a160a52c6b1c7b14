"""The Linux kernel's account of OOM kills: its log, read without blocking, and the vmstat counter.

The log comes from /dev/kmsg (one record per read, with a timestamp in microseconds since boot)
or, where that cannot be opened, from `dmesg`. `kernel_kills` picks out the OOM-killer reports
that concern a set of pids or a memory cgroup:
`Out of memory: Killed process 1234 (name)`, `Memory cgroup out of memory: Killed process 1234
(name)`, with the `oom-kill:...,pid=1234,` line before it and the `oom_reaper` line after it.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

CLOCK_SLACK_S = 2.0  # kernel timestamps (local_clock) against time.monotonic()

_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_OOM_KILL = re.compile(r"oom-kill:(.*)$")
_REAPED = re.compile(r"oom_reaper: reaped process (\d+) \(([^)]*)\)")


@dataclass(frozen=True)
class KernelLine:
    t: float | None  # seconds since boot, the kernel's clock
    text: str


def read_kernel_log() -> tuple[list[KernelLine], str | None]:
    """Every record in the kernel's ring buffer, and why it could not be read (None when it was)."""
    lines, why = _read_kmsg()
    if lines is not None:
        return lines, None
    lines, why_dmesg = _read_dmesg()
    if lines is not None:
        return lines, None
    return [], f"{why}; {why_dmesg}"


def _read_kmsg(path: str = "/dev/kmsg") -> tuple[list[KernelLine] | None, str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    out: list[KernelLine] = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten while we read: go on from the next
                continue
            except OSError as exc:
                return (out or None), f"cannot read {path}: {exc.strerror}"
            if not record:
                break
            head, _, rest = record.decode("utf-8", "replace").partition(";")
            message = rest.split("\n", 1)[0]
            fields = head.split(",")
            try:
                t = int(fields[2]) / 1e6
            except (IndexError, ValueError):
                t = None
            out.append(KernelLine(t, _unescape(message)))
    finally:
        os.close(fd)
    return out, ""


def _unescape(text: str) -> str:
    return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


_DMESG_LINE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")


def _read_dmesg() -> tuple[list[KernelLine] | None, str]:
    try:
        done = subprocess.run(["dmesg"], check=False, capture_output=True, text=True, timeout=10, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"dmesg: {exc}"
    if done.returncode != 0:
        return None, f"dmesg: {done.stderr.strip() or f'exit code {done.returncode}'}"
    out = []
    for line in done.stdout.splitlines():
        m = _DMESG_LINE.match(line)
        out.append(KernelLine(float(m.group(1)), m.group(2)) if m else KernelLine(None, line))
    return out, ""


@dataclass
class KernelKill:
    pid: int
    process: str | None = None
    line: str | None = None  # the "Killed process" line
    lines: list[str] = field(default_factory=list)
    memcg: str | None = None
    t: float | None = None


def kernel_kills(
    lines: Iterable[KernelLine], *, pids: Iterable[int] = (), memcg: str | None = None, since: float | None = None
) -> list[KernelKill]:
    """OOM kills in the kernel log of one of `pids`, or of any process in cgroup `memcg`.

    `since` (kernel clock, seconds since boot) drops older reports, so a reused pid is not
    blamed for an earlier process's death.
    """
    wanted = set(pids)
    kills: dict[int, KernelKill] = {}

    def ours(pid: int, cg: str | None) -> bool:
        if pid in wanted:
            return True
        return bool(memcg and cg and (cg == memcg or cg.startswith(memcg.rstrip("/") + "/")))

    for kl in lines:
        if since is not None and kl.t is not None and kl.t < since - CLOCK_SLACK_S:
            continue
        text = kl.text
        if m := _OOM_KILL.search(text):
            info = dict(part.split("=", 1) for part in m.group(1).split(",") if "=" in part)
            try:
                pid = int(info.get("pid", ""))
            except ValueError:
                continue
            if ours(pid, info.get("task_memcg")):
                wanted.add(pid)  # the "Killed process" line that follows is ours too
                kill = kills.setdefault(pid, KernelKill(pid))
                kill.memcg = info.get("task_memcg")
                kill.process = kill.process or info.get("task")
                kill.lines.append(text)
                kill.t = kill.t or kl.t
        elif m := _KILLED.search(text):
            pid = int(m.group(1))
            if ours(pid, None):
                kill = kills.setdefault(pid, KernelKill(pid))
                kill.process, kill.line = m.group(2), text
                kill.lines.append(text)
                kill.t = kill.t or kl.t
        elif (m := _REAPED.search(text)) and int(m.group(1)) in kills:
            kills[int(m.group(1))].lines.append(text)
    return list(kills.values())


def vmstat_oom_kills() -> int | None:
    """The system-wide OOM-kill counter (Linux >= 4.13), or None."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return None
