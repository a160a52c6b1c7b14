"""The journal's statuses and blocks as SiliconBench's runbook writes them: `completed` when every
cell that can run here ran (a platform skip is no gap), `partial` when the run was interrupted,
the skip block of every failure triaged skip, and the OOM block of every oom cell; and the prior
journals SiliconBench keeps in its own folder, read there."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.core.result.files import validate
from bench.host.machine import detect, siliconbench_subdir
from bench.reports.journal import OOM_BLOCK, CellEntry, Journal
from bench.reports.journal.prior import recent, siliconbench_folder
from bench.reports.journal.skips import diagnosed_skips
from bench.reports.journal.triage import PRIOR_FAILURE
from tests.support.results import Spec, synthetic_result

DAY = "2026-12-01"
SILICONBENCH = PROJECT_ROOT / "tests" / "data" / "siliconbench" / "weekly_2026-11-24.journal.md"


def _journal(tmp_path: Path, day: str = DAY) -> Journal:
    return Journal.open(tmp_path, model="tiny", machine="m", day=day)


def _elsewhere() -> str:
    """A framework with cells whose adapter does not run on this machine (omlx here, on Linux)."""
    return next(a.name for a in adapters.registry().values() if a.benchmark_cells and not a.runs_here())


def _finished(tmp_path: Path, *entries: CellEntry, interrupted: bool = False) -> str:
    j = _journal(tmp_path)
    for entry in entries:
        j.record(entry)
    j.finish(interrupted=interrupted)
    return j.status


def test_a_skip_of_a_framework_that_cannot_run_here_leaves_the_run_completed(tmp_path):
    elsewhere = _elsewhere()
    status = _finished(tmp_path, CellEntry("llamacpp", "chat", "ok", "4/4 requests ok"),
                       CellEntry(elsewhere, "chat", "skipped", f"{elsewhere} runs on darwin-arm64; this is linux"))
    assert status == "completed"
    assert "- Status: completed\n" in (tmp_path / f"weekly_{DAY}.journal.md").read_text()


def test_a_cell_that_could_run_here_but_was_skipped_is_a_gap(tmp_path):
    status = _finished(tmp_path, CellEntry("llamacpp", "chat", "ok", "4/4 requests ok"),
                       CellEntry("vllm", "chat", "skipped", "vllm is not installed: `cellbench install vllm`"))
    assert status == "completed_with_skips"


def test_an_interrupted_run_or_a_killed_runs_cell_is_partial_not_failed(tmp_path):
    assert _finished(tmp_path / "a", CellEntry("llamacpp", "chat", "ok", "fine"), interrupted=True) == "partial"
    killed = CellEntry("llamacpp", "agent", "interrupted", "unfinished: its writer (pid 4242) is gone")
    assert _finished(tmp_path / "b", killed) == "partial"
    j = _journal(tmp_path / "c")
    j.session_failures.append("pytest -m chat exited 2 (interrupted): KeyboardInterrupt")
    j.finish(interrupted=True)
    assert j.status == "partial", "an interrupted session is among the session failures, and still partial"
    j.finish(interrupted=False)
    assert j.status == "failed", "a session that could not run its cells, not interrupted"


def test_a_failure_triaged_skip_gets_the_runbooks_block(tmp_path):
    j = _journal(tmp_path)
    (tmp_path / f"weekly_{DAY}.log").write_text("$ pytest\n")
    j.record(CellEntry("vllm", "agent", "all-failed", "8/8 requests failed, mostly http_4xx 400 (8x)", "r/vllm_x.json",
                       evidence={"dominant_error": {"type": "http_4xx", "http_status": 400, "count": 8},
                                 "server_logs": ["logs/vllm_x_c1.server.log"],
                                 PRIOR_FAILURE: "it ended all-failed the same way on 2026-11-24"}))
    j.record(CellEntry("llamacpp", "chat", "failed", "port 8001 is already held by pid 9 (nginx)"))  # triaged retry
    text = j.md_path.read_text()
    section = text.split("## Skipped Cells\n\n", 1)[1].split("\n## ", 1)[0]
    assert section.splitlines() == [
        "### vllm (agent)",
        "- **Error**: 8/8 requests failed, mostly http_4xx 400 (8x) [http_4xx, HTTP 400, 8x]",
        "- **Why skipped**: it ended all-failed the same way on 2026-11-24: do not re-diagnose it from scratch; "
        "`cellbench weekly skip vllm agent --reason \"...\"` records the diagnosis",
        "- **Prior occurrences**: it ended all-failed the same way on 2026-11-24",
        f"- **Relevant logs**: logs/vllm_x_c1.server.log, r/vllm_x.json, weekly_{DAY}.log"]
    # the other failure is triaged retry: it is not skipped


def _oom_result(tmp_path: Path) -> Path:
    """A cell killed for memory at c=8, after c=1 finished, under a 512 MiB limit."""
    result = copy.deepcopy(synthetic_result(Spec(levels=(1, 8))))
    oom = {"source": "cgroup oom_kill", "line": "Memory cgroup out of memory: Killed process 4242 (llama-server)"}
    result["levels"] = result["levels"][:1]
    result["servers"][1]["exit"] = {"returncode": -9, "signal": "SIGKILL", "stopped_by_us": False, "oom": oom,
                                    "memory": {"limit_bytes": 512 * 2**20}}
    result["verdict"] = {"verdict": "oom", "reason": "killed for memory (cgroup oom_kill, limit 512 MiB): "
                         + oom["line"], "annotations": []}
    validate(result)
    path = tmp_path / "chat" / "llamacpp_r.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(result))
    return path


def test_an_oom_cell_gets_its_run_window_cause_prior_ooms_and_mitigation(tmp_path):
    shutil.copy(SILICONBENCH, tmp_path / SILICONBENCH.name)  # SiliconBench's journal: ollama / agent was oom
    path = _oom_result(tmp_path)
    reason = json.loads(path.read_text())["verdict"]["reason"]
    j = _journal(tmp_path)
    j.record(CellEntry("llamacpp", "chat", "oom", reason, str(path)))
    j.record(CellEntry("ollama", "agent", "oom", "killed for memory (macOS jetsam)"))
    text = j.md_path.read_text()
    section = text.split("## OOM Cells\n\n", 1)[1].split("\n## ", 1)[0]
    assert section.startswith("(Cells whose server the kernel killed for memory")
    block = section.split("### llamacpp (chat)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block[0] == f"- **Kernel line**: {reason}"
    assert block[1].startswith("- **Run window**: ") and block[1].endswith("(2026-11-30), killed at c=8")
    assert block[2] == ("- **Likely cause**: the model's weights plus the KV cache of c=8 on the chat split needed "
                        "more memory than was free; it ran under a 512 MiB memory limit (--memory-limit)")
    assert block[3] == "- **Prior OOMs**: none in the 1 prior journal(s) of this folder"
    assert block[4] == ("- **Mitigation**: run it at a lower concurrency (`--concurrency 1`: the levels it finished), "
                        "pick a smaller model, or run it on a machine with more memory")
    ollama = section.split("### ollama (agent)\n", 1)[1].splitlines()
    assert ollama[1] == "- **Run window**: unknown: the cell wrote no result"
    assert ollama[3] == "- **Prior OOMs**: 2026-11-24 (weekly_2026-11-24.journal.md)"
    assert j.cells[("llamacpp", "chat")].evidence[OOM_BLOCK]["prior"].startswith("none in the 1 prior")
    assert "- Status: running" in text and j.finish(interrupted=False) is None and j.status == "completed_with_oom"


@pytest.fixture
def m2max(monkeypatch: pytest.MonkeyPatch):
    """This machine filed as `m2max` by cellbench, with SiliconBench's variable set empty: its
    legacy root, results/<model>/, is where SiliconBench keeps this machine's journals."""
    monkeypatch.setenv("CELLBENCH_MACHINE", "m2max")
    monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "")
    detect.cache_clear()
    yield
    detect.cache_clear()


def test_siliconbench_journals_are_read_where_siliconbench_keeps_them(tmp_path, m2max):
    model_dir = tmp_path / "results" / "Qwen3-0.6B"
    model_dir.mkdir(parents=True)
    shutil.copy(SILICONBENCH, model_dir / SILICONBENCH.name)  # its legacy root, "Machine: Apple M2 Max"
    scoped = model_dir / "m2max"
    assert siliconbench_folder(scoped) == model_dir
    (prior,) = recent(scoped, DAY)
    assert prior.path == model_dir / SILICONBENCH.name and prior.siliconbench_folder and prior.machine == "Apple M2 Max"
    assert diagnosed_skips(scoped, DAY)["llamacpp/chat"]["source"] == SILICONBENCH.name
    assert ("ollama", "agent") in prior.ooms


def test_a_siliconbench_journal_of_another_machine_is_not_this_ones(tmp_path, m2max):
    model_dir = tmp_path / "results" / "Qwen3-0.6B"
    model_dir.mkdir(parents=True)
    text = SILICONBENCH.read_text().replace("Machine: Apple M2 Max", "Machine: Apple M5 Pro")
    (model_dir / SILICONBENCH.name).write_text(text)
    assert recent(model_dir / "m2max", DAY) == [] and diagnosed_skips(model_dir / "m2max", DAY) == {}


@pytest.mark.parametrize("env, system, chip, expected", [
    ({}, "Darwin", "Apple M2 Max", ("", "SiliconBench's legacy root, Apple M2 Max's")),
    ({}, "Darwin", "Apple M5 Pro", ("m5pro", "the chip, Apple M5 Pro")),
    ({}, "Darwin", "Apple M3 Ultra", ("m3ultra", "the chip, Apple M3 Ultra")),
    ({}, "Darwin", "", ("unknown-apple", "no chip name")),
    ({}, "Linux", "Intel(R) Xeon(R)", None),
    ({"APPLEBENCH_RESULTS_SUBDIR": ""}, "Linux", "Intel(R) Xeon(R)", ("", "APPLEBENCH_RESULTS_SUBDIR")),
    ({"APPLEBENCH_RESULTS_SUBDIR": "m5pro"}, "Darwin", "Apple M2 Max", ("m5pro", "APPLEBENCH_RESULTS_SUBDIR")),
])
def test_siliconbench_s_folder_is_chosen_as_its_config_sh_chooses_it(env, system, chip, expected):
    assert siliconbench_subdir(env, system=system, chip=chip) == expected
