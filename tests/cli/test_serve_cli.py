"""`cellbench serve FRAMEWORK`: a real llama-server in the foreground, as its cell starts it, and Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from bench.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration


def test_serve_starts_the_cells_server_prints_how_to_verify_and_stops_it_on_ctrl_c(tmp_path, llama_server):
    log = tmp_path / "server.log"
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "serve", "llamacpp", "--port", "0", "--log", str(log)],
                            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any("is ready at" in line for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        ready = next(line for line in lines if "is ready at" in line)
        url = ready.split("is ready at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        argv = lines[0].split()
        assert argv[0] == "$" and argv[1] == llama_server, "the cached build, as the cell runs it"
        assert argv[argv.index("--port") + 1] == url.rsplit(":", 1)[1] and argv[argv.index("--host") + 1] == "127.0.0.1"
        models = httpx.get(f"{url}/v1/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["tiny"] and "'tiny'" in ready
        for _ in range(3):  # the verify run's requests
            reply = httpx.post(f"{url}/v1/chat/completions", timeout=60, json={
                "model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "1 + 1 ="}]})
            assert reply.status_code == 200
        lines += [proc.stdout.readline() for _ in range(3)]
        assert any(f"curl -s {url}/v1/models" in line for line in lines)
        assert any(f"--endpoint {url}" in line for line in lines)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the server runs under cellbench serve"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert f"stopped llamacpp on {url}" in out
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE], "the server outlived it"
    assert log.read_text().startswith(f"$ {llama_server} "), "the server's log, as a cell keeps it"
