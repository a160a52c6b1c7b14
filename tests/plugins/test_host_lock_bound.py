"""The suite's bound on another session's host lock (tests/conftest.py, tests/support/busy.py): a
pytest session a test starts, naming no --host-lock-timeout of its own, waits HOST_LOCK_WAIT_S for
a lock someone else holds (HOST_LOCK_WAIT_S, or the bound this run named), then fails its cell
naming the holder, instead of the product's hour; and the host lock `make test`'s two workers hold
shared (tests/support/workers.py)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from typing import IO

import psutil
import pytest

from bench.base.clock import now_iso
from bench.base.paths import PROJECT_ROOT
from bench.host.ports import free_port
from bench.plugins.options import settings
from tests.cells.test_open_loop_cells import private_cache
from tests.run.test_endpoint import write_profile
from tests.support.workers import HostBusy, host_shared


@pytest.mark.integration
def test_a_session_a_test_starts_gives_up_on_a_held_host_lock_naming_the_holder(tmp_path, pytestconfig):
    # The suite hands its bound (HOST_LOCK_WAIT_S unless this run named its own) to every session a test
    # starts through PYTEST_ADDOPTS; the session below gets a bound of a few seconds the same way, so the
    # test waits those, not a minute.
    given = settings(pytestconfig).budget.host_lock_timeout_s
    assert f"--host-lock-timeout {given:g}" in os.environ["PYTEST_ADDOPTS"]
    bound = 3.0
    addopts = os.environ["PYTEST_ADDOPTS"].replace(f"--host-lock-timeout {given:g}", f"--host-lock-timeout {bound:g}")
    cache = private_cache(tmp_path)  # its own host lock: the real one may be another session's
    lock = cache / "host.lock"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat",
           f"--endpoint=http://127.0.0.1:{free_port()}/v1", f"--model={write_profile(tmp_path)}",
           f"--results-dir={tmp_path / 'results'}"]
    with lock.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(json.dumps({"pid": os.getpid(), "command": "a benchmark beside the suite", "since": time.time(),
                                 "started_at": now_iso()}) + "\n")
        handle.flush()
        # Without the bound the session would wait an hour: this timeout fails the test long before.
        done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=bound + 300,
                              env={**os.environ, "CELLBENCH_CACHE": str(cache), "PYTEST_ADDOPTS": addopts},
                              stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    said = (f"host busy: waited {bound:g} s for the host lock {lock}, "
            f"held by pid {os.getpid()} (a benchmark beside the suite) for ")
    assert said in out, out[-3000:]


# ------------------------------------------------------------------ the suite's workers share the host


def _hold_exclusive(path, record: dict) -> IO[str]:
    handle = path.open("a+")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    handle.write(json.dumps(record) + "\n")
    handle.flush()
    return handle


def test_the_workers_share_the_host_lock_and_keep_other_sessions_off_it(tmp_path):
    lock = tmp_path / "host.lock"
    me = psutil.Process()
    with host_shared(lock, 1.0, controller=me.pid), host_shared(lock, 1.0, controller=me.pid):  # both workers
        record = json.loads(lock.read_text())  # whoever waits is told the suite holds the host
        assert (record["pid"], record["since"]) == (me.pid, me.create_time())
        assert record["command"] == " ".join(me.cmdline())
        with lock.open("a+") as other, pytest.raises(BlockingIOError):  # a cell of another session waits
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with lock.open("a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # and gets the host once the tests are done


def test_a_worker_gives_up_on_another_sessions_host_lock_naming_the_holder(tmp_path):
    lock = tmp_path / "host.lock"
    holder = _hold_exclusive(lock, {"pid": 4242, "command": "a benchmark beside the suite", "since": time.time() - 90})
    try:
        started = time.monotonic()
        with pytest.raises(HostBusy) as caught, host_shared(lock, 1.0, controller=os.getpid()):
            pass
        assert 1.0 <= time.monotonic() - started
        assert re.fullmatch(rf"host busy: waited 1 s for the host lock {re.escape(str(lock))}, held by pid 4242 "
                            r"\(a benchmark beside the suite\) for 9\d s", str(caught.value)), caught.value
    finally:
        holder.close()
