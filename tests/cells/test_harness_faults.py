"""Every harness fault is one line: real sessions of a real llamacpp cell, in both forms (a server the
cell starts, `-k llamacpp`, and `--endpoint`, a llama-server this test starts), each checked for
its exact line, its exit code, no traceback, and the journal's status.

The faults: a second Ctrl-C during the session's closing work (it waits; a third quits at once), a
Ctrl-C as a cell's verdict is logged, a results folder that is a file, under a file, read-only or
on a full disk (one `ERROR:` line, exit code 4, before any server starts), a disk that fills up
during a cell or before the reports (one `ERROR:` line, exit code 4, the journal `partial` where
it can still be written), a bad file in the split folder (one line naming it), and the host lock
held by another session (one line naming the holder).

Each moment a fault needs is made by the test, never waited for with a sleep: a plugin holds the
session where a fault must land (tests/support/hold.py), a server is stopped (SIGSTOP) while the
test fills the disk, and the host lock is held by the test itself. Small filesystems are tmpfs
mounts of this test (root only; skipped, saying so, where mounting is not permitted), unmounted
when it ends. Each session has a cache of its own: its own host lock and server pid files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from bench.base.clock import now_iso
from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from bench.plugins.signals import FORCED, WAITING
from tests.cells.test_open_loop_cells import private_cache
from tests.run.test_endpoint import endpoint, write_profile  # noqa: F401  (a fixture)
from tests.support.busy import SESSION_TIMEOUT_S, TEST_TIMEOUT_S
from tests.support.hold import HOLD_AT_ENV, HOLD_ENV, holding, release

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]

LONG = "400"  # requests of a level an interrupt lands in: it cannot end first
PAGE = 4096  # what a tmpfs allocates a file's bytes in


# ---------------------------------------------------------------- the two forms and their sessions


@dataclass
class Form:
    """How a session names its cell: `-k llamacpp` (a server it starts) or `--endpoint`."""

    name: str
    args: list[str]
    model_dir: str  # results/<model_dir>/<machine>/chat
    test_id: str  # test_cell[<cell>]
    binary: str  # the llama-server executable
    endpoint_pid: int | None = None  # the endpoint's llama-server, this test's own

    def split_dir(self, results: Path) -> Path:
        return results / self.model_dir / detect().slug / "chat"


@pytest.fixture(params=["started", "endpoint"])
def form(request: pytest.FixtureRequest, tmp_path: Path, llama_server: str) -> Form:
    if request.param == "started":
        return Form("started", ["-m", "chat", "-k", "llamacpp", "--port", "0"], "tiny", "test_cell[llamacpp-chat]",
                    llama_server)
    proc, url = request.getfixturevalue("endpoint")
    profile = write_profile(tmp_path)
    return Form("endpoint", ["-m", "chat", f"--endpoint={url}/v1", f"--model={profile}"], "tiny-openai",
                "test_cell[openai-chat]", llama_server, proc.pid)


@dataclass
class Session:
    """One cellbench session of a test, in the background, its output read as it comes."""

    proc: subprocess.Popen
    reader: threading.Thread
    lines: list[str] = field(default_factory=list)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def wait_for(self, what: str | Path, timeout_s: float = SESSION_TIMEOUT_S) -> None:
        """Until a line matches the regex `what`, or the file `what` exists."""
        deadline = time.monotonic() + timeout_s
        while not self._seen(what):
            if self.proc.poll() is not None:
                self.reader.join(timeout=10)
                assert self._seen(what), f"the session ended before {what}:\n{self.out[-4000:]}"
                return
            assert time.monotonic() < deadline, f"no {what} after {timeout_s:g} s:\n{self.out[-4000:]}"
            time.sleep(0.02)

    def _seen(self, what: str | Path) -> bool:
        return what.exists() if isinstance(what, Path) else any(re.search(what, line) for line in list(self.lines))

    def finish(self, timeout_s: float = SESSION_TIMEOUT_S) -> tuple[int, str]:
        self.proc.wait(timeout=timeout_s)
        self.reader.join(timeout=10)
        return self.proc.returncode, self.out

    def end(self) -> None:
        """However the test went: the session is gone, and so is every process it started (a session
        killed here cannot stop its servers itself)."""
        if self.proc.poll() is None:
            try:
                left = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                left = []
            self.proc.kill()
            self.proc.wait(timeout=30)
            for child in left:
                with contextlib.suppress(psutil.Error):
                    child.kill()
        self.reader.join(timeout=10)


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[list[Session]]:
    started: list[Session] = []
    yield started
    for session in started:
        session.end()


def start(sessions: list[Session], tmp_path: Path, form: Form, results: Path, *args: str,
          hold: str | None = None) -> Session:
    """`pytest <form> --requests 2 ... ARGS` in the background, with a cache of its own."""
    cache = tmp_path / "x-cache"
    env = {**os.environ, "CELLBENCH_CACHE": str(cache if cache.exists() else private_cache(tmp_path))}
    plugin = []
    if hold is not None:
        (tmp_path / "hold").mkdir(exist_ok=True)
        env |= {HOLD_ENV: str(tmp_path / "hold"), HOLD_AT_ENV: hold}
        plugin = ["-p", "tests.support.hold"]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, *form.args, "--requests", "2",
           "--concurrency", "1", "--warmup", "0", "--progress-interval", "1", f"--results-dir={results}", *args]
    # A shell runs a background job with SIGINT ignored, and a child inherits that: the session
    # under test gets the disposition a terminal gives it.
    proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    sessions.append(Session(proc, reader, lines))
    return sessions[-1]


def journal_state(results: Path, form: Form) -> dict | None:
    found = list((results / form.model_dir).glob("*/weekly_*.journal.json"))
    assert len(found) <= 1, found
    return json.loads(found[0].read_text()) if found else None


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def servers_of(session: Session, binary: str) -> list[int]:
    try:
        children = psutil.Process(session.proc.pid).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for proc in children:
        with contextlib.suppress(psutil.Error):
            if proc.cmdline()[:1] == [binary] and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
    return found


def no_traceback(out: str) -> None:
    assert "Traceback" not in out and "Error:" not in out.replace("ERROR:", ""), out[-4000:]


def lines_of(out: str, prefix: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip().startswith(prefix)]


# ---------------------------------------------------------------- small filesystems


@contextlib.contextmanager
def tmpfs(path: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of `size` mounted on `path` for the block; unmounted after, whatever happened."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        pytest.skip(f"a small filesystem needs `mount -t tmpfs`, not permitted here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(mount: Path, leave: int = 0) -> None:
    """Fill the filesystem at `mount` to the last byte, then free `leave` bytes of it again."""
    filler = mount / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))


# ---------------------------------------------------------------- Ctrl-C


@pytest.mark.parametrize("presses", [2, 3], ids=["second-waits", "third-forces"])
def test_a_second_ctrl_c_waits_for_the_journal_and_reports_and_a_third_quits(tmp_path, form, sessions, presses):
    """Ctrl-C mid-level, then again while the session closes (held there as the cell's verdict is
    logged): the second press says it waits and the journal and reports get written; a third quits
    at once, killing the cell's server, still exit code 2 and no traceback."""
    results = tmp_path / "results"
    session = start(sessions, tmp_path, form, results, "--requests", LONG, hold="cell")
    session.wait_for(rf"{form.test_id[10:-1]} c=1: [1-9]\d*/{LONG} requests")  # mid-level
    servers = servers_of(session, form.binary)
    session.proc.send_signal(signal.SIGINT)
    session.wait_for(holding(tmp_path / "hold"))  # the interrupted cell's record is being logged
    session.proc.send_signal(signal.SIGINT)
    session.wait_for(re.escape(WAITING))
    if presses == 3:
        session.proc.send_signal(signal.SIGINT)
    else:
        release(tmp_path / "hold")
    code, out = session.finish()
    assert code == 2, out[-4000:]
    no_traceback(out)
    assert lines_of(out, "cellbench: Ctrl-C") == [WAITING, *([FORCED] if presses == 3 else [])]
    assert form.name == "endpoint" or servers, "the session started a server"
    assert not [pid for pid in servers if alive(pid)], "no server outlives the session"
    if form.endpoint_pid is not None:
        assert alive(form.endpoint_pid), "the endpoint is not the session's to stop"
    state = journal_state(results, form)
    (cell,) = state["cells"]
    assert re.fullmatch(rf"interrupted \(KeyboardInterrupt\) during c=1 after \d+ of {LONG} requests", cell["reason"])
    split_dir = form.split_dir(results)
    if presses == 2:  # it waited: the closing work was done
        assert state["status"] == "partial"
        assert (split_dir / "comparison.json").is_file() and (split_dir / "REPORT.md").is_file()
    else:  # forced: as far as it got (the hold kept it from its closing work)
        assert state["status"] == "running" and not (split_dir / "comparison.json").exists()


def test_a_ctrl_c_as_the_verdict_is_logged_keeps_the_cell_and_the_reports(tmp_path, form, sessions):
    """The first Ctrl-C lands while the cell's record is logged (its verdict line, its journal entry):
    it takes effect once that is done, so the journal lists the cell, the reports are written, and
    the session ends interrupted (exit 2, `partial`)."""
    results = tmp_path / "results"
    session = start(sessions, tmp_path, form, results, hold="cell")
    session.wait_for(holding(tmp_path / "hold"))
    session.proc.send_signal(signal.SIGINT)
    release(tmp_path / "hold")
    code, out = session.finish()
    assert code == 2, out[-4000:]
    no_traceback(out)
    assert lines_of(out, "cellbench: Ctrl-C") == []
    state = journal_state(results, form)
    assert state["status"] == "partial"
    (cell,) = state["cells"]
    assert cell["framework"] == form.test_id[10:-6] and cell["verdict"] in ("ok", "degraded"), cell
    split_dir = form.split_dir(results)
    assert (split_dir / "comparison.json").is_file() and (split_dir / "REPORT.md").is_file()


# ---------------------------------------------------------------- a results folder no cell can write


@pytest.mark.parametrize("case", ["a-file", "under-a-file", "read-only", "full"])
def test_a_results_folder_no_cell_can_write_is_one_error_line_before_any_server(tmp_path, form, sessions, case):
    mount = tmp_path / "mnt"
    with contextlib.ExitStack() as stack:
        if case == "a-file":
            results = tmp_path / "results"
            results.write_text("a file, not a folder\n")
            line = f"ERROR: results folder {results} is a regular file"
        elif case == "under-a-file":
            (tmp_path / "notes.txt").write_text("a file\n")
            results = tmp_path / "notes.txt" / "results"
            line = f"ERROR: results folder {results} cannot be created: {tmp_path / 'notes.txt'} is a regular file"
        elif case == "read-only":
            results = stack.enter_context(tmpfs(mount, "64k", read_only=True)) / "results"
            line = f"ERROR: results folder {results} cannot be created in {mount}: Read-only file system (EROFS)"
        else:
            results = stack.enter_context(tmpfs(mount, "300k"))
            fill(results)
            line = f"ERROR: results folder {results} cannot be written: No space left on device (ENOSPC)"
        session = start(sessions, tmp_path, form, results)
        code, out = session.finish()
        assert code == 4, out[-4000:]
        assert lines_of(out, "ERROR:") == [line]
        no_traceback(out)
        assert "collected" not in out, "the session stopped before it collected a cell, so before any server"
        if case == "full":
            assert [p.name for p in results.iterdir()] == [".filler"], "nothing was written"
    assert not list(tmp_path.rglob("weekly_*.journal.*")), "no journal: nothing ran"


# ---------------------------------------------------------------- a disk that fills up during the session


def test_a_disk_that_fills_during_a_cell_is_one_error_line_and_exit_4(tmp_path, form, sessions):
    """The disk fills while the cell's server is stopped (SIGSTOP) before its level; when the level
    ends, its request records cannot be written."""
    results = tmp_path / "mnt"
    with tmpfs(results, "300k"):
        held: list[int] = []
        if form.endpoint_pid is not None:
            os.kill(form.endpoint_pid, signal.SIGSTOP)
            held.append(form.endpoint_pid)
        try:
            session = start(sessions, tmp_path, form, results)
            split_dir = form.split_dir(results)
            prefix = "llamacpp" if form.name == "started" else "openai"
            deadline = time.monotonic() + SESSION_TIMEOUT_S
            while not held:  # the started server, stopped the moment it appears
                assert session.proc.poll() is None and time.monotonic() < deadline, session.out[-4000:]
                for pid in servers_of(session, form.binary):
                    os.kill(pid, signal.SIGSTOP)
                    held.append(pid)
                time.sleep(0.02)
            session.wait_for(split_dir)  # the cell began: its files are opened before its server starts
            while not list(split_dir.glob(f"{prefix}_*.requests.jsonl")):
                assert session.proc.poll() is None and time.monotonic() < deadline, session.out[-4000:]
                time.sleep(0.02)
            fill(results)
        finally:
            for pid in held:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        code, out = session.finish()
        (sidecar,) = split_dir.glob(f"{prefix}_*.requests.jsonl")
        assert code == 4, out[-4000:]
        assert lines_of(out, "ERROR:") == [f"ERROR: results folder {results} cannot be written: No space left on "
                                           f"device (ENOSPC) (writing {sidecar})"]
        no_traceback(out)
        assert not list(split_dir.glob(f"{prefix}_*[0-9a-f].json")), "no result could be written"
        assert journal_state(results, form) is None, "the full disk has no room for a journal"
        assert form.name == "endpoint" or not alive(held[0]), "the cell's server was stopped"


def test_a_disk_that_fills_before_the_reports_is_one_error_line_and_a_partial_journal(tmp_path, form, sessions):
    """The cell ran and its result and journal entry are written; the disk fills before the session's
    reports (as a full disk met the issue's tester at the plots), but for room enough to rewrite the
    journal and too little for comparison.json, which holds the cell's whole result. The reports
    stop at their first file, the journal is closed `partial`, exit code 4."""
    results = tmp_path / "mnt"
    with tmpfs(results, "300k"):
        session = start(sessions, tmp_path, form, results, hold="teardown")
        session.wait_for(holding(tmp_path / "hold"))
        split_dir = form.split_dir(results)
        (result,) = split_dir.glob("*_*[0-9a-f].json")
        journal = [p.stat().st_size for p in split_dir.parent.glob("weekly_*.journal.*")]
        room = (max(-(-size // PAGE) for size in journal) + 1) * PAGE  # one file rewritten at a time, grown a little
        assert result.stat().st_size > room, "comparison.json (the result and more) could fit"
        fill(results, leave=room)
        release(tmp_path / "hold")
        code, out = session.finish()
        assert code == 4, out[-4000:]
        assert lines_of(out, "ERROR:") == [f"ERROR: results folder {results} cannot be written: No space left on "
                                           f"device (ENOSPC) (writing {split_dir})"]
        no_traceback(out)
        state = journal_state(results, form)
        assert state["status"] == "partial" and [c["verdict"] for c in state["cells"]] in (["ok"], ["degraded"])
        assert not (split_dir / "comparison.json").exists()


# ---------------------------------------------------------------- files the session ignores, the host lock


def test_a_bad_file_in_the_split_folder_is_named_in_one_line(tmp_path, form, sessions):
    results = tmp_path / "results"
    split_dir = form.split_dir(results)
    split_dir.mkdir(parents=True)
    truncated = '{"schema_version": 1, "run_id": "20261201T000000Z-ab12", "framewo'
    (split_dir / "llamacpp_20261201T000000Z-ab12.json").write_text(truncated)
    (split_dir / "profile_export_aiperf.json").write_text(json.dumps({"records": [], "tool": "aiperf"}))
    session = start(sessions, tmp_path, form, results)
    code, out = session.finish()
    assert code == 0, out[-4000:]
    no_traceback(out)
    where = split_dir.relative_to(results)
    assert lines_of(out, "cellbench: ignored") == [
        f"cellbench: ignored {where}/llamacpp_20261201T000000Z-ab12.json: unreadable: Unterminated string "
        "starting at: line 1 column 58 (char 57)",
        f"cellbench: ignored {where}/profile_export_aiperf.json: not a cellbench v1 result (schema_version None)",
    ]
    assert (split_dir / "llamacpp_20261201T000000Z-ab12.json").read_text() == truncated, "left as it was"
    assert journal_state(results, form)["status"] == "completed"


def test_a_cell_that_waits_for_the_host_lock_says_once_for_whom(tmp_path, form, sessions):
    results = tmp_path / "results"
    lock = private_cache(tmp_path) / "host.lock"
    with lock.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        since = now_iso()
        handle.write(json.dumps({"pid": os.getpid(), "command": "a test holding the host lock", "since": time.time(),
                                 "started_at": since}) + "\n")
        handle.flush()
        session = start(sessions, tmp_path, form, results)
        waiting = (rf"cellbench: {re.escape(form.test_id)} waits for the host lock {re.escape(str(lock))}: held by "
                   rf"pid {os.getpid()} \(a test holding the host lock\) since {re.escape(since)}, for \d+ s")
        session.wait_for(waiting)
        assert not servers_of(session, form.binary), "no server starts while another session holds the host"
        fcntl.flock(handle, fcntl.LOCK_UN)
    code, out = session.finish()
    assert code == 0, out[-4000:]
    no_traceback(out)
    assert len([line for line in out.splitlines() if re.fullmatch(waiting, line.strip())]) == 1, out[-4000:]
    assert journal_state(results, form)["status"] == "completed"
