"""SIGTERM and SIGHUP to a pytest session interrupt it as Ctrl-C does: the running test stops,
fixtures are torn down (servers stopped), the session ends with pytest's interrupted status."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.files import validate
from bench.plugins.signals import FORCED, WAITING, Terminated, closing, held, install

SLOW_TEST = """
import time
from pathlib import Path

import pytest

@pytest.fixture
def resource():
    Path("set-up").touch()
    yield
    Path("tearing-down").touch()
    time.sleep(1.0)  # a second signal arrives now; it must not cut the cleanup short
    Path("torn-down").touch()

def test_slow(resource):
    Path("running").touch()
    time.sleep(120)
"""


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"the session ended before {path.name}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout_s:g} s"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.session
def test_a_signal_interrupts_the_session_and_tears_down_its_fixtures(pytester: pytest.Pytester, sig):
    pytester.makepyfile(test_slow=SLOW_TEST)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_slow.py"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(pytester.path / "running", proc)
        proc.send_signal(sig)
        wait_for(pytester.path / "tearing-down", proc, 30.0)
        proc.send_signal(sig)  # a supervisor that repeats itself
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert (pytester.path / "torn-down").exists(), out
    assert f"Terminated: received {sig.name}" in out, out


def test_the_previous_handlers_come_back_when_the_session_ends(pytester: pytest.Pytester):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    pytester.makepyfile(test_inside="""
import signal
from bench.plugins.signals import Terminated

def test_inside():
    handler = signal.getsignal(signal.SIGTERM)
    try:
        handler(signal.SIGTERM, None)
    except Terminated as exc:
        assert str(exc) == "received SIGTERM" and isinstance(exc, KeyboardInterrupt)
    else:
        raise AssertionError("no Terminated")
""")
    pytester.runpytest().assert_outcomes(passed=1)
    assert {s: signal.getsignal(s) for s in before} == before


# ---------------------------------------------------------------- more than one Ctrl-C

WAITING_TEARDOWN = """
import time
from pathlib import Path

import pytest

@pytest.fixture
def resource():
    yield
    Path("tearing-down").touch()
    while not Path("go").exists():  # the session's closing work, as long as the test wants it
        time.sleep(0.02)
    Path("torn-down").touch()

def test_slow(resource):
    Path("running").touch()
    time.sleep(120)
"""


def _read(proc: subprocess.Popen) -> tuple[list[str], threading.Thread]:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    return lines, reader


@pytest.mark.parametrize("presses", [2, 3], ids=["second-waits", "third-quits"])
@pytest.mark.session
def test_a_second_ctrl_c_waits_for_the_closing_work_and_a_third_quits_at_once(pytester: pytest.Pytester, presses):
    pytester.makepyfile(test_slow=WAITING_TEARDOWN)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_slow.py"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines, reader = _read(proc)
    try:
        wait_for(pytester.path / "running", proc)
        proc.send_signal(signal.SIGINT)
        wait_for(pytester.path / "tearing-down", proc, 30.0)
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while not any(WAITING in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            time.sleep(0.02)
        if presses == 3:
            proc.send_signal(signal.SIGINT)
        else:
            (pytester.path / "go").touch()
        proc.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        proc.kill()
    out = "".join(lines)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "Traceback" not in out, out
    said = [line.strip() for line in lines if line.startswith("cellbench: Ctrl-C")]
    assert said == [WAITING, *([FORCED] if presses == 3 else [])], out
    assert (pytester.path / "torn-down").exists() is (presses == 2), "the closing work ran to its end, unless forced"


def test_an_interrupt_inside_held_waits_for_the_block_to_end(capfd):
    restore = install()
    reached = False
    try:
        with pytest.raises(Terminated, match="received SIGTERM"):
            with held():
                signal.raise_signal(signal.SIGTERM)
                reached = True  # the handler returned: the interrupt waits for the block's end
        signal.raise_signal(signal.SIGINT)  # after the first interrupt, one that follows never raises
    finally:
        restore()
    assert reached
    assert capfd.readouterr().err.strip() == WAITING


def test_once_the_closing_work_begins_no_signal_raises(capfd):
    restore = install()
    try:
        closing()
        signal.raise_signal(signal.SIGTERM)  # ignored
        signal.raise_signal(signal.SIGINT)  # says it waits
    finally:
        restore()
    assert capfd.readouterr().err.strip() == WAITING


# ---------------------------------------------------------------- a real cell, interrupted mid-level


def llama_servers_of(session: psutil.Process, binary: str) -> set[int]:
    try:
        children = session.children(recursive=True)
    except psutil.Error:
        return set()
    return {p.pid for p in children if _cmdline(p)[:1] == [binary]}


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_mid_level_stops_the_server_and_keeps_journal_and_result(tmp_path, llama_server, sig):
    """`pytest -m chat -k llamacpp` interrupted while a level runs: the session ends, its llama-server
    is gone, and the cell's partial result (`capped`, naming the signal) and journal entry exist."""
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "llamacpp",
           "--requests", "400", "--concurrency", "1", "--port", "0", "--progress-interval", "1",
           f"--results-dir={results}"]
    # A shell runs a background job with SIGINT ignored, and a child inherits that: Python then
    # leaves SIGINT ignored. The session under test gets the disposition a terminal gives it.
    proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    session, servers = psutil.Process(proc.pid), set()
    try:
        deadline = time.monotonic() + 300
        while not any(re.search(r"llamacpp-chat c=1: [1-9]\d*/400 requests", ln) for ln in lines):  # mid-level
            assert proc.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() < deadline, "no progress line in 300 s:\n" + "".join(lines)[-3000:]
            servers |= llama_servers_of(session, llama_server)
            time.sleep(0.1)
        servers |= llama_servers_of(session, llama_server)
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        proc.kill()
        reader.join(timeout=10)
    out, why = "".join(lines), "KeyboardInterrupt" if sig is signal.SIGINT else f"received {sig.name}"
    assert servers, "the session started a llama-server"
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert not [pid for pid in servers if alive(pid)], "a llama-server outlived its session"
    assert f"Interrupted: cellbench: {why}" in out, out[-3000:]
    (result_path,) = results.glob("tiny/*/chat/llamacpp_*.json")
    result = json.loads(result_path.read_text())
    validate(result)
    reason = result["verdict"]["reason"]
    assert result["verdict"]["verdict"] == "capped"
    done = re.fullmatch(rf"interrupted \({why}\) during c=1 after (\d+) of 400 requests", reason)
    assert done and int(done.group(1)) >= 1, reason  # the level it landed in is kept, up to the signal
    (level,) = result["levels"]
    assert level["partial"] and level["successful"] == int(done.group(1)) and level["warmup"]["requests"] >= 1
    assert level["stop_reason"] == f"interrupted ({why})"
    (journal,) = results.glob("tiny/*/weekly_*.journal.json")
    state = json.loads(journal.read_text())
    assert state["status"] == "partial"
    assert [(c["framework"], c["verdict"], c["reason"]) for c in state["cells"]] == [("llamacpp", "capped", reason)]
