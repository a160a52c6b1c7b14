"""The suite's bound on another session's host lock (tests/conftest.py, tests/support/busy.py): a
pytest session a test starts, naming no --host-lock-timeout of its own, waits HOST_LOCK_WAIT_S for
a lock someone else holds (HOST_LOCK_WAIT_S, or the bound this run named), then fails its cell
naming the holder, instead of the product's hour."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest

from bench.base.clock import now_iso
from bench.base.paths import PROJECT_ROOT
from bench.host.ports import free_port
from bench.plugins.options import settings
from tests.cells.test_open_loop_cells import private_cache
from tests.run.test_endpoint import write_profile


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
