"""The suite on xdist workers (`make test` runs it on two): a cellbench cache per worker, and the
host lock the workers share.

Each worker gets a cache of its own (`CELLBENCH_CACHE`: its own host lock and server pid files)
over the shared framework builds and models, so the suite's cells run two at a time, one per
worker, instead of one waiting for the other's lock. The host stays the suite's against everyone
else: while a worker runs an integration test it holds the real host lock *shared* (flock
LOCK_SH), which the other worker may hold too, but which a cell or benchmark of another session
(LOCK_EX) waits for, and which waits for one: after the suite's bound (tests/support/busy.py) the
test fails naming the holder. Both workers write the same holder record, the suite's controller
(its pid, command line and start), so whoever waits for the suite is told who holds the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import psutil

SHARED_PARTS = ("frameworks", "models")  # what every worker's cache links to


def worker_cache(worker: str, shared: Path) -> Path:
    """A fresh cache for `worker` whose framework builds and models are `shared`'s (links)."""
    own = Path(tempfile.mkdtemp(prefix=f"cellbench-{worker}-"))
    for part in SHARED_PARTS:
        (shared / part).mkdir(parents=True, exist_ok=True)
        (own / part).symlink_to(shared / part, target_is_directory=True)
    return own


class HostBusy(Exception):
    """Another session held the host lock for the whole bound."""


def _suite_record(controller: int) -> str:
    """The holder record of the suite: its controller process, identical from every worker."""
    proc = psutil.Process(controller)
    started = proc.create_time()
    return json.dumps({"pid": controller, "command": " ".join(proc.cmdline()), "since": started,
                       "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds")})


def _holder(text: str) -> str:
    try:
        record = json.loads(text)
        return f"pid {record['pid']} ({record['command'][:200]}) for {time.time() - float(record['since']):.0f} s"
    except (ValueError, KeyError, TypeError):
        return f"an unknown holder (the lock file reads {text.strip()!r})"


@contextlib.contextmanager
def host_shared(path: Path, timeout_s: float, controller: int) -> Iterator[None]:
    """Hold the host lock at `path` shared for the block; HostBusy after `timeout_s` of waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with path.open("a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    handle.seek(0)
                    raise HostBusy(f"host busy: waited {timeout_s:g} s for the host lock {path}, "
                                   f"held by {_holder(handle.read())}") from None
                time.sleep(0.5)
        record = _suite_record(controller) + "\n"
        handle.seek(0)
        if handle.read() != record:
            handle.seek(0)
            handle.truncate()
            handle.write(record)
            handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
