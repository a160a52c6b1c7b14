"""Server fixtures: a host-wide lock per cell, and a launcher that can never leak a server.

Cleanup is registered before anything that can block: a server joins the fixture's list right
after `Popen`, before the readiness wait, so a timeout or Ctrl-C during start still stops it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.setup.adapter import Adapter, ServeCommand
from bench.run.cell import CellOutcome, Launcher
from bench.base.paths import host_lock_path
from bench.plugins.cells import settle_before_call
from bench.run.server import ServerProcess
from bench.core.verdicts import CellVerdict, Verdict


@pytest.fixture
def host_lock(request: pytest.FixtureRequest):
    """Hold the host-wide lock for the whole cell: two cells never share a machine. The holder
    writes its pid, command line and start time into the lock file. A cell that waits
    --host-lock-timeout seconds in vain is settled `failed` (naming the holder and how long it
    has held the lock) and its body never runs; the fixture then yields None."""
    timeout = float(request.config.getoption("host_lock_timeout"))
    path = host_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        if not _wait_for_lock(handle, timeout):
            reason = f"host busy: waited {timeout:g} s for the host lock {path}, held by {_holder(handle)}"
            settle_before_call(request.node, CellOutcome(CellVerdict(Verdict.FAILED, reason), None))
            yield None
            return
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_holder_record()) + "\n")
        handle.flush()
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wait_for_lock(handle, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)


def _holder_record() -> dict:
    """What the lock file says about the process holding it."""
    return {"pid": os.getpid(), "command": shlex.join(sys.orig_argv), "since": time.time(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _holder(handle) -> str:
    """'pid P (command) for 2 min 5 s', from the lock file the holder wrote."""
    handle.seek(0)
    text = handle.read().strip()
    try:
        record = json.loads(text)
        command = record["command"] if len(record["command"]) <= 200 else record["command"][:197] + "..."
        return f"pid {record['pid']} ({command}) for {_duration(time.time() - float(record['since']))}"
    except (ValueError, KeyError, TypeError):  # an older cellbench's line, or a holder still writing it
        return f"an unknown holder (the lock file reads {text!r})"


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


@contextmanager
def launching() -> Iterator[Launcher]:
    """A `bench.run.cell.Launcher` for the block: every server it starts is stopped when the block ends."""
    started: list[ServerProcess] = []

    def launch(command: ServeCommand, adapter: Adapter, host: str, port: int, log_path: Path,
               memory_limit_bytes: int | None = None, budget_s: float | None = None,
               stall_timeout_s: float | None = None) -> ServerProcess:
        server = ServerProcess(
            command,
            host=host,
            port=port,
            ready_path=adapter.ready_path,
            startup_timeout_s=adapter.startup_timeout_s,
            log_path=log_path,
            memory_limit_bytes=memory_limit_bytes,
        )
        started.append(server)
        server.start()
        try:
            server.wait_ready(budget_s=budget_s, stall_timeout_s=stall_timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    try:
        yield launch
    finally:
        for server in reversed(started):
            server.stop()


@pytest.fixture
def server_launcher(host_lock):
    """The launcher of one cell, which holds the host for its whole life."""
    with launching() as launch:
        yield launch
