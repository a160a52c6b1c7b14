"""A server's process group: signalling it, and the pid files that outlive a killed session.

Every started group is recorded in a pid file under the cache, so a later session can reap what a
hard-killed session left behind. Only a group whose leader still has the recorded start time, and
whose recording session is gone, is ever signalled: a live session's server and a reused pid that
now belongs to someone else are never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import psutil

from bench.base.paths import cache_root


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group led by `pid`; a group already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _same_process(pid: int, create_time: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - create_time) < 0.01
    except psutil.Error:
        return False


def _pid_dir() -> Path:
    return cache_root() / "servers"


def register(pid: int) -> None:
    """Record the group led by `pid` as started by this session (best effort)."""
    with contextlib.suppress(psutil.Error, OSError):
        d = _pid_dir()
        d.mkdir(parents=True, exist_ok=True)
        proc, owner = psutil.Process(pid), psutil.Process()
        record = {
            "pid": pid,
            "create_time": proc.create_time(),
            "cmd": proc.cmdline(),
            "owner": owner.pid,
            "owner_create_time": owner.create_time(),
        }
        (d / f"{pid}.json").write_text(json.dumps(record))


def unregister(pid: int) -> None:
    with contextlib.suppress(OSError):
        (_pid_dir() / f"{pid}.json").unlink()


def reap_orphans() -> list[str]:
    """Stop server groups that an earlier, hard-killed session started; returns what was reaped."""
    reaped: list[str] = []
    d = _pid_dir()
    if not d.is_dir():
        return reaped
    for entry in d.glob("*.json"):
        try:
            info = json.loads(entry.read_text())
            if _same_process(info["owner"], info["owner_create_time"]):
                continue  # its session is still running: not an orphan
            proc = psutil.Process(info["pid"])
            if abs(proc.create_time() - info["create_time"]) < 0.01:
                signal_group(info["pid"], signal.SIGKILL)
                reaped.append(f"pid {info['pid']}: {' '.join(info['cmd'])[:100]}")
        except (psutil.NoSuchProcess, OSError, ValueError, KeyError):
            pass
        with contextlib.suppress(OSError):
            entry.unlink()
    return reaped
