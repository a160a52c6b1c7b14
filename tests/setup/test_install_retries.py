"""pip's one retry for a network error, with real pip runs against a package index on 127.0.0.1.

The index serves one hand-made wheel (demo-pkg 1.0). While it is "down" it reads each request and
closes the connection without a byte, as a proxy or mirror that drops connections does; pip then
reports a connection error and finds no versions. The wait before the retry is where the index
comes back (the test's hook), so no test depends on timing.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import socketserver
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from bench.setup.installs import commands
from bench.setup.installs.cache import InstallError, build_log_path, ensure_installed
from bench.setup.installs.commands import pip_network_error
from bench.setup.installs.recipes import PipVenv

WHEEL = "demo_pkg-1.0-py3-none-any.whl"


def wheel_bytes() -> bytes:
    files = {"demo_pkg/__init__.py": b"VERSION = '1.0'\n",
             "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
             "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                             b"Tag: py3-none-any\n"}
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{name},sha256={digest},{len(data)}\n"
    files["demo_pkg-1.0.dist-info/RECORD"] = (record + "demo_pkg-1.0.dist-info/RECORD,,\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


@dataclass
class Index:
    port: int
    down: threading.Event = field(default_factory=threading.Event)
    dropped: int = 0  # connections closed unanswered while down

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple"


@pytest.fixture
def index() -> Iterator[Index]:
    wheel = wheel_bytes()
    page = f'<html><body><a href="/files/{WHEEL}#sha256={hashlib.sha256(wheel).hexdigest()}">{WHEEL}</a></body></html>'

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            request = self.request.recv(65536)
            if state.down.is_set():
                state.dropped += 1
                return  # closed without a response
            path = request.split(b" ", 2)[1].decode()
            if path.rstrip("/") == "/simple/demo-pkg":
                status, kind, body = "200 OK", "text/html", page.encode()
            elif path == f"/files/{WHEEL}":
                status, kind, body = "200 OK", "application/octet-stream", wheel
            else:
                status, kind, body = "404 Not Found", "text/plain", b"not here"
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n")
            self.request.sendall(head.encode() + body)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = Index(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, name="fake-index", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def pip_env(tmp_path, monkeypatch, index):
    """pip reads only this index, caches nothing, and retries a connection once on its own (what it
    prints then, `WARNING: Retrying ... after connection broken by ...`, is the evidence; pip's
    default is 5 such retries, with back-off, and without any it says nothing of the network)."""
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))
    for name, value in {"PIP_INDEX_URL": index.url, "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "1",
                        "PIP_TIMEOUT": "10", "PIP_NO_CACHE_DIR": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)


def recipe(version: str = "1.0") -> PipVenv:
    return PipVenv(framework="demo", version=version, packages=(f"demo-pkg=={version}",), executables=("python",),
                   report=("demo-pkg",))


@pytest.mark.venv
def test_a_dropped_connection_to_the_index_is_retried_once_and_kept_on_record(pip_env, index, monkeypatch):
    index.down.set()
    monkeypatch.setattr(commands, "_pause_before_retry", index.down.clear)  # the index comes back
    built = ensure_installed(recipe())
    assert index.dropped >= 1
    assert built.details["packages"] == {"demo-pkg": "1.0"}
    first = built.details["retried_after"]
    assert pip_network_error(first + "\nERROR: No matching distribution found for demo-pkg==1.0") == first
    assert first.startswith("WARNING: Retrying (") and "Connection aborted" in first, first
    assert first.endswith("/simple/demo-pkg/"), "the page pip could not fetch"
    log = build_log_path(recipe()).read_text()
    assert log.count("-m pip --disable-pip-version-check --no-input install demo-pkg==1.0") == 2
    assert "# pip failed on the network (" in log and "from versions: none" in log


@pytest.mark.venv
def test_an_index_that_stays_down_fails_the_install_after_one_retry(pip_env, index, monkeypatch):
    index.down.set()
    monkeypatch.setattr(commands, "_pause_before_retry", lambda: None)
    with pytest.raises(InstallError, match="installing demo 1.0 failed .*; build log: ") as err:
        ensure_installed(recipe())
    log = build_log_path(recipe()).read_text()
    assert log.count("install demo-pkg==1.0") == 2, "once, and once more: never a third time"
    assert str(build_log_path(recipe())) in str(err.value)


@pytest.mark.venv
def test_a_version_the_index_does_not_have_is_not_retried(pip_env, index, monkeypatch):
    def no_retry() -> None:
        raise AssertionError("a missing version is not a network error")

    monkeypatch.setattr(commands, "_pause_before_retry", no_retry)
    with pytest.raises(InstallError):
        ensure_installed(recipe("2.0"))
    log = build_log_path(recipe("2.0")).read_text()
    assert "from versions: 1.0" in log and log.count("install demo-pkg==2.0") == 1
    assert pip_network_error(log) is None
