"""`cellbench noise FRAMEWORK`: a real llama.cpp cell run with --rounds, its floor stored where
`cellbench compare` finds it; its usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.cli.decisions.noise import describe, floor_due
from bench.cli.main import main as cellbench
from bench.core import noise
from bench.host.machine import detect
from tests.core.test_noise_floor import with_rounds
from tests.support.busy import assert_ok_unless_client_limited
from tests.support.results import synthetic_result

CELL_ARGS = ["--concurrency", "1", "--requests", "4", "--warmup", "0", "--port", "0"]


def noise_cli(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "bench.cli", "noise", "llamacpp", "--runs", "2", "--results-dir", str(root),
           *extra, "--", *CELL_ARGS]
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)


@pytest.mark.integration
def test_a_real_cell_of_two_rounds_leaves_a_floor_that_compare_uses(tmp_path: Path, llama_server):
    done = noise_cli(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    machine = detect().slug
    path = noise.floor_path(tmp_path, "tiny", machine, "chat", "llamacpp")
    assert f"written to {path} in " in done.stdout
    lines = done.stdout.splitlines()  # pytest's own output first
    head = next(i for i, line in enumerate(lines) if line.startswith("noise floor of llamacpp/chat on "))
    assert lines[head + 1].startswith("  c=1: output tok/s ")
    floor = noise.load(tmp_path, "tiny", machine, "chat", "llamacpp")
    assert floor is not None and floor.runs == 2 and floor.settings["requests_per_level"] == 4
    assert "output_throughput_tps" in floor.levels["c=1"]
    (result,) = (tmp_path / "tiny" / machine / "noise" / "runs" / "tiny" / machine / "chat").glob("llamacpp_*.json")
    assert floor.source == str(result) and not (tmp_path / "tiny" / machine / "chat").exists(), \
        "the measuring run is never the cell's newest result"


def test_a_floor_prints_each_levels_spread_as_a_percentage():
    floor = noise.measure(with_rounds(dict(synthetic_result(requests=12)), (1.0, 1.1, 0.95)))
    lines = describe(floor)
    assert lines[0].startswith(f"noise floor of llamacpp/chat on {floor.machine} (tiny), 3 runs, measured "
                               "2026-11-30T10:00:30Z, framework 1.0.0")
    assert lines[1].startswith("  c=1: output tok/s 7.7%, ") and "TTFT p50 (ms) 7.7%" in lines[1]


@pytest.mark.parametrize(("argv", "message"), [
    (["nosuch"], "no adapter named nosuch"),
    (["llamacpp", "--runs", "1"], "--runs must be at least 2"),
    (["llamacpp", "--model", "no-such-profile"], "no-such-profile"),
])
def test_usage_errors_exit_2_before_any_server(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        cellbench(["noise", *argv])
    assert caught.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.session
def test_help_names_the_pytest_arguments():
    done = subprocess.run([sys.executable, "-m", "bench.cli", "noise", "--help"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "cellbench noise llamacpp -- --requests 32" in " ".join(done.stdout.split())


def test_a_floor_is_due_when_missing_broken_or_of_another_version(tmp_path: Path):
    floor = noise.measure(with_rounds(dict(synthetic_result(requests=12))))
    args = (tmp_path, "tiny", floor.machine, "chat", "llamacpp")
    assert floor_due(*args, "1.0.0") == "no floor yet"
    path = noise.write(floor, noise.floor_path(*args))
    assert floor_due(*args, "1.0.0") is None, "the installed version measured it: kept"
    assert floor_due(*args, None) is None, "nothing installed to compare with: kept"
    assert floor_due(*args, "1.1.0") == "its floor was measured on llamacpp 1.0.0, 1.1.0 is installed"
    path.write_text("[]")
    broken = floor_due(*args, "1.0.0")
    assert broken is not None and broken.startswith("its floor file is broken (")


@pytest.mark.integration
def test_weekly_noise_runs_measure_before_the_splits_apart_from_the_cells_results(tmp_path: Path, llama_server):
    cmd = [sys.executable, "-m", "bench.cli", "weekly", "--no-branch", "--no-update", "--noise-runs", "2",
           "--frameworks", "llamacpp", "--splits", "chat", "--results-dir", str(tmp_path), "--", *CELL_ARGS]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800,
                          stdin=subprocess.DEVNULL)
    machine = detect().slug
    (cell,) = (tmp_path / "tiny" / machine / "chat").glob("llamacpp_*.json")
    # ok, or degraded because this busy host starved the client: the weekly run then exits 1, saying so
    verdict = assert_ok_unless_client_limited(json.loads(cell.read_text())["verdict"], "llamacpp/chat")
    assert done.returncode == (0 if verdict == "ok" else 1), done.stdout[-3000:] + done.stderr[-2000:]
    (journal,) = (tmp_path / "tiny" / machine).glob("weekly_*.journal.md")
    (note,) = [ln for ln in journal.read_text().splitlines() if "Noise floor llamacpp/chat" in ln]
    assert "measured, 2 runs in " in note and "because no floor yet" in note
    assert noise.load(tmp_path, "tiny", machine, "chat", "llamacpp") is not None
    assert json.loads(cell.read_text())["run_config"]["requests_per_level"] == 4, "the split's own cell"
