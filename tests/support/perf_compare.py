"""`cellbench perf compare --json` run as a user runs it, for the perf tests: its report, parsed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.base.paths import PROJECT_ROOT
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S


def perf_compare(*args: str) -> dict:
    """The JSON report of `cellbench perf compare --json ARGS`; fails the test on a non-zero exit."""
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "perf", "compare", "--json",
                           "--host-lock-timeout", str(HOST_LOCK_WAIT_S), *args],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict = json.loads(proc.stdout)
    return found
