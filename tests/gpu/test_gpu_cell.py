"""The GPU tier (`make test-gpu`): a real transformers chat cell on CUDA, and a GPU held by another process.

Where `nvidia-smi` lists a GPU and the user's own transformers (`TRANSFORMERS=/path/to/transformers`,
else `transformers` on PATH) runs on a Python whose torch has CUDA, the cell runs the way a user
runs it, `pytest -m "chat and hf_transformers"` in a fresh pytest process with that transformers
as `TRANSFORMERS`, on the built-in tiny model (built here: nothing is downloaded), and the result
is checked for what a GPU run must record: the CUDA platform, the resource sidecar's GPU telemetry
(utilisation, power, SM and memory clocks in every sample), and each level's GPU energy with the
idle power subtracted and its GPU utilisation. `cellbench eval precheck` must then name, by PID, a
process this test starts that holds GPU memory. Elsewhere every test is skipped, saying why in one
line. The tests' timeouts add up to 7.5 minutes, so the tier ends within 8 on any machine. It has
not run on a GPU yet (none in this repository's CI, nor where it was written): the result keys it
reads are those the result model is to carry, checked where it first runs on one. In a container
whose PID namespace hides other processes from `nvidia-smi`, the precheck test fails: the
precheck cannot name a process it is not shown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from functools import cache
from pathlib import Path

import psutil
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from bench.setup.installs.recipes import installed_versions, script_python
from tests.support.busy import HOST_LOCK_WAIT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.gpu]

CUDA_PLATFORM = "linux-x86_64+cuda"
RUN_MARK = "CELLBENCH_GPU_TEST_RUN"  # every process the cell's session starts inherits it: a leak is found by it
TORCH_PROBE = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
               "'available': torch.cuda.is_available()}))")
HOLD = ("import sys, torch; held = torch.empty(256 << 20, dtype=torch.uint8, device='cuda'); "
        "torch.cuda.synchronize(); print('held', flush=True); sys.stdin.read()")


@cache
def cuda_transformers() -> tuple[Path, list[str]] | str:
    """(the user's transformers, its Python as an argv) where both a GPU and a CUDA torch are
    here; else the one-line reason the tier is skipped."""
    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi not found: no NVIDIA GPU here"
    machine = detect()
    if not machine.gpus:
        return f"nvidia-smi lists no GPU{': ' + machine.gpu_probe_error if machine.gpu_probe_error else ''}"
    named = os.environ.get("TRANSFORMERS") or shutil.which("transformers")
    if not named:
        return "no transformers of your own: set TRANSFORMERS=/path/to/transformers (or put it on PATH)"
    script = Path(named)
    python = script_python(script)
    if python is None:
        return f"{script} is not a Python console script: its torch cannot be asked"
    try:
        done = subprocess.run([*python, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)
        torch = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return f"{python[0]} (the Python of {script}) cannot import torch"
    if torch["cuda"] is None:
        return f"torch {torch['torch']} in {python[0]} is a build without CUDA"
    if not torch["available"]:
        return f"torch {torch['torch']} in {python[0]} (CUDA {torch['cuda']}) finds no CUDA device"
    return script, python


@pytest.fixture(scope="module")
def users_transformers() -> tuple[Path, list[str]]:
    found = cuda_transformers()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def started_by(mark: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_MARK) == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:  # gone meanwhile, or not ours to read
            pass
    return found


@pytest.mark.integration
@pytest.mark.timeout(330)  # with the precheck test's 120 s: the tier ends within 8 minutes
def test_a_transformers_cell_on_cuda_records_gpu_telemetry_and_energy_above_idle(users_transformers, tmp_path):
    script, python = users_transformers
    version = installed_versions(python, ("transformers",))["transformers"]
    results, mark = tmp_path / "results", str(tmp_path)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat and hf_transformers",
           "--results-dir", str(results), "--requests", "16", "--concurrency", "1,4", "--warmup", "2",
           "--port", "0", "--host-lock-timeout", str(HOST_LOCK_WAIT_S)]
    env = {**os.environ, "TRANSFORMERS": str(script), RUN_MARK: mark}
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=env)
    _, leaked = psutil.wait_procs(started_by(mark), timeout=5)
    assert not leaked, f"left running: {[(p.pid, p.cmdline()) for p in leaked]}"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = [p for p in results.rglob("hf_transformers_*.json") if p.parent.name == "chat"]
    result = json.loads(path.read_text())
    assert_ok_unless_client_limited(result["verdict"], "hf_transformers-chat on CUDA")
    assert result["framework"]["platform"] == CUDA_PLATFORM, result["framework"]
    assert (result["framework"]["install_source"], result["framework"]["version"]) == ("$TRANSFORMERS", version)
    assert result["machine"]["gpus"], result["machine"]

    for server in result["servers"]:
        samples = [json.loads(line) for line in (path.parent / server["resources"]["path"]).read_text().splitlines()]
        gpus = [gpu for sample in samples for gpu in sample.get("gpu", ())]
        assert gpus, f"no GPU entry in {server['resources']['path']}"
        for gpu in gpus:
            for key in ("util_percent", "power_w", "clock_mhz", "mem_clock_mhz"):
                assert gpu.get(key) is not None, (key, gpu)
            assert gpu["clock_mhz"] > 0 and gpu["mem_clock_mhz"] > 0, gpu

    assert [level["concurrency"] for level in result["levels"]] == [1, 4]
    for level in result["levels"]:
        (energy,) = [entry for entry in level["energy"]["sources"] if entry["device"] == "gpu"]
        assert energy["idle_w"] > 0, energy
        assert energy["j_per_output_token_above_idle"] is not None, energy
        assert energy["j_per_output_token_above_idle"] < energy["j_per_output_token"], energy
        util = level["gpu"]
        assert 0 <= util["util_mean_percent"] <= util["util_max_percent"] <= 100, util


@pytest.mark.session
@pytest.mark.timeout(120)
def test_precheck_names_a_process_holding_gpu_memory_by_its_pid(users_transformers):
    _, python = users_transformers
    holder = subprocess.Popen([*python, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.append(holder.stdout.readline() if holder.stdout else ""))
        reader.start()
        reader.join(timeout=45)
        assert said == ["held\n"], f"the process meant to hold GPU memory did not (exit {holder.poll()})"
        done = subprocess.run([sys.executable, "-m", "bench.cli", "eval", "precheck"], cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        lines = [line for line in done.stdout.splitlines() if f" is used by pid {holder.pid} (" in line]
        assert lines and lines[0].startswith("✗ GPU "), done.stdout + done.stderr
        assert done.returncode == 1, "a held GPU is a ✗: the eval run would not start"
    finally:
        if holder.stdin:
            holder.stdin.close()  # it reads its stdin to the end, then exits
        try:
            holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
