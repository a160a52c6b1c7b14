"""Server lifecycle mechanics on real processes: held ports, fail-fast, group stop, orphan reaping,
memory limits and OOM evidence (real kernel OOM kills inside a memory cgroup).

The "server" here is a few lines of Python serving `/health` (the lifecycle does not care what
answers); the real inference servers are exercised by the cell integration tests.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time

import httpx
import psutil
import pytest

from bench.host.memory import memlimit
from bench.host.memory.kernel_log import read_kernel_log
from bench.host.ports import free_port, port_holder
from bench.host.process_groups import reap_orphans
from bench.run.server.exits import ServerStartError
from bench.run.server.process import ServerProcess
from bench.setup.adapter import ServeCommand

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
        command, host="127.0.0.1", port=port, ready_path="/health", startup_timeout_s=timeout,
        log_path=tmp_path / "s.log",
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
    overhead = server.overhead()  # the suite's own time around this server, each part measured
    assert set(overhead) == {"spawn_s", "ready_detect_bound_s", "teardown_s"} and min(overhead.values()) >= 0
    assert overhead["ready_detect_bound_s"] <= server.ready_after_s  # a bound within the wait itself


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
        nothing_listens = r"not ready on /health after 1 s: no HTTP answer \(ConnectError\); log: "
        with pytest.raises(ServerStartError, match=nothing_listens):
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
        from bench.setup.adapter import ServeCommand
        from bench.run.server.process import ServerProcess
        from pathlib import Path
        s = ServerProcess(ServeCommand([sys.executable, {str(script)!r}, "{port}", "0", "0"]), host="127.0.0.1",
                          port={port}, ready_path="/health", startup_timeout_s=20, log_path=Path({str(tmp_path / 'o.log')!r}))
        s.start(); s.wait_ready(); print(s.proc.pid, flush=True); time.sleep(600)
        """  # noqa: E501 (a script line, kept whole)
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


# --- memory limits and OOM evidence (bench.host.memory: memlimit, oom) ---------------------------------------------

needs_cgroup = pytest.mark.skipif(
    memlimit.unavailable() is not None, reason=f"memory cgroups unavailable: {memlimit.unavailable()}"
)

# A "server" that eats memory: at load (`load`), on GET /grow (`grow`), or in a child process it
# spawned, once the file argv[3] appears (`child`). Memory is touched page by page so it is charged.
HOG_SERVER = textwrap.dedent(
    """
    import http.server, os, subprocess, sys, time
    port, mode = int(sys.argv[1]), sys.argv[2]
    HOG = "b = bytearray(512 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\n"
    if mode == "load":
        exec(HOG)
    if mode == "child":
        go = sys.argv[3]
        subprocess.Popen([sys.executable, "-c", f"import os, time\\nwhile not os.path.exists({go!r}): time.sleep(0.02)\\n" + HOG])
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path in ("/health", "/grow") else 404)
            self.end_headers(); self.wfile.write(b"ok"); self.wfile.flush()
            if self.path == "/grow":
                exec(HOG)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """  # noqa: E501 (a script line, kept whole)
)


def make_hog(tmp_path, mode, *, limit=None, timeout=20.0):
    script = tmp_path / "hog_server.py"
    script.write_text(HOG_SERVER)
    port = free_port()
    argv = [sys.executable, str(script), str(port), mode, str(tmp_path / "go")]
    return ServerProcess(ServeCommand(argv=argv), host="127.0.0.1", port=port, ready_path="/health",
                         startup_timeout_s=timeout, log_path=tmp_path / "hog.log", memory_limit_bytes=limit)


def wait_dead(server, timeout=15.0):
    deadline = time.monotonic() + timeout
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.alive(), "the kernel did not kill the server"


@needs_cgroup
def test_oom_during_the_run_gives_evidence_and_cleans_up(tmp_path, cache):
    server = make_hog(tmp_path, "grow", limit=96 << 20)
    server.start()
    cgroup_path = server.cgroup.path
    try:
        server.wait_ready()
        pgid = server.proc.pid
        assert server.proc.pid in server.cgroup.pids()
        assert httpx.get(server.base_url + "/grow", timeout=10).status_code == 200
        t0 = time.monotonic()
        wait_dead(server)
        died_after = time.monotonic() - t0
    finally:
        exit_info = server.stop(grace_s=2)
    assert exit_info.returncode == -9 and exit_info.signal == "SIGKILL" and not exit_info.stopped_by_us
    ev = exit_info.oom
    assert ev is not None and ev["source"] == "cgroup oom_kill" and ev["pid"] == pgid
    assert ev["cgroup"]["limit_bytes"] == 96 << 20 and ev["cgroup"]["oom_kill"] >= 1
    if ev.get("line"):
        assert f"Killed process {pgid} (" in ev["line"]
    assert exit_info.memory["limit_bytes"] == 96 << 20 and exit_info.memory["removed"]
    assert exit_info.memory["effective_limit_bytes"] in (None, 96 << 20)
    assert exit_info.memory["peak_bytes"] <= 96 << 20
    assert exit_info.to_json()["oom"] == ev
    assert not cgroup_path.exists(), "the cgroup is removed after the stop"
    assert group_members(pgid) == [], "no orphan"
    assert died_after < 10


@needs_cgroup
def test_oom_while_loading_is_a_start_error_with_evidence(tmp_path, cache):
    server = make_hog(tmp_path, "load", limit=64 << 20)
    server.start()
    cgroup_path = server.cgroup.path
    try:
        with pytest.raises(ServerStartError, match="killed for memory while starting") as err:
            server.wait_ready()
    finally:
        exit_info = server.stop(grace_s=2)
    assert err.value.oom is not None and err.value.oom["source"] == "cgroup oom_kill"
    assert err.value.oom["pid"] == server.proc.pid and not err.value.transient
    assert exit_info.oom is not None, "the stop that follows agrees"
    assert not cgroup_path.exists()


@needs_cgroup
def test_oom_of_a_child_while_the_server_lives(tmp_path, cache):
    server = make_hog(tmp_path, "child", limit=128 << 20)
    server.start()
    try:
        server.wait_ready()
        children = psutil.Process(server.proc.pid).children()
        assert len(children) == 1
        child = children[0]
        (tmp_path / "go").touch()
        wait_gone(child)
        assert server.alive(), "only the child was killed"
    finally:
        exit_info = server.stop(grace_s=5)
    assert exit_info.stopped_by_us, "we stopped the server..."
    assert exit_info.oom is not None and exit_info.oom["pid"] == child.pid, "...but its child was OOM-killed"


@needs_cgroup
def test_kernel_log_names_a_child_of_an_unlimited_server(tmp_path, cache):
    """No cgroup of the server's own: the kernel line for a pid of its tree is the evidence."""
    if oom_log_unreadable():
        pytest.skip(f"kernel log not readable: {oom_log_unreadable()}")
    server = make_hog(tmp_path, "child")
    server.start()
    trap = memlimit.create(64 << 20)  # only the child goes in here, moved by the test
    try:
        server.wait_ready()
        child = psutil.Process(server.proc.pid).children()[0]
        (trap.path / "cgroup.procs").write_text(str(child.pid))
        (tmp_path / "go").touch()
        wait_gone(child)
    finally:
        exit_info = server.stop(grace_s=5)
        trap.kill_all()
        trap.remove()
    ev = exit_info.oom
    assert ev is not None and ev["source"] == "kernel log" and ev["pid"] == child.pid
    assert f"Killed process {child.pid} (" in ev["line"]


def wait_gone(proc: psutil.Process, timeout: float = 15.0) -> None:
    """Until `proc` is dead: a zombie counts (the server, its parent, never reaps it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {proc.pid} still alive after {timeout} s")


def oom_log_unreadable() -> str | None:
    return read_kernel_log()[1]


def test_a_normal_stop_is_not_an_oom(tmp_path, cache):
    server = make(tmp_path, free_port())
    server.start()
    try:
        server.wait_ready()
    finally:
        exit_info = server.stop(grace_s=5)
    assert exit_info.oom is None and exit_info.memory is None
    assert exit_info.to_json() == {"returncode": exit_info.returncode, "signal": exit_info.signal,
                                   "stopped_by_us": True}


def test_our_sigkill_after_the_grace_period_is_not_an_oom(tmp_path, cache):
    argv = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"]
    server = make(tmp_path, free_port(), argv=argv)
    server.start()
    time.sleep(0.3)
    exit_info = server.stop(grace_s=0.5)
    assert exit_info.signal == "SIGKILL" and exit_info.stopped_by_us and exit_info.oom is None


def test_a_machine_without_memory_cgroups_fails_the_start_with_the_reason(tmp_path, cache, monkeypatch):
    # Simulates what a non-root user or a machine without the controller gets from the probe.
    monkeypatch.setattr(memlimit, "_parent", lambda *a: "no cgroup v1 memory controller mounted")
    server = make_hog(tmp_path, "grow", limit=64 << 20)
    with pytest.raises(ServerStartError, match="cannot enforce a memory limit: no cgroup v1 memory controller"):
        server.start()
    assert server.proc is None, "never started unlimited"


ROUTER = textwrap.dedent(
    """
    import http.server, os, subprocess, sys
    port, manifest, config = int(sys.argv[1]), os.environ["GROUP_MANIFEST"], sys.argv[2]
    assert open(config).read() == "workers: 2\\n"  # written before the server started
    for _ in range(2):  # workers in sessions of their own, as sglang-omni's router starts them
        w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        with open(manifest, "a") as f:
            f.write(f"{w.pid}\\n")
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


def test_groups_a_server_records_in_its_manifest_are_stopped_with_it(tmp_path, cache):
    """Workers a router starts in sessions of their own escape its process group; the ids it
    records in the manifest are stopped with it, and a stale id in the file touches nothing."""
    script, manifest, config = tmp_path / "router.py", tmp_path / "pgids.txt", tmp_path / "run" / "launcher.yaml"
    script.write_text(ROUTER)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    manifest.write_text(f"{bystander.pid}\n")  # older than the server: must survive
    time.sleep(0.5)
    port = free_port()
    command = ServeCommand(argv=[sys.executable, str(script), str(port), str(config)],
                           env={"GROUP_MANIFEST": str(manifest)}, files={config: "workers: 2\n"},
                           group_manifest=manifest)
    server = ServerProcess(command, host="127.0.0.1", port=port, ready_path="/", startup_timeout_s=60,
                           log_path=tmp_path / "s.log")
    try:
        server.start()
        server.wait_ready()
        workers = [int(pid) for pid in manifest.read_text().split()[1:]]
        assert len(workers) == 2 and all(psutil.pid_exists(pid) for pid in workers)
        server.stop(grace_s=5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_running(pid) for pid in workers):
            time.sleep(0.1)
        assert not any(_running(pid) for pid in workers), "the recorded worker groups outlived the server"
        assert bystander.poll() is None, "a group recorded before the server started was signalled"
    finally:
        server.stop()
        bystander.kill()
        bystander.wait()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def fault_server(tmp_path, port, *args, ready_path="/v1/models", api_key=None):
    """The suite's fault server (tests/support/faultserver.py) as a started server."""
    from bench.base.paths import PROJECT_ROOT

    argv = [sys.executable, "-m", "tests.support.faultserver", "--port", str(port), *args]
    command = ServeCommand(argv=argv, env={"PYTHONPATH": str(PROJECT_ROOT)}, cwd=PROJECT_ROOT)
    return ServerProcess(command, host="127.0.0.1", port=port, ready_path=ready_path, startup_timeout_s=600,
                         log_path=tmp_path / "fault.log", api_key=api_key)


def _answering(server: ServerProcess, status: int) -> None:
    """Until the server answers `status` on its ready path (however long its interpreter takes to start)."""
    while True:
        assert server.alive(), server.log_path.read_text()
        try:
            if httpx.get(server.base_url + server.ready_path, timeout=5).status_code == status:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)


def test_a_startup_timeout_names_the_last_answer_and_its_body(tmp_path, cache):
    """Readiness gives up naming what the ready path said, not only that it was not 200."""
    server = fault_server(tmp_path, free_port(), "--mode", "slow_ready", "--ready-after", "3600")
    server.start()
    try:
        _answering(server, 503)  # answering 503 now: the timeout below lands on an answer, never on a refusal
        server.startup_timeout_s = time.monotonic() - server._started_at
        with pytest.raises(ServerStartError) as err:
            server.wait_ready()
    finally:
        server.stop(grace_s=5)
    assert re.fullmatch(r'server not ready on /v1/models after \d+ s: last answer HTTP 503 Service Unavailable: '
                        r'\{"error": \{"message": "loading the model", "type": "unavailable", "code": 503\}\}; '
                        r"log: \S+fault\.log", str(err.value)), str(err.value)


def test_a_ready_path_answering_401_fails_at_once_saying_the_server_wants_a_key(tmp_path, cache):
    server = fault_server(tmp_path, free_port(), "--mode", "ready_401", "--api-key", "the-key")
    server.start()
    try:
        with pytest.raises(ServerStartError) as err:
            server.wait_ready()  # its timeout is 600 s: only the 401 can end the wait
    finally:
        server.stop(grace_s=5)
    assert str(err.value) == (
        "server not ready on /v1/models: the server answered HTTP 401 Unauthorized: it wants an API key; pass "
        '--api-key KEY or set OPENAI_API_KEY (HTTP 401 Unauthorized: {"error": {"message": "Invalid API Key", '
        f'"type": "authentication_error", "code": 401}}}}); log: {tmp_path / "fault.log"}')


def test_the_ready_path_is_asked_with_the_key_and_the_log_shows_none(tmp_path, cache):
    from bench.setup.profiles import ApiKey

    key = ApiKey("the-key", "--api-key")
    server = fault_server(tmp_path, free_port(), "--mode", "ready_401", "--api-key", "the-key", api_key=key)
    server.command = ServeCommand(server.command.argv, server.command.env, server.command.cwd, secrets=("the-key",))
    server.start()
    try:
        server.wait_ready()
        assert server.ready_after_s is not None
    finally:
        server.stop(grace_s=5)
    first = (tmp_path / "fault.log").read_text().splitlines()[0]
    assert first.endswith("--mode ready_401 --api-key ***") and "the-key" not in first
