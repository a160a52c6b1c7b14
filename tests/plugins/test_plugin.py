"""The plugin in real pytest sessions: verdicts become outcomes, categories and one summary line;
the suspicious flag against a cell's previous result; rate-limited progress lines."""

from __future__ import annotations

import ast
import fcntl
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, cast

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.core.metrics import summarize_level
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.core.result.files import cell_paths, validate
from bench.core.verdicts import Evidence, Identity, classify
from bench.host.machine import detect
from bench.host.ports import free_port
from bench.load import ClientHealth, LevelConfig, LevelRun, Progress
from bench.load.watch.progress import ProgressLine
from bench.reports.review import columns
from bench.run.cell_result import CellHistory
from fixtures import servers

CELLS = """
import pytest
from bench.run.cell import CellOutcome
from bench.core.verdicts import CellVerdict, Verdict

@pytest.mark.parametrize("verdict", ["ok", "degraded", "wrong-model", "all-failed", "skipped"])
def test_cell(verdict, enforce_verdict):
    enforce_verdict(CellOutcome(CellVerdict(Verdict(verdict), f"because {verdict}"), None))
"""


EXPECTED = {"passed": 1, "failed": 2, "skipped": 1, "degraded": 1}


@pytest.fixture
def cells(pytester: pytest.Pytester):
    pytester.makepyfile(test_fake_cells=CELLS)
    return pytester


def test_verdicts_map_to_outcomes_and_categories(cells):
    result = cells.runpytest("-v")
    assert result.parseoutcomes() == EXPECTED
    result.stdout.fnmatch_lines(
        [
            "*test_cell?ok? OK*",
            "*test_cell?degraded? DEGRADED*",
            "*test_cell?wrong-model? WRONG-MODEL*",
            "*test_cell?all-failed? ALL-FAILED*",
            "*test_cell?skipped? SKIPPED (because skipped)*",
            "wrong-model: because wrong-model",
            "*cellbench verdicts: 1 ok, 1 degraded, 1 all-failed, 1 wrong-model, 1 skipped*",
            "WRONG-MODEL *test_cell?wrong-model? - Failed: wrong-model*",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_strict_fails_degraded_cells(cells):
    result = cells.runpytest("--strict-verdicts", "-k", "degraded")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*degraded: because degraded*"])


FINISHED_HOOK = """
import json, os

def pytest_cellbench_cell_finished(config, nodeid, cell):
    with open("finished.jsonl", "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "worker": hasattr(config, "workerinput"), "nodeid": nodeid,
                             "cell": cell.to_json()}) + "\\n")
"""


def finished_calls(pytester: pytest.Pytester) -> dict[str, dict]:
    lines = (pytester.path / "finished.jsonl").read_text().splitlines()
    calls = [json.loads(line) for line in lines]
    assert len(calls) == len({c["nodeid"] for c in calls}), "one call per cell"
    return {c["nodeid"].split("[")[1].rstrip("]"): c for c in calls}


def test_a_conftest_implements_the_cell_finished_hook(cells):
    cells.makeconftest(FINISHED_HOOK)
    cells.runpytest().assert_outcomes(passed=1, failed=2, skipped=1)
    calls = finished_calls(cells)
    assert sorted(calls) == ["all-failed", "degraded", "ok", "skipped", "wrong-model"]
    degraded = calls["degraded"]["cell"]
    assert (degraded["kind"], degraded["verdict"], degraded["reason"]) == ("cell", "degraded", "because degraded")
    assert degraded["framework"] is None, "a stand-in test, not a (framework, split) cell: no journal"


@pytest.mark.session
def test_verdicts_travel_from_xdist_workers_to_the_controller(cells):
    cells.makeconftest(FINISHED_HOOK)
    result = cells.runpytest_subprocess("-n", "2")
    assert result.parseoutcomes() == EXPECTED
    result.stdout.fnmatch_lines(["*cellbench verdicts: 1 ok, 1 degraded, 1 all-failed, 1 wrong-model, 1 skipped*"])
    calls = finished_calls(cells)
    assert len(calls) == 5 and len({c["pid"] for c in calls.values()}) == 1, "fired on one process"
    assert not any(c["worker"] for c in calls.values()), "on the controller"
    assert calls["wrong-model"]["cell"]["verdict"] == "wrong-model"


def test_each_plugin_module_is_an_entry_point_and_in_the_root_conftest_under_its_own_name(pytester):
    """An installed cellbench and this checkout's conftest load the same modules under the same
    names, so pytest registers each once."""
    ours = ("bench.", "fixtures.")
    entry_points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")
                    if ep.value.startswith(ours)}
    assert all(name == value for name, value in entry_points.items()), entry_points
    tree = ast.parse((PROJECT_ROOT / "conftest.py").read_text())
    (listed,) = [ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "pytest_plugins"]
    assert sorted(p for p in listed if p.startswith(ours)) == sorted(entry_points)
    config = pytester.parseconfigure()
    registered = [name for name, plugin in config.pluginmanager.list_name_plugin()
                  if isinstance(plugin, types.ModuleType) and plugin.__name__.startswith(ours)]
    assert sorted(registered) == sorted(entry_points)


def test_unconfigure_unregisters_what_configure_registered(cells):
    reprec = cells.inline_run("-k", "ok")
    config = reprec.getcall("pytest_sessionstart").session.config
    names = ("cellbench-recorder", "cellbench-html", "cellbench-transport", "cellbench-eval-recorder",
             "cellbench-xdist-run-id", "cellbench-xdist-budget")
    assert [name for name in names if config.pluginmanager.get_plugin(name) is not None] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--concurrency", "1,x"], "*--concurrency takes comma-separated integers*"),
        (["--concurrency", "0"], "*--concurrency levels must be >= 1*"),
        (["--model", "no-such-model"], "*no-such-model*"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args, message):
    pytester.makepyfile(test_nothing="def test_nothing(): pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


# ---------------------------------------------------------------- results written by hand


def hand_result(split_dir: Path, *, run_id: str, framework: str = "llamacpp", tps: float = 100.0,
                levels: tuple[int, ...] = (1, 2), failed: int = 0, finished_at: str = "2026-11-29T10:00:00+00:00",
                log_text: str = "main: server is listening on http://127.0.0.1:8001\n", write: bool = True) -> dict:
    """A schema-valid result of this machine, made without a server: synthetic requests (4 per
    level, `failed` of them HTTP 500) summarised by bench.core.metrics, output throughput set to `tps`,
    and a server log per level holding `log_text`. Written under its canonical name."""
    split_dir.mkdir(parents=True, exist_ok=True)
    summaries: list[Any] = []  # Level blocks, as summarize_level writes them
    servers: list[dict] = []
    for c in levels:
        records = []
        for i in range(4):
            t = i * 0.5
            rec = RequestRecord(index=i, prompt_name=f"p{i}", t_sched=t, t_send=t, t_first_byte=t + 0.01,
                                t_first_token=t + 0.02, t_end=t + 0.2,
                                chunk_times=[t + 0.02 + k * 0.02 for k in range(10)],
                                usage_completion_tokens=10, usage_prompt_tokens=7, finish_reason="stop",
                                served_model="tiny", http_status=200, done_marker=True)
            if i < failed:
                rec = RequestRecord(index=i, prompt_name=f"p{i}", t_sched=t, t_send=t, t_end=t + 0.01, http_status=500,
                                    error=RequestError(ErrorType.HTTP_5XX, "HTTP 500: boom", 500, "boom"))
            records.append(rec)
        run = LevelRun(LevelConfig("http://127.0.0.1:1", "tiny", c, 4, 0), records, [], 0.0, 1.7, 1.8e9, False, None,
                       ClientHealth(0.05, 1.0, 1.0))
        summary = summarize_level(run)
        summary["output_throughput_tps"] = tps if summary["successful"] else 0.0
        summaries.append(summary)
        log = split_dir / "logs" / f"{framework}_{run_id}_c{c}.server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(log_text)
        servers.append({"levels": [c], "port": 8001, "command": {"argv": ["llama-server"], "env": {}}, "log": str(log),
                        "ready_after_s": 1.0, "exit": {"returncode": 0, "signal": None, "stopped_by_us": True}})
    verdict = classify(Evidence(levels=tuple(summaries), identity=Identity("tiny", ("tiny",), ("tiny",))))
    result = {
        "schema_version": 1, "run_id": run_id,
        "framework": {"name": framework, "version": "b9999", "install_source": "test", "install": {}},
        "split": split_dir.name,
        "model": {"profile": "tiny", "results_name": split_dir.parent.parent.name, "format": "gguf", "path": None,
                  "requested": "tiny", "served": {"listed": ["tiny"], "responses": ["tiny"]}},
        "machine": detect().to_json() | {"slug": split_dir.parent.name},
        "run_config": {"levels": list(levels), "requests_per_level": 4, "warmup": 0, "levels_share_server": False,
                       "request_timeout_s": 300.0, "request_extras": {},
                       "prompts": {"source": "chat", "format": "cellbench", "count": 4, "tools_param": False}},
        "servers": servers, "started_at": finished_at, "finished_at": finished_at, "duration_s": 2.0,
        "levels": summaries, "verdict": verdict.to_json(), "requests_file": f"{framework}_{run_id}.requests.jsonl",
    }
    validate(result)
    if write:
        (split_dir / f"{framework}_{run_id}.json").write_text(json.dumps(result))
    return result


def cell_dir(root: Path, split: str = "chat") -> Path:
    return root / "tiny" / detect().slug / split


# ---------------------------------------------------------------- suspicious


def _suspicious(paths, result):
    """The cell's suspicious check, on a reading of its folder taken now."""
    return CellHistory.read(paths.split_dir).suspicious(paths.result, result)


def test_suspicious_against_the_previous_result_of_the_same_cell(tmp_path):
    split_dir = cell_dir(tmp_path)
    hand_result(split_dir, run_id="20261122T100000Z-aaaa", tps=1000.0, finished_at="2026-11-22T10:05:00+00:00")
    current = hand_result(split_dir, run_id="20261129T100000Z-bbbb", tps=50.0, write=False)
    paths = cell_paths(tmp_path, "tiny", detect().slug, "chat", "llamacpp", current["run_id"])
    reason = _suspicious(paths, current)
    assert reason and "20261122T100000Z-aaaa" in reason and "c=1: 50.0 tok/s vs 1000.0 tok/s (20.0x lower)" in reason
    # within 10x: not suspicious
    assert _suspicious(paths, hand_result(split_dir, run_id="20261129T100000Z-bbbb", tps=150.0, write=False)) is None


def test_suspicious_baseline_is_chosen_by_run_id_never_mtime_nor_across_splits(tmp_path):
    chat = cell_dir(tmp_path)
    hand_result(chat, run_id="20261122T100000Z-aaaa", tps=100.0)  # the real previous result
    stale = hand_result(chat, run_id="20260701T100000Z-cccc", tps=1.0)  # older run, newest mtime
    os.utime(chat / f"llamacpp_{stale['run_id']}.json", (time.time() + 3600,) * 2)
    hand_result(chat, run_id="20261122T100000Z-dddd", framework="vllm", tps=1.0)  # another framework
    hand_result(cell_dir(tmp_path, "agent"), run_id="20261122T100000Z-eeee", tps=1.0)  # another split
    current = hand_result(chat, run_id="20261129T100000Z-bbbb", tps=120.0, write=False)
    paths = cell_paths(tmp_path, "tiny", detect().slug, "chat", "llamacpp", current["run_id"])
    assert _suspicious(paths, current) is None
    # and a first result has nothing to compare with
    first = hand_result(cell_dir(tmp_path / "fresh"), run_id="20261129T100000Z-bbbb", write=False)
    assert _suspicious(cell_paths(tmp_path / "fresh", "tiny", detect().slug, "chat", "llamacpp", first["run_id"]),
                       first) is None


STAND_IN_CELLS = """
import json
from pathlib import Path

from bench.run.cell import CellOutcome
from bench.core.verdicts import CellVerdict, Verdict

CELLS = json.loads(Path(__file__).with_name("cells.json").read_text())


def test_cell(cell_id, enforce_verdict):
    spec = CELLS["-".join(cell_id)]
    v = spec["result"]["verdict"]
    verdict = CellVerdict(Verdict(v["verdict"]), v["reason"], tuple(v["annotations"]))
    enforce_verdict(CellOutcome(verdict, Path(spec["path"]), spec["result"]))
"""


def stand_in_cells(directory: Path, results: dict[str, dict]) -> None:
    """A test file in `directory` with real cell ids (`test_cell[llamacpp-chat]`) whose outcomes
    are the given results, written where a cell writes them (`directory/results/...`): the
    journal and comparison see them as real. Run it with `--results-dir results`."""
    cells = {}
    for cell, result in results.items():
        split_dir = cell_dir(directory / "results", result["split"])
        path = split_dir / f"{result['framework']['name']}_{result['run_id']}.json"
        path.write_text(json.dumps(result))
        cells[cell] = {"path": str(path), "result": result}
    (directory / "cells.json").write_text(json.dumps(cells))
    (directory / "test_stand_in_cells.py").write_text(STAND_IN_CELLS)


def test_suspicious_goes_to_the_verdict_annotations_and_the_journal(pytester: pytest.Pytester):
    split_dir = cell_dir(pytester.path / "results")
    result = hand_result(split_dir, run_id="20261129T100000Z-bbbb", write=False)
    reason = "output throughput against run 20261122T100000Z-aaaa: c=1: 100.0 tok/s vs 1000.0 tok/s (10.0x lower)"
    result["verdict"] = {**result["verdict"], "annotations": ["suspicious"], "suspicious": reason}  # as run_cell does
    stand_in_cells(pytester.path, {"llamacpp-chat": result})
    proc = pytester.runpytest("-k", "llamacpp-chat", "--results-dir", "results")
    proc.assert_outcomes(passed=1)
    (journal,) = split_dir.parent.glob("weekly_*.journal.md")
    text = journal.read_text()
    assert ("| llamacpp | ok | 8/8 requests ok (failure rate 0.0%, 95% CI 0.0-32.4%); c=1: 100.0 tok/s, "
            "c=2: 100.0 tok/s (suspicious) |") in text
    assert f"## Suspicious Results\n\n- llamacpp / chat: {reason}\n" in text
    state = json.loads(journal.with_suffix(".json").read_text())
    assert state["cells"][0]["evidence"]["suspicious"] == reason
    assert state["cells"][0]["annotations"] == ["suspicious"]


def test_terminal_summary_lists_the_files_written(pytester: pytest.Pytester):
    stand_in_cells(pytester.path, {"llamacpp-chat": hand_result(cell_dir(pytester.path / "results"),
                                                           run_id="20261129T100000Z-bbbb", write=False)})
    proc = pytester.runpytest("-k", "llamacpp-chat", "--results-dir", "results",
                              "--html", "out/report.html")
    proc.assert_outcomes(passed=1)
    split_dir = cell_dir(pytester.path / "results")
    proc.stdout.fnmatch_lines([
        "*cellbench verdicts: 1 ok*",
        f"  {split_dir / 'comparison.json'}",
        f"  {split_dir / 'REPORT.md'}",
        f"  {split_dir / 'comparison.csv'}",
        f"  {split_dir / 'plots'}{os.sep}",
        f"  {split_dir.parent}{os.sep}weekly_*.journal.md",
        f"  {pytester.path / 'out' / 'report.html'}",
    ])
    assert (pytester.path / "out" / "report.html").is_file()


# ---------------------------------------------------------------- progress lines


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def feed(line: ProgressLine, clock: FakeClock, concurrency: int, seconds: int, total: int = 1000) -> None:
    """Report once a second for `seconds` seconds of a level, as the load generator does: 250
    output events a second on average, in bursts (500, 0, 500, ...) as batches arrive."""
    for s in range(1, seconds + 1):
        clock.now += 1.0
        done = total if s == seconds else s
        line(concurrency, Progress(done=done, total=total, failed=s // 20, output_tps=500.0 * (s % 2),
                                   elapsed_s=float(s), output_events=250 * s))


def test_progress_is_one_line_per_interval_and_none_for_short_levels():
    clock, lines = FakeClock(), []
    line = ProgressLine("llamacpp-chat", lines.append, interval_s=30, clock=clock)
    feed(line, clock, 1, 29)  # shorter than the interval: silent, the final report included
    assert lines == []
    feed(line, clock, 8, 100)  # lines at 30, 60 and 90 s; the last report (done) writes nothing
    assert lines == [
        "llamacpp-chat c=8: 30/1000 requests (1 failed), 250.0 tok/s, 30 s",
        "llamacpp-chat c=8: 60/1000 requests (3 failed), 250.0 tok/s, 60 s",
        "llamacpp-chat c=8: 90/1000 requests (4 failed), 250.0 tok/s, 90 s",
    ]
    lines.clear()
    feed(line, clock, 8, 45)  # the same concurrency again (elapsed restarts): a new level
    assert [ln.split(": ")[1].split(" ")[0] for ln in lines] == ["30/1000"]


def test_progress_interval_zero_is_off_and_reports_may_arrive_late():
    clock, lines = FakeClock(), []
    feed(ProgressLine("x", lines.append, interval_s=0, clock=clock), clock, 1, 100)
    assert lines == []
    line = ProgressLine("x", lines.append, interval_s=30, clock=clock)
    clock.now += 40
    line(1, Progress(done=5, total=10, failed=0, output_tps=9.0, elapsed_s=40.0, output_events=40))  # already late
    line(1, Progress(done=6, total=10, failed=0, output_tps=9.0, elapsed_s=41.0, output_events=41))
    assert lines == ["x c=1: 5/10 requests, 1.0 tok/s, 40 s"]


PROGRESS_CELL = """
import time

from bench.load import Progress

def test_cell(cell_config):
    def report(done, elapsed_s):
        cell_config.progress(4, Progress(done=done, total=10, failed=0, output_tps=99.0, elapsed_s=elapsed_s,
                                         output_events=int(12.5 * elapsed_s)))

    report(1, 0.0)
    time.sleep(1.6)
    report(2, 1.6)  # past the 1.5 s interval: a line
    report(3, 1.7)  # too soon after it: none
"""


@pytest.mark.parametrize("xdist", [False, True])
@pytest.mark.session
def test_progress_lines_reach_the_terminal(pytester: pytest.Pytester, xdist):
    pytester.makepyfile(test_progress=PROGRESS_CELL)
    args = ["-k", "llamacpp-chat", "--progress-interval", "1.5"]
    if xdist:  # a worker writes to its stderr, inherited from the controller
        proc = pytester.runpytest_subprocess(*args, "-n", "1")
        proc.stderr.fnmatch_lines(["[[]gw0[]] llamacpp-chat c=4: 2/10 requests, 12.5 tok/s, 2 s"])
    else:
        proc = pytester.runpytest_subprocess(*args)
        proc.stdout.fnmatch_lines(["llamacpp-chat c=4: 2/10 requests, 12.5 tok/s, 2 s"])
    assert "3/10" not in proc.stdout.str() + proc.stderr.str(), "one line per interval"
    proc.assert_outcomes(passed=1)


# ---------------------------------------------------------------- resume and the host lock


def real_cells(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """bench/test_cells.py itself in the pytester directory, with a host lock of its own; the
    arguments that run its `openai` cells against an endpoint nobody listens on."""
    monkeypatch.setenv("CELLBENCH_CACHE", str(pytester.path / "cache"))  # cache_root(): the host lock's home
    pytester.makepyfile(test_cells=(PROJECT_ROOT / "bench" / "test_cells.py").read_text())
    return ("-p", "bench.plugins.cells", "-p", "fixtures.cells", "-p", "fixtures.servers",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",
            "--endpoint", "http://127.0.0.1:9", "--results-dir", "results")


def cell_reports(proc: pytest.RunResult) -> dict[str, dict]:
    """Each cell's record (bench.plugins.hooks.CellRecord) as JSON, by cell id, from the hook
    `pytest_cellbench_cell_finished` (an inline run keeps its hook calls)."""
    calls = proc.reprec.getcalls("pytest_cellbench_cell_finished")  # type: ignore[attr-defined]
    return {call.nodeid.split("[")[1].rstrip("]"): call.cell.to_json() for call in calls}


def test_a_cell_that_cannot_run_here_skips_without_waiting_for_the_host_lock(pytester: pytest.Pytester, monkeypatch):
    """Another session holds the host: a cell of a framework that cannot run on this platform
    starts nothing, so it skips at once instead of failing 'host busy' after the lock timeout."""
    monkeypatch.setenv("CELLBENCH_CACHE", str(pytester.path / "cache"))
    pytester.makepyfile(test_cells=(PROJECT_ROOT / "bench" / "test_cells.py").read_text())
    name = next(n for n, a in sorted(adapters.registry().items()) if a.platform_here() is None)
    lock = pytester.path / "cache" / "host.lock"
    lock.parent.mkdir()
    with lock.open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = pytester.runpytest("-p", "bench.plugins.cells", "-p", "fixtures.cells", "-p", "fixtures.servers",
                                    "-W", "ignore::pytest.PytestAssertRewriteWarning", "-k", f"{name}-chat",
                                    "--host-lock-timeout", "2", "--results-dir", "results", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*{name} runs on *; this is *"])


def test_a_cell_kept_by_skip_existing_reports_the_kept_verdict(pytester: pytest.Pytester, monkeypatch):
    args = real_cells(pytester, monkeypatch)
    run_id = "20261129T100000Z-aaaa"
    root = pytester.path / "results"
    kept = {"chat": hand_result(cell_dir(root, "chat"), run_id=run_id, framework="openai", failed=2),
            "agent": hand_result(cell_dir(root, "agent"), run_id=run_id, framework="openai")}
    assert [kept["chat"]["verdict"]["verdict"], kept["agent"]["verdict"]["verdict"]] == ["degraded", "ok"]

    proc = pytester.runpytest(*args, "-v", "--skip-existing", "--run-id", run_id)
    assert proc.parseoutcomes() == {"passed": 1, "degraded": 1}
    proc.stdout.fnmatch_lines(["*test_cell?openai-chat? DEGRADED*", "*test_cell?openai-agent? OK*",
                               "*cellbench verdicts: 1 ok, 1 degraded*"])
    reports = cell_reports(proc)
    for split, result in kept.items():
        data, name = reports[f"openai-{split}"], f"openai_{run_id}.json"
        assert data["verdict"] == result["verdict"]["verdict"] and data["annotations"][-1] == "resumed"
        assert data["reason"] == f"resumed: kept {name}: {result['verdict']['reason']}"
        # its HTML row
        assert data["row"] == columns.row_data(cast(Any, result)) and data["row"]["output_tps"] == 100.0
        assert sorted(p.name for p in cell_dir(root, split).glob("openai_*.json")) == [name], "nothing re-measured"
    (journal,) = cell_dir(root).parent.glob("weekly_*.journal.json")
    entries = {c["split"]: c for c in json.loads(journal.read_text())["cells"]}
    assert [entries["chat"]["verdict"], entries["agent"]["verdict"]] == ["degraded", "ok"]
    assert entries["chat"]["reason"] == reports["openai-chat"]["reason"] and "resumed" in entries["chat"]["annotations"]
    assert "| openai | ok | resumed: kept" in journal.with_suffix(".md").read_text()

    strict = pytester.runpytest(*args, "--skip-existing", "--run-id", run_id, "--strict-verdicts", "-k", "chat")
    strict.assert_outcomes(failed=1)  # as a fresh degraded cell would


HOLDER_RECORD = """
import json, os

def test_holder(host_lock):
    record = json.loads(host_lock.read_text())
    assert record["pid"] == os.getpid() and "pytest" in record["command"] and record["since"] > 0
"""


@pytest.mark.session
def test_a_cell_that_waits_out_the_host_lock_is_a_failed_verdict_naming_the_holder(pytester: pytest.Pytester,
                                                                                   monkeypatch):
    args = real_cells(pytester, monkeypatch)
    lock = pytester.path / "cache" / "host.lock"
    lock.parent.mkdir()
    with lock.open("a+") as held:  # another session's cell, two hours into its run
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write(json.dumps({"pid": 4242, "command": "pytest -m chat", "since": time.time() - 7200}) + "\n")
        held.flush()
        proc = pytester.runpytest(*args, "-k", "openai-chat", "--host-lock-timeout", "1")
    proc.assert_outcomes(failed=1)
    reason = f"host busy: waited 1 s for the host lock {lock}, held by pid 4242 (pytest -m chat) for 2 h 0 min"
    proc.stdout.fnmatch_lines([f"failed: {reason}", "*cellbench verdicts: 1 failed*"])
    data = cell_reports(proc)["openai-chat"]
    assert (data["verdict"], data["reason"], data["result_path"]) == ("failed", reason, None)
    assert data["row"]["level"] is None  # an HTML row with the verdict and no numbers
    (journal,) = cell_dir(pytester.path / "results").parent.glob("weekly_*.journal.md")
    assert f"### openai / chat: failed\n- Reason: {reason}\n" in journal.read_text()
    assert not list((pytester.path / "results").rglob("openai_*.json")), "no server, no result file"

    # The lock is free now: a cell takes it and says who it is (in a process of its own, whose
    # command line is a pytest one whether or not this test runs under xdist).
    pytester.makepyfile(test_holder=HOLDER_RECORD)
    pytester.runpytest_subprocess("-p", "fixtures.servers", "test_holder.py").assert_outcomes(passed=1)


@pytest.mark.integration  # starts the fault server and waits out a held lock: ~5 s
def test_the_budget_counts_the_wait_for_the_host_lock(pytester: pytest.Pytester, monkeypatch):
    """pytest-timeout's clock starts at setup, so the cell's budget does too: a cell that got the
    lock after its budget was spent ends capped before its first level, instead of measuring
    into the backstop. The endpoint is the fault server, answering well."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.support.faultserver", "--port", str(port), "--mode", "ok"],
                              cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        args = [*real_cells(pytester, monkeypatch)[:-4], "--endpoint", f"http://127.0.0.1:{port}", "--results-dir",
                "results", "--ready-timeout", "30"]
        lock = pytester.path / "cache" / "host.lock"
        lock.parent.mkdir()
        held = lock.open("a+")
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = servers._wait_for_lock

        def released_3_s_after_the_wait_began(handle, timeout_s, said):
            # The budget started at setup, before this wait: 3 s of it spend the 2 s budget however
            # long pytest took to get here (a timer started beside runpytest could run out first).
            threading.Timer(3.0, held.close).start()  # closing the file lets the lock go
            return waiting(handle, timeout_s, said)

        monkeypatch.setattr(servers, "_wait_for_lock", released_3_s_after_the_wait_began)
        proc = pytester.runpytest(*args, "-k", "openai-chat", "--cell-budget", "2", "--host-lock-timeout", "60")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    data = cell_reports(proc)["openai-chat"]
    assert (data["verdict"], data["reason"]) == ("capped", "cell budget of 2 s spent before c=1")
