"""What an unattended run meets, on a real llama-server: a budget, a hang, an OOM, a port race, a resume.

Each test checks what the Monday-morning reader relies on: the verdict and its reason, that the
result file keeps what was measured, that no server outlives its cell, and that the next cell
still runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from bench.base import clock
from bench.base.paths import PROJECT_ROOT
from bench.core.client_settings import ClientSettings
from bench.core.result.files import new_run_id, validate
from bench.core.verdicts import Verdict
from bench.run import cell
from bench.run.cell import CellConfig, run_cell
from bench.run.config import BudgetSettings, LoadSettings, ServerSettings
from bench.setup import profiles
from tests.cells.test_cells_llamacpp import llama_servers, no_leaked_servers  # noqa: F401  (a fixture)

pytestmark = pytest.mark.integration


def _cfg(tmp_path: Path, *, concurrency: tuple[int, ...] = (1,), requests: int = 4, port: int = 0,
         share_server: bool = False, request_timeout_s: float = 60, hang_s: float | None = None,
         skip_existing_s: float | None = None, run_id: str | None = None, **cell) -> CellConfig:
    """A llamacpp chat cell of the tiny model; `hang_s`: the chat split's watchdog (None: none)."""
    return CellConfig("llamacpp", "chat", profiles.load_profile("tiny"), tmp_path, run_id or new_run_id(),
                      load=LoadSettings(concurrency=concurrency, requests=requests, warmup=0),
                      server=ServerSettings(port=port, share_server=share_server),
                      client=ClientSettings(request_timeout_s=request_timeout_s),
                      budget=BudgetSettings(hang_s={"chat": hang_s} if hang_s else {}, skip_existing_s=skip_existing_s),
                      **cell)


@pytest.mark.timeout(1800)  # c=2's 24 requests take minutes on a host loaded to its last core
def test_a_budget_too_small_for_the_levels_ends_capped_and_keeps_the_finished_levels(tmp_path, server_launcher,
                                                                                    no_leaked_servers,  # noqa: F811
                                                                                    monkeypatch):
    """c=2 runs whole; c=1 cannot finish by construction: its server is stopped (SIGSTOP) and the
    budget runs out 2 s later, however fast or slow the host (a fast host once served all of c=1
    inside a 3 s budget, and the cell came out ok)."""

    class StoppedBeforeC1(cell.CellRun):
        def _run_level(self, server, step, sidecar):
            if step[0] == 1:  # (level, round)
                os.killpg(server.proc.pid, signal.SIGSTOP)  # teardown's SIGKILL ends it stopped
                self.deadline = time.perf_counter() + 2.0
            return super()._run_level(server, step, sidecar)

    monkeypatch.setattr(cell, "CellRun", StoppedBeforeC1)
    cfg = _cfg(tmp_path, concurrency=(2, 1), requests=24, cell_budget_s=3600.0, request_timeout_s=600)
    outcome = run_cell(cfg, server_launcher)
    assert outcome.verdict.verdict is Verdict.CAPPED, outcome.verdict.reason
    assert outcome.verdict.reason == ("cell budget of 3600 s reached at c=1: deadline reached: 1/24 measured "
                                      "requests sent, 1 in flight cancelled")
    result = json.loads(outcome.result_path.read_text())
    validate(result)
    first, capped = result["levels"]
    assert (first["concurrency"], first["partial"], first["num_requests"], first["successful"]) == (2, False, 24, 24)
    assert capped["concurrency"] == 1 and capped["partial"] and capped["successful"] == 0
    assert result["verdict"]["verdict"] == "capped"


def test_a_stopped_server_ends_capped_no_progress_and_the_next_cell_runs(tmp_path, server_launcher, llama_server,
                                                                          no_leaked_servers):  # noqa: F811
    started = []

    def launch(command, adapter, host, port, log_path, **options):
        started.append(server_launcher(command, adapter, host, port, log_path, **options))
        return started[-1]

    def stop_server_after_two_requests(concurrency, progress):
        if progress.done >= 2 and len(started) == 1:
            os.killpg(started[0].proc.pid, signal.SIGSTOP)
            started.append("stopped")

    cfg = _cfg(tmp_path, requests=2000, hang_s=3.0, progress=stop_server_after_two_requests)
    hung = run_cell(cfg, launch)
    assert hung.verdict.verdict is Verdict.CAPPED
    assert hung.verdict.reason.startswith("no progress for 3 s") and hung.verdict.reason.endswith("at c=1")
    level = json.loads(hung.result_path.read_text())["levels"][0]
    assert level["partial"] and level["successful"] > 0  # what finished before the hang is kept
    assert not llama_servers(llama_server) or all(p.status() != "stopped" for p in llama_servers(llama_server))

    after = run_cell(_cfg(tmp_path, requests=3), server_launcher)
    assert after.verdict.verdict is Verdict.OK, after.verdict.reason


@pytest.mark.parametrize("share_server", [False, True], ids=["server-per-level", "shared-server"])
def test_a_llama_server_killed_mid_level_is_failed_and_no_later_level_runs(tmp_path, server_launcher, share_server,
                                                                          no_leaked_servers):  # noqa: F811
    """SIGKILL from outside (not the kernel's OOM killer) in the middle of c=2: the cell is failed
    with the signal and where it happened, whatever the server answered before, and c=1 never
    runs against a dead server."""
    started = []

    def launch(command, adapter, host, port, log_path, **options):
        started.append(server_launcher(command, adapter, host, port, log_path, **options))
        return started[-1]

    def kill_after_three(concurrency, progress):
        if progress.done >= 3 and started[-1].alive():
            os.kill(started[-1].proc.pid, signal.SIGKILL)

    cfg = _cfg(tmp_path, concurrency=(2, 1), requests=400, share_server=share_server, progress=kill_after_three)
    outcome = run_cell(cfg, launch)
    assert outcome.verdict.verdict is Verdict.FAILED, outcome.verdict.reason
    assert re.fullmatch(r"server exited with signal SIGKILL during c=2 after \d+ of 400 requests",
                        outcome.verdict.reason), outcome.verdict.reason
    result = json.loads(outcome.result_path.read_text())
    validate(result)
    assert [lv["concurrency"] for lv in result["levels"]] == [2] and result["levels"][0]["successful"] >= 3
    assert len(started) == 1 and result["servers"][0]["exit"]["stopped_by_us"] is False


def test_a_memory_limit_below_the_agent_split_ends_oom_with_the_kernel_line(tmp_path, llama_server):
    cmd = [sys.executable, "-m", "pytest", "-m", "agent", "-k", "llamacpp", "--requests", "3", "--concurrency", "2",
           "--port", "0", "--memory-limit", "48M", "-p", "no:cacheprovider", f"--results-dir={tmp_path}"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1
    assert "cellbench verdicts: 1 oom" in done.stdout
    (journal,) = tmp_path.rglob("weekly_*.journal.md")
    oom_section = journal.read_text().split("## OOM Cells")[1].split("\n## ")[0]
    assert "### llamacpp (agent)\n- **Kernel line**: killed for memory (cgroup oom_kill, limit 48 MiB)" in oom_section
    assert ("- **Likely cause**: loading the model for c=2 (it was killed while starting) on the agent split needed "
            "more memory than was free; it ran under a 48 MiB memory limit (--memory-limit)") in oom_section
    assert "Killed process" in oom_section  # the kernel's own line is the evidence


def test_a_held_port_is_retried_once_and_recorded(tmp_path, server_launcher, no_leaked_servers):  # noqa: F811
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    threading.Timer(1.0, holder.close).start()  # the port frees up before the retry
    outcome = run_cell(_cfg(tmp_path, port=port, requests=2), server_launcher)
    assert outcome.verdict.verdict is Verdict.OK, outcome.verdict.reason
    assert "retried" in outcome.verdict.annotations
    server = json.loads(outcome.result_path.read_text())["servers"][0]
    assert f"port {port} is already held" in server["retried_after"]


def test_skip_existing_keeps_this_runs_result_and_reruns_a_failed_one(tmp_path, server_launcher):
    cfg = _cfg(tmp_path, requests=2)
    first = run_cell(cfg, server_launcher)
    assert first.verdict.verdict is Verdict.OK
    resumed = run_cell(_cfg(tmp_path, requests=2, run_id=cfg.run_id, skip_existing_s=0.0), server_launcher)
    # The kept result's own verdict, annotated: it counts and reports as when it was measured.
    assert resumed.verdict.verdict is Verdict.OK and resumed.verdict.annotations[-1] == "resumed"
    assert resumed.verdict.reason == f"resumed: kept {first.result_path.name}: {first.verdict.reason}"
    assert resumed.result_path == first.result_path
    assert resumed.result == json.loads(first.result_path.read_text())
    # A later run without a window measures again; with a window the recent result stands. The later
    # run's id is of a later second: two runs started in one second (a fast host runs this whole cell
    # in under one) have no order between them but their ids' random suffixes.
    later = new_run_id(clock.now() + timedelta(seconds=1))
    again = run_cell(_cfg(tmp_path, requests=2, run_id=later, skip_existing_s=0.0), server_launcher)
    assert again.verdict.verdict is Verdict.OK and "resumed" not in again.verdict.annotations
    kept = run_cell(_cfg(tmp_path, requests=2, skip_existing_s=3600.0), server_launcher)
    assert kept.verdict.verdict is Verdict.OK and kept.result_path == again.result_path
    assert "resumed" in kept.verdict.annotations
