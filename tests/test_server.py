"""Server lifecycle mechanics on real processes: held ports, fail-fast, group stop, orphan reaping.

The "server" here is a few lines of Python serving `/health` (the lifecycle does not care what
answers); the real inference servers are exercised by the cell integration tests.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from bench.adapter import ServeCommand
from bench.server import ServerProcess, ServerStartError, free_port, port_holder, reap_orphans

HEALTH_SERVER = textwrap.dedent(
    """
    import http.server, os, subprocess, sys, time
    delay, spawn_child = float(sys.argv[2]), sys.argv[3] == "1"
    if spawn_child:  # a worker process, as vLLM's engine core or a wrapper's child
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(delay)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
    """
)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def make(tmp_path, port, *, delay=0.0, child=False, argv=None, timeout=20.0):
    script = tmp_path / "health_server.py"
    script.write_text(HEALTH_SERVER)
    command = ServeCommand(argv=argv or [sys.executable, str(script), str(port), str(delay), "1" if child else "0"])
    return ServerProcess(
        command, host="127.0.0.1", port=port, ready_path="/health", startup_timeout_s=timeout, log_path=tmp_path / "s.log"
    )


def group_members(pgid: int) -> list[int]:
    members = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                members.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return members


def test_ready_then_stop_kills_the_whole_group(tmp_path, cache):
    server = make(tmp_path, free_port(), delay=0.5, child=True)
    server.start()
    try:
        server.wait_ready()
        assert server.ready_after_s >= 0.5
        pgid = server.proc.pid
        deadline = time.monotonic() + 5
        while len(group_members(pgid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group_members(pgid)) == 2, "the server and its child share the group"
        assert list((cache / "servers").glob("*.json")), "a running server is recorded for reaping"
    finally:
        exit_info = server.stop(grace_s=5)
    assert group_members(pgid) == []
    assert exit_info.stopped_by_us and exit_info.signal in ("SIGTERM", "SIGKILL")
    assert not list((cache / "servers").glob("*.json"))
    assert server.stop() is exit_info  # idempotent


def test_held_port_is_a_start_failure_naming_the_holder(tmp_path, cache):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        assert f"pid {os.getpid()}" in port_holder("127.0.0.1", port)
        server = make(tmp_path, port)
        with pytest.raises(ServerStartError, match=f"port {port} is already held by pid {os.getpid()}") as err:
            server.start()
        assert err.value.transient
        assert server.proc is None, "nothing was started"


def test_exit_during_start_fails_fast_with_the_log(tmp_path, cache):
    argv = [sys.executable, "-c", "import sys; print('bad flag --foo'); sys.exit(3)"]
    server = make(tmp_path, free_port(), argv=argv, timeout=60)
    server.start()
    t0 = time.monotonic()
    with pytest.raises(ServerStartError, match="exit code 3 while starting") as err:
        server.wait_ready()
    server.stop()
    assert time.monotonic() - t0 < 5, "did not wait for the startup timeout"
    assert "bad flag --foo" in err.value.log_path.read_text()


def test_startup_timeout(tmp_path, cache):
    server = make(tmp_path, free_port(), delay=30, timeout=1.0)
    server.start()
    try:
        with pytest.raises(ServerStartError, match="not ready on /health after 1 s"):
            server.wait_ready()
    finally:
        server.stop(grace_s=2)
    assert not server.alive()


def test_reaps_only_servers_whose_session_is_gone(tmp_path, cache):
    # A "session" that starts a server and is then SIGKILLed, as CI cancellation would do.
    port = free_port()
    script = tmp_path / "health_server.py"
    script.write_text(HEALTH_SERVER)
    session = textwrap.dedent(
        f"""
        import sys, time
        from bench.adapter import ServeCommand
        from bench.server import ServerProcess
        from pathlib import Path
        s = ServerProcess(ServeCommand([sys.executable, {str(script)!r}, "{port}", "0", "0"]), host="127.0.0.1",
                          port={port}, ready_path="/health", startup_timeout_s=20, log_path=Path({str(tmp_path / 'o.log')!r}))
        s.start(); s.wait_ready(); print(s.proc.pid, flush=True); time.sleep(600)
        """
    )
    env = {**os.environ, "CELLBENCH_CACHE": str(cache), "PYTHONPATH": os.getcwd()}
    owner = subprocess.Popen([sys.executable, "-c", session], stdout=subprocess.PIPE, text=True, env=env)
    server_pid = int(owner.stdout.readline())
    try:
        assert reap_orphans() == [], "the owner is alive: its server is not an orphan"
        server_proc = psutil.Process(server_pid)
        owner.kill()
        owner.wait()
        reaped = reap_orphans()
        assert len(reaped) == 1 and str(server_pid) in reaped[0]
        gone, _ = psutil.wait_procs([server_proc], timeout=5)
        assert gone, "the orphaned server was killed"
    finally:
        owner.kill()
        if psutil.pid_exists(server_pid):
            os.killpg(server_pid, 9)
    assert not list((cache / "servers").glob("*.json"))
