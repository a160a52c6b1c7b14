"""`--client-procs` in real cells: llama-server on the built-in tiny model, driven by two client
processes, through the pytest layer and through `run_cell` with the server killed mid-level."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.client_settings import ClientSettings, ProcsChoice
from bench.core.result.files import new_run_id, validate
from bench.run.cell import CellConfig, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.setup import profiles
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]


def test_a_cell_on_two_client_processes_records_each_and_every_request(tmp_path, llama_server):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--results-dir", str(tmp_path / "results"),
           "--host-lock-timeout", str(HOST_LOCK_WAIT_S), "-m", "chat", "-k", "llamacpp", "--requests", "12",
           "--concurrency", "4", "--warmup", "2", "--port", "0", "--client-procs", "2"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = [p for p in (tmp_path / "results").rglob("llamacpp_*.json")]
    result = json.loads(path.read_text())
    validate(result)
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat")
    (level,) = result["levels"]
    assert level["successful"] == 12 and level["warmup"]["requests"] == 2
    client = level["client"]
    assert client["procs"] == 2 and client["procs_how"] == "--client-procs 2" and len(client["workers"]) == 2
    records = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    assert sorted(r["index"] for r in measured) == list(range(12))
    assert [r["index"] for r in records if r["warmup"]] == [0, 1]
    assert level["output_tokens_total"] == sum(r["usage_completion_tokens"] for r in measured)


def test_a_server_killed_mid_level_stops_both_client_processes(tmp_path, server_launcher):
    killed = threading.Event()
    started = []

    def launch(command, adapter, host, port, log_path, **options):
        started.append(server_launcher(command, adapter, host, port, log_path, **options))
        return started[-1]

    def kill_after_two_requests(concurrency, progress):
        if progress.done >= 2 and not killed.is_set():
            os.killpg(started[0].proc.pid, signal.SIGKILL)
            killed.set()

    cfg = CellConfig(
        framework="llamacpp", split="chat", profile=profiles.load_profile("tiny"), results_root=tmp_path,
        run_id=new_run_id(), load=LoadSettings(concurrency=(4,), requests=2000, warmup=0),
        server=ServerSettings(port=0), client=ClientSettings(request_timeout_s=600, client_procs=ProcsChoice(count=2)),
        progress=kill_after_two_requests,
    )
    outcome = run_cell(cfg, launch)
    assert killed.is_set()
    result = json.loads(outcome.result_path.read_text())
    validate(result)
    (level,) = result["levels"]
    assert level["client"]["procs"] == 2 and level["partial"] and level["num_requests"] < 2000
    assert set(level["errors"]) <= {"connect", "truncated"} and level["errors"], level["errors"]
    assert outcome.verdict.verdict.value == "failed"
    assert re.fullmatch(r"server exited with signal SIGKILL during c=4 after \d+ of 2000 requests",
                        outcome.verdict.reason), outcome.verdict.reason
