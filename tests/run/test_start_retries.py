"""Which start failures are retried once, on real processes (tests/support/flaky_start.py).

A server that bound its port, dropped the readiness polls' connections and exited before any HTTP
answer is transient: the cell starts it once more and keeps the first failure on record. One that
answered HTTP first, one that never listened, and (tests/run/test_server.py) one killed for memory
are not retried.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.ports import free_port
from bench.run.server.exits import ServerStartError
from bench.run.server.process import ServerProcess
from bench.setup.adapter import ServeCommand

SERVED_ID = "tiny"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))


def flaky(tmp_path: Path, port: int, first: str = "drop") -> ServerProcess:
    argv = [sys.executable, "-m", "tests.support.flaky_start", "--state", str(tmp_path / "started"),
            "--port", str(port), "--first", first, "--served-id", SERVED_ID]
    command = ServeCommand(argv=argv, env={"PYTHONPATH": str(PROJECT_ROOT)}, cwd=PROJECT_ROOT)
    return ServerProcess(command, host="127.0.0.1", port=port, ready_path="/v1/models", startup_timeout_s=60,
                         log_path=tmp_path / "server.log")


def start(server: ServerProcess) -> None:
    server.start()
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise


def test_a_server_that_dropped_its_connections_and_exited_is_transient_and_the_next_start_serves(tmp_path):
    port = free_port()
    first = flaky(tmp_path, port)
    with pytest.raises(ServerStartError) as err:
        start(first)
    assert err.value.transient and err.value.oom is None
    reason = str(err.value)  # at least one drop; how many the polls saw (a backlog adds one) is timing
    assert re.match(r"server exited with exit code 1 while starting, after its port dropped [1-9] readiness "
                    r"polls? unanswered; log: ", reason), reason
    second = flaky(tmp_path, port)
    start(second)
    try:
        assert second.ready_after_s is not None
    finally:
        second.stop()
    log = (tmp_path / "server.log").read_text()
    assert "first start, drop for 3 connections" in log and "faultserver pid" in log, log


def test_a_server_that_answered_http_before_it_exited_is_not_retried(tmp_path):
    with pytest.raises(ServerStartError, match="exited with exit code 1 while starting; log: ") as err:
        start(flaky(tmp_path, free_port(), first="http503"))
    assert not err.value.transient


def test_a_server_that_never_listened_is_not_retried(tmp_path):
    command = ServeCommand(argv=[sys.executable, "-c", "import sys; print('unknown flag --foo'); sys.exit(2)"])
    server = ServerProcess(command, host="127.0.0.1", port=free_port(), ready_path="/health", startup_timeout_s=60,
                           log_path=tmp_path / "server.log")
    with pytest.raises(ServerStartError, match="exit code 2 while starting; log: ") as err:
        start(server)
    assert not err.value.transient, "refused only: it never bound, and every start would fail alike"


def write_profile(tmp_path: Path, first: str) -> Path:
    argv = [sys.executable, "-m", "tests.support.flaky_start", "--state", str(tmp_path / "started"),
            "--port", "{port}", "--first", first, "--served-id", SERVED_ID]
    path = tmp_path / f"flaky-{first}.yaml"
    path.write_text("\n".join([
        f"name: flaky-{first}", "results_name: flaky", "builtin: tiny",
        f"formats: {{gguf: {{served_id: {SERVED_ID}}}}}",
        "openai:", f"  command: {json.dumps(argv)}", f"  env: {{PYTHONPATH: {json.dumps(str(PROJECT_ROOT))}}}",
        f"  served_id: {SERVED_ID}", "  ready_path: /v1/models"]) + "\n")
    return path


def session(tmp_path: Path, first: str) -> tuple[subprocess.CompletedProcess, dict]:
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "openai",
           f"--model={write_profile(tmp_path, first)}", f"--results-dir={results}", "--concurrency", "1",
           "--requests", "3", "--warmup", "1", "--port", "0", "--progress-interval", "0"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "CELLBENCH_CACHE": str(tmp_path / "cache")})
    (path,) = [p for p in results.rglob("openai_*.json") if "journal" not in p.name]
    return done, json.loads(path.read_text())


@pytest.mark.integration
def test_a_cell_retries_a_dropped_start_once_and_keeps_the_first_failure(tmp_path):
    done, result = session(tmp_path, "drop")
    assert done.returncode == 0, done.stdout[-3000:]
    verdict = result["verdict"]
    assert verdict["verdict"] == "ok" and "retried" in verdict["annotations"], verdict
    (server,) = result["servers"]
    assert server["retried_after"].startswith("server exited with exit code 1 while starting, after its port "
                                              "dropped "), server
    assert "start_error" not in server and result["levels"][0]["successful"] == 3
    log = Path(server["log"]).read_text()
    assert log.count("$ ") >= 2 and "first start, drop" in log, "both starts are in the server log"


@pytest.mark.integration
def test_a_cell_whose_server_answered_before_it_exited_fails_without_a_retry(tmp_path):
    done, result = session(tmp_path, "http503")
    assert done.returncode == 1, done.stdout[-3000:]
    verdict = result["verdict"]
    assert verdict["verdict"] == "failed" and "retried" not in verdict.get("annotations", []), verdict
    (server,) = result["servers"]
    assert "retried_after" not in server and server["start_error"].startswith("server exited with exit code 1")
