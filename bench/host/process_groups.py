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
import time
from pathlib import Path

import psutil

from bench.base.paths import cache_root


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group led by `pid`; a group already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def live_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that have not exited (a zombie has: only its parent's reaping is left)."""
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.info["pid"]) == pgid:
                members.append(proc.info["pid"])
    return members


def wait_group_gone(pgid: int, timeout_s: float) -> list[int]:
    """Wait up to `timeout_s` for every member of a group sent SIGKILL to exit; the ones left.

    A SIGKILL is acted on when its process next runs: on a busy host a child of the leader can
    outlive the leader's exit by a few scheduler ticks, and a caller told "stopped" must not find
    it still running."""
    deadline = time.monotonic() + timeout_s
    while (left := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def recorded_groups(manifest: Path | None, born_after: float) -> list[int]:
    """The process groups a server recorded in `manifest` (one id per line) that still have a
    member started no earlier than `born_after` (the server's psutil create time): a group id the
    kernel has since reused for someone else's older process is never among them."""
    if manifest is None:
        return []
    try:
        lines = manifest.read_text(encoding="utf-8").split()
    except OSError:
        return []
    wanted = {int(line) for line in lines if line.isdigit()}
    alive: set[int] = set()
    for proc in psutil.process_iter(["pid", "create_time"]):
        with contextlib.suppress(psutil.Error, OSError):
            pgid = os.getpgid(proc.info["pid"])
            if pgid in wanted and proc.info["create_time"] >= born_after:
                alive.add(pgid)
    return sorted(alive)


def stop_recorded_groups(manifest: Path | None, born_after: float, grace_s: float) -> list[int]:
    """SIGTERM the groups a server recorded, give them `grace_s`, SIGKILL what is left."""
    groups = recorded_groups(manifest, born_after)
    for pgid in groups:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while groups and time.monotonic() < deadline and recorded_groups(manifest, born_after):
        time.sleep(0.2)
    for pgid in recorded_groups(manifest, born_after):
        signal_group(pgid, signal.SIGKILL)
    return groups


def running_since(pid: int, at_or_before: float) -> bool:
    """Whether process `pid` runs (not a zombie) and started no later than `at_or_before` (epoch
    seconds): the process that wrote something at that moment, not a later one given its pid."""
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= at_or_before + 1.0
    except psutil.Error:
        return False


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


def stop_own() -> list[int]:
    """SIGKILL every server group this process registered and still runs (a session forced to quit
    at once: its fixtures will not stop them); returns their leaders' pids."""
    stopped: list[int] = []
    d = _pid_dir()
    for entry in d.glob("*.json") if d.is_dir() else ():
        with contextlib.suppress(psutil.Error, OSError, ValueError, KeyError):
            info = json.loads(entry.read_text())
            if info["owner"] == os.getpid() and _same_process(info["pid"], info["create_time"]):
                signal_group(info["pid"], signal.SIGKILL)
                stopped.append(info["pid"])
                entry.unlink()
    return stopped


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
