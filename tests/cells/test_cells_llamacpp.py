"""Real cells against the real llama-server on the built-in tiny model.

Each test runs cellbench the way a user does (`pytest -m chat -k llamacpp ...` in a fresh pytest
process) or drives `run_cell` with the real server fixture, then checks what a user relies on:
the verdict, the result file against its schema, token counts against the server's own usage,
and that no server process outlives the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.client_settings import ClientSettings
from bench.core.lenses.energy import NO_SOURCE
from bench.core.result.files import new_run_id, validate
from bench.host.power import Rapl
from bench.reports.markdown import suite_overhead
from bench.run.cell import CellConfig, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.setup import profiles
from tests.support import known_watts
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]


def llama_servers(binary: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["exe", "cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if cmd and cmd[0] == binary and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _ours_or_orphaned(proc: psutil.Process) -> bool:
    """Started by this test process, or left without a parent (a session that ended leaked it).
    Another session's live server (an eval run beside this suite, say) is neither."""
    try:
        ppid = proc.ppid()
    except psutil.Error:
        return False
    return ppid in (os.getpid(), 1) or not psutil.pid_exists(ppid)


@pytest.fixture
def no_leaked_servers(llama_server):
    before = {p.pid for p in llama_servers(llama_server)}
    yield
    leaked = [p for p in llama_servers(llama_server) if p.pid not in before and _ours_or_orphaned(p)]
    assert not leaked, f"llama-server left running: {[p.pid for p in leaked]}"


def run_pytest(*args: str, tmp_path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--results-dir", str(tmp_path / "results"),
           "--host-lock-timeout", str(HOST_LOCK_WAIT_S), *args]
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S,
                          env={**os.environ, **(env or {})})


def result_files(tmp_path: Path) -> list[Path]:
    """Cell results only: not comparison.json, not the journal's state."""
    return sorted(p for p in (tmp_path / "results").rglob("*_*.json") if not p.name.endswith(".journal.json"))


def load_valid(path: Path) -> dict:
    data = json.loads(path.read_text())
    validate(data)
    return data


def test_chat_cell_ok_and_tokens_equal_server_usage(tmp_path, no_leaked_servers):
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--requests", "20", "--concurrency", "1,4", "--port", "0",
                      tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    assert path.parent.name == "chat" and path.name.startswith("llamacpp_")
    result = load_valid(path)
    # What this test checks is what the server answered: every request succeeded and the token
    # counts are the server's own. A busy host may make the client late (`degraded`, naming the
    # client); that is a fact about the host, not about these answers.
    verdict = assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat")
    assert f"cellbench verdicts: 1 {verdict}" in proc.stdout, proc.stdout[-2000:]
    assert all(lv["failed"] == 0 for lv in result["levels"]), [lv["errors"] for lv in result["levels"]]
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 4]
    assert result["model"]["served"]["listed"] == ["tiny"] and result["model"]["served"]["responses"] == ["tiny"]
    assert result["framework"]["version"] and len(result["servers"]) == 2, "one server per level"
    records = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    for level in result["levels"]:
        assert level["successful"] == 20 and level["usage_available"]
        measured = [r for r in records if r["concurrency"] == level["concurrency"] and not r["warmup"]]
        assert len(measured) == 20
        assert all(r["tokens_source"] == "usage" for r in measured)
        assert level["output_tokens_total"] == sum(r["usage_completion_tokens"] for r in measured)
        assert level["input_tokens_total"] == sum(r["usage_prompt_tokens"] for r in measured)
        # the tiny profile asks for ignore_eos and llama-server honours it: every request ran to the
        # max_tokens it asked for (each record says which), by the server's own count
        length = level["audits"]["output_length"]
        assert (length["outcome"], length["requests"], length["tokens_source"]) == ("honoured", 20, "usage"), length
        assert all(r["usage_completion_tokens"] == r["max_tokens"] for r in measured)
        # usage against chunks, whatever the outcome: the random tiny model emits byte tokens that are
        # pieces of UTF-8 characters, which llama-server can send together in one chunk (fewer chunks)
        accounting = level["audits"]["token_accounting"]
        assert accounting["requests"] == 20 and accounting["usage_tokens"] == level["output_tokens_total"]
        assert accounting["chunks"] == level["chunks_total"], accounting
        # the server's own count (llama-server --metrics), scraped as the level started and ended:
        # every token it generated for the level's requests, warm-up included, as usage reported them
        seen = level["server_metrics"]
        assert seen["includes_warmup"] and seen["errors"] == [], seen
        level_records = [r for r in records if r["concurrency"] == level["concurrency"]]
        assert seen["counters"]["generated_tokens"] == sum(r["usage_completion_tokens"] for r in level_records) > 0
        # a gauge is read from the scrapes while the level ran (every 2 s): a short level has none
        running = seen["gauges"].get("running")
        assert running is None or 0 <= running["max"] <= level["concurrency"], seen["gauges"]
        assert (path.parent / seen["sidecar"]).is_file()
    # the session's reports, rebuilt from the result files at its end
    comparison = json.loads((path.parent / "comparison.json").read_text())
    assert comparison["provenance"]["llamacpp"]["run_id"] == result["run_id"]
    report = (path.parent / "REPORT.md").read_text()
    assert "## Concurrency 4" in report
    # the suite's own time per server (spawn, readiness detection, teardown), and its share in REPORT.md
    assert all(set(server["overhead"]) == {"spawn_s", "ready_detect_bound_s", "teardown_s"}
               for server in result["servers"])
    overhead = suite_overhead(result)
    assert overhead is not None and 0 < overhead["share"] < 1
    assert f"| llamacpp | {overhead['spawn_s']:.3f} |" in report[report.index("## Suite overhead"):]
    (journal,) = path.parent.parent.glob("weekly_*.journal.md")
    assert f"| llamacpp | {verdict} |" in journal.read_text()
    # energy: this machine's sources, or plainly none (a VM: no GPU power, no readable RAPL)
    if not Rapl() and shutil.which("nvidia-smi") is None:
        assert all(lv["energy"] == {"sources": [], "note": NO_SOURCE} for lv in result["levels"])
        assert "| Energy (J/output token) | none: no power source |" in report
    else:
        assert all(e["joules"] > 0 for lv in result["levels"] for e in lv["energy"]["sources"])


def test_energy_per_output_token_of_a_source_of_known_watts(tmp_path, no_leaked_servers):
    """With a CPU power source of exactly 20 W in place of RAPL, each level's joules are 20 W times
    its measured wall time, and its J/token those joules over the server's output tokens."""
    proc = run_pytest("-p", "tests.support.known_watts", "-m", "chat", "-k", "llamacpp", "--requests", "8",
                      "--concurrency", "1,2", "--warmup", "1", "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    for level in result["levels"]:
        (entry,) = level["energy"]["sources"]
        assert (entry["device"], entry["source"], entry["interval_s"]) == ("cpu", "rapl", 1.0)
        assert entry["wall_s"] == pytest.approx(level["wall_time_s"], abs=1e-6)  # epoch seconds: float to ~0.2 us
        assert entry["joules"] == pytest.approx(known_watts.WATTS * level["wall_time_s"], rel=1e-6)
        assert entry["avg_w"] == pytest.approx(known_watts.WATTS, rel=1e-6)
        assert entry["output_tokens"] == level["output_tokens_total"] > 0
        assert entry["j_per_output_token"] == pytest.approx(entry["joules"] / level["output_tokens_total"])
    report = (path.parent / "REPORT.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| Energy (J/output token)"))
    assert "(cpu rapl, 20.0 W)" in row, row


def test_share_server_runs_every_level_on_one_server(tmp_path, no_leaked_servers):
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--share-server", "--requests", "4", "--concurrency", "1,2",
                      "--warmup", "1", "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    result = load_valid(result_files(tmp_path)[0])
    assert result["run_config"]["levels_share_server"] is True
    assert [s["levels"] for s in result["servers"]] == [[1, 2]]
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2]
    # one connection per request by default: warm-up and measured requests, none reused
    assert result["run_config"]["keep_alive"] is False
    assert [lv["client"]["connections"] for lv in result["levels"]] == [
        {"opened": 5, "reused": 0, "stale": 0, "retried": 0}] * 2


def test_keep_alive_reuses_or_retries_and_loses_no_request(tmp_path, no_leaked_servers):
    """--keep-alive against llama-server, which closes a connection after a streamed response on
    its own terms (docs/client-performance.md, keep-alive): a request never fails for it. An idle connection found
    closed is dropped (stale); one closed as the request went out is retried on a fresh one, and
    the request's record says so."""
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--keep-alive", "--requests", "6", "--concurrency", "2",
                      "--warmup", "1", "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    assert result["run_config"]["keep_alive"] is True
    (level,) = result["levels"]
    assert level["successful"] == 6 and level["failed"] == 0 and level["warmup"]["failed"] == 0, level["errors"]
    records = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    assert len(records) == 7
    conn = level["client"]["connections"]
    assert conn["opened"] + conn["reused"] == len(records) + conn["retried"]  # every attempt had one connection
    assert conn["retried"] == sum(1 for r in records if r.get("retried"))
    assert conn["reused"] + conn["stale"] >= 1, conn  # kept connections were offered to later requests


def test_agent_cell_runs_the_agent_split(tmp_path, no_leaked_servers):
    proc = run_pytest("-m", "agent", "-k", "llamacpp", "--requests", "8", "--concurrency", "2", "--warmup", "1",
                      "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    assert result["split"] == "agent"
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-agent")
    assert all(lv["failed"] == 0 for lv in result["levels"]), [lv["errors"] for lv in result["levels"]]
    assert result["levels"][0]["input_tokens_total"] / 8 > 1000, "agent prompts are prefill-heavy"


def test_profile_naming_another_model_is_wrong_model(tmp_path, no_leaked_servers):
    # The server really serves the tiny GGUF under another name; llama-server accepts any
    # requested id, so only /v1/models and the responses' `model` field can tell.
    profile = tmp_path / "mislabelled.yaml"
    profile.write_text(
        (PROJECT_ROOT / "models" / "tiny.yaml").read_text().replace(
            "gguf: {served_id: tiny}", "gguf: {served_id: tiny, alias: qwen3-0.6b-bf16}"
        )
    )
    assert "alias: qwen3-0.6b-bf16" in profile.read_text()
    proc = run_pytest("-m", "chat", "-k", "llamacpp", f"--model={profile}", "--requests", "4",
                      "--concurrency", "1", "--warmup", "0", "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 1
    assert "wrong-model: /v1/models lists qwen3-0.6b-bf16, not tiny" in proc.stdout
    result = load_valid(result_files(tmp_path)[0])
    assert result["verdict"]["verdict"] == "wrong-model"
    assert result["model"]["served"]["responses"] == ["qwen3-0.6b-bf16"]


def test_held_port_is_failed_not_a_false_ready(tmp_path, no_leaked_servers):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        proc = run_pytest("-m", "chat", "-k", "llamacpp", "--requests", "2", "--concurrency", "1",
                          "--port", str(port), tmp_path=tmp_path)
    assert proc.returncode == 1
    assert f"failed: port {port} is already held by pid {os.getpid()}" in proc.stdout


def test_server_killed_mid_level_gives_typed_failures_and_a_result(tmp_path, server_launcher, no_leaked_servers):
    killed = threading.Event()
    started = []

    def launch(command, adapter, host, port, log_path, **options):
        started.append(server_launcher(command, adapter, host, port, log_path, **options))
        return started[-1]

    def kill_after_two_requests(concurrency, progress):  # however slow the machine is today
        if progress.done >= 2 and not killed.is_set():
            os.killpg(started[0].proc.pid, signal.SIGKILL)
            killed.set()

    # A generous request timeout: on a host that is busy (stress-ng beside the suite) a request
    # of this level may take tens of seconds, and a timeout is not the failure under test.
    cfg = CellConfig(
        framework="llamacpp", split="chat", profile=profiles.load_profile("tiny"), results_root=tmp_path,
        run_id=new_run_id(), load=LoadSettings(concurrency=(4,), requests=2000, warmup=0),
        server=ServerSettings(port=0), client=ClientSettings(request_timeout_s=600), progress=kill_after_two_requests,
    )
    outcome = run_cell(cfg, launch)
    assert killed.is_set()
    result = load_valid(outcome.result_path)
    level = result["levels"][0]
    assert level["successful"] > 0 and level["failed"] > 0
    assert set(level["errors"]) <= {"connect", "truncated"} and level["errors"], level["errors"]
    # a server that dies is never ok, nor merely degraded: the level stopped when it went
    assert outcome.verdict.verdict.value == "failed"
    assert re.fullmatch(r"server exited with signal SIGKILL during c=4 after \d+ of 2000 requests",
                        outcome.verdict.reason), outcome.verdict.reason
    assert level["num_requests"] < 2000 and level["partial"]
    assert result["servers"][0]["exit"] == {"returncode": -9, "signal": "SIGKILL", "stopped_by_us": False}


def test_pytest_timeout_still_stops_the_server(tmp_path, no_leaked_servers):
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--requests", "5000", "--concurrency", "1", "--port", "0",
                      "--timeout", "4", "--cell-budget", "3600", tmp_path=tmp_path)
    assert proc.returncode == 1
    assert "Timeout (>4.0s) from pytest-timeout" in proc.stdout


SILICONBENCH = Path(__file__).parents[1] / "data" / "siliconbench"  # small files in SiliconBench's format


@pytest.mark.parametrize("split", ["chat", "agent"])
def test_siliconbench_prompt_files_run_unchanged(tmp_path, split, no_leaked_servers):
    source = SILICONBENCH / f"{split}_benchmark_prompts.json"
    proc = run_pytest("-m", split, "-k", "llamacpp", f"--prompts={source}", "--requests", "6", "--concurrency", "2",
                      "--warmup", "1", "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    result = load_valid(result_files(tmp_path)[0])
    count = len(json.loads(source.read_text()))
    assert result["run_config"]["prompts"] == {"source": str(source), "format": "siliconbench", "count": count,
                                               "tools_param": False}
    records = [json.loads(line) for line in (result_files(tmp_path)[0].parent / result["requests_file"]).open()]
    measured = [r for r in records if not r["warmup"]]
    assert [r["prompt_name"] for r in measured][:2] and all(r["error"] is None for r in measured)
    names = json.loads(source.read_text())
    assert {r["prompt_name"] for r in measured} <= {p["name"] for p in names}
    assert not {r["prompt_name"] for r in records if r["warmup"]} & {p["name"] for p in names}, "warm-up is apart"


def test_real_profile_without_network_is_skipped_with_a_reason(tmp_path):
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--model", "qwen3-0.6b", "-rs", tmp_path=tmp_path,
                      env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "1 skipped" in proc.stdout and "unsloth/Qwen3-0.6B-GGUF" in proc.stdout
