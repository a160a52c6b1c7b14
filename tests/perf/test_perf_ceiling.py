"""`cellbench perf ceiling` against the real null server: every request of every level delivered
and counted, each row naming what limited it. Its figures are recorded, never a pass/fail floor."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.base.paths import PROJECT_ROOT
from tests.support.busy import SESSION_TIMEOUT_S, TEST_TIMEOUT_S


def ceiling(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.cli", "perf", "ceiling", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=SESSION_TIMEOUT_S)


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_every_level_delivers_every_chunk_and_names_its_limit(record_property):
    proc = ceiling("--concurrency", "4,16", "--tokens", "5", "--requests-per-stream", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert [r["concurrency"] for r in doc["rows"]] == [4, 16]
    for r in doc["rows"]:
        assert (r["requests"], r["failed"], r["procs"]) == (2 * r["concurrency"], 0, 1), r
        assert r["chunks_per_s"] == pytest.approx(5 * r["requests_per_s"])  # 5 chunks a request, all delivered
        assert r["limited_by"] in {"client", "server", "client and server", "neither"}
        record_property(f"c{r['concurrency']}_chunks_per_s", round(r["chunks_per_s"]))


@pytest.mark.session
def test_more_client_processes_than_free_cpus_is_refused_naming_the_count():
    usable = len(os.sched_getaffinity(0))
    proc = ceiling("--concurrency", "4", "--client-procs", str(usable), "--requests-per-stream", "1")
    assert proc.returncode != 0
    assert f"--client-procs {usable} needs {usable + 1} CPUs" in proc.stderr
