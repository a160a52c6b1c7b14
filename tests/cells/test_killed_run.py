"""A pytest session SIGKILLed in level 2 of a real llamacpp cell (what an OOM killer or a CI runner's
hard stop does), then the next session, a resume of the same run id.

What a user relies on: level 1's result and every one of its request records are on disk, whole;
the next session names the killed run and what of it was kept, reaps the llama-server the killed
session left, records the cell as `interrupted` in the journal, and measures the cell again under
names of its own, leaving every file of the killed run byte-identical.

The sessions have a cache of their own (`CELLBENCH_CACHE`: their own host lock and server pid
files, the shared framework builds and models), so no other session on the host reaps or waits
for them. Level 2 is held open by the test itself, not by timing: its llama-server is stopped
(SIGSTOP) the moment it appears, so the session is killed inside level 2 however fast the host.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
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
from bench.core.result.files import new_run_id, validate
from tests.cells.test_open_loop_cells import private_cache
from tests.support.busy import SESSION_TIMEOUT_S, TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]

REQUESTS = 6


def _servers(session: psutil.Process, binary: str) -> list[psutil.Process]:
    try:
        children = session.children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for proc in children:
        with contextlib.suppress(psutil.Error):
            if proc.cmdline()[:1] == [binary] and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _digests(paths: list[Path]) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(paths)}


def test_a_session_killed_in_level_2_keeps_level_1_and_the_next_session_names_it(tmp_path, llama_server):
    results, run_id = tmp_path / "results", new_run_id()
    cache = private_cache(tmp_path)
    env = {**os.environ, "CELLBENCH_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "llamacpp",
           "--concurrency", "1,2", "--requests", str(REQUESTS), "--warmup", "1", "--port", "0",
           "--results-dir", str(results), "--run-id", run_id]
    killed = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(killed.stdout or ()), daemon=True)
    reader.start()
    session, started = psutil.Process(killed.pid), []
    try:
        deadline = time.monotonic() + SESSION_TIMEOUT_S
        while True:  # level 1's server, then level 2's: stop that one the moment it appears
            assert killed.poll() is None, "the session ended before level 2:\n" + "".join(lines)[-3000:]
            assert time.monotonic() < deadline, "no level 2 server:\n" + "".join(lines)[-3000:]
            for proc in _servers(session, llama_server):
                if proc.pid not in started:
                    started.append(proc.pid)
            if len(started) == 2:
                os.kill(started[1], signal.SIGSTOP)
                break
            time.sleep(0.02)
        while not (cache / "servers" / f"{started[1]}.json").is_file():  # its pid file: a later session can reap it
            assert killed.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
            time.sleep(0.02)
        killed.send_signal(signal.SIGKILL)  # pytest, and only pytest
        killed.wait(timeout=60)
        reader.join(timeout=10)
        assert killed.returncode == -signal.SIGKILL
        assert not _alive(started[0]), "level 1's server was stopped before level 2 began"
        assert _alive(started[1]), "the killed session left level 2's server behind"

        # Level 1's result and every one of its request records are on disk, whole.
        (split_dir,) = results.glob("tiny/*/chat")
        (result_path,) = split_dir.glob(f"llamacpp_{run_id}.json")
        result = json.loads(result_path.read_text())
        validate(result)
        assert result["unfinished"]["pid"] == killed.pid and result["unfinished"]["levels_done"] == 1
        assert result["verdict"]["verdict"] == "capped"
        assert result["verdict"]["reason"].startswith("unfinished: written after 1 of 2 levels; ")
        (level,) = result["levels"]
        assert level["concurrency"] == 1 and not level["partial"] and level["num_requests"] == REQUESTS
        records = [json.loads(line) for line in (split_dir / result["requests_file"]).read_text().splitlines()]
        assert [r["concurrency"] for r in records] == [1] * (REQUESTS + 1)
        assert sorted(r["index"] for r in records if not r["warmup"]) == list(range(REQUESTS))
        assert sum(r["warmup"] for r in records) == 1 == level["warmup"]["requests"]
        assert sum(r["error"] is None for r in records if not r["warmup"]) == level["successful"]
        killed_files = [p for p in split_dir.rglob(f"llamacpp_{run_id}*") if p.is_file()]
        before = _digests(killed_files)

        # The next session: a resume of the same run id.
        resumed = subprocess.run([*cmd, "--skip-existing"], cwd=PROJECT_ROOT, env=env, capture_output=True,
                                 text=True, timeout=SESSION_TIMEOUT_S)
        out = resumed.stdout + resumed.stderr
        assert resumed.returncode == 0, out[-3000:]
        assert "Traceback" not in out
        kept = (f"kept c=1 ({level['successful']} of {REQUESTS} requests ok), {REQUESTS + 1} request records")
        assert (f"cellbench: run {run_id} was killed in llamacpp/chat after 1 of 2 levels (pid {killed.pid}, "
                f"last written {result['unfinished']['updated_at']}): {kept}; its result: {result_path}") in out
        assert re.search(rf"cellbench: stopped 1 server\(s\) left by a killed session: \['pid {started[1]}: ", out)
        assert not _alive(started[1]), "the next session reaped the server the killed one left"
    finally:
        for pid in (killed.pid, *started):
            if _alive(pid):
                _kill_group(pid) if pid != killed.pid else os.kill(pid, signal.SIGKILL)

    # It never wrote over the killed run's files: they are byte-identical, and the cell was measured
    # again under names of its own.
    assert _digests(killed_files) == before
    again = json.loads((split_dir / f"llamacpp_{run_id}-2.json").read_text())
    assert "unfinished" not in again and again["requests_file"] == f"llamacpp_{run_id}-2.requests.jsonl"
    assert_ok_unless_client_limited(again["verdict"], "the resumed cell")
    assert "resumed" not in again["verdict"]["annotations"], "an unfinished result is measured again, not kept"

    # The journal shows the killed run's cell as interrupted, not missing, though a later run replaced it.
    (journal_path,) = split_dir.parent.glob("weekly_*.journal.json")
    journal = json.loads(journal_path.read_text())
    (entry,) = journal["interrupted"]
    assert (entry["framework"], entry["split"], entry["verdict"]) == ("llamacpp", "chat", "interrupted")
    assert entry["reason"].startswith("killed after 1 of 2 levels") and entry["result_path"] == str(result_path)
    assert f"llamacpp / chat interrupted: {entry['reason']}" in journal["notes"]
    assert f"- llamacpp / chat interrupted: {entry['reason']}" in journal_path.with_suffix(".md").read_text()
    (cell,) = journal["cells"]
    assert cell["result_path"] == str(split_dir / f"llamacpp_{run_id}-2.json")
