"""Eval rows from a project that uses sglang-omni's runner: its config format, its tables, its habits.

The user's project is a git repository in tmp_path holding `models/<model>/config.yaml` in that
runner's format (every field it reads), benchmark files whose docstring tables carry note
paragraphs, rows of several models and headers narrower than their cells, and a client of its
own that talks to the server and writes result JSON. `pytest -m eval` runs it against a real
llama-server on the tiny model, as the user would, with the files unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from bench.base.paths import PROJECT_ROOT
from bench.setup import model_files, profiles

pytestmark = pytest.mark.integration

HW = "Test CPU"
TAG = f"[{HW}, n=4, c=2]"

# The user's table: a note between heading and table, another model's rows that also contain the
# config substring and this hardware's tag, a header narrower than its cells.
ARITH_TABLES = f'''"""Arithmetic eval of a demo project.

Reference Results

Accuracy (summary)

Note (tiny): the tiny model is random, so its accuracy is near zero by design.

| Model | Config | accuracy | total | Source |
| ----- | ------ | -------- | ----- | ------ |
| Other-Model   | llamacpp, c=2 | 91.00%   | 4/4   | PR #9 {TAG}            |
| tiny          | llamacpp, c=2 | 10.00%   | 4/4   | PR #8 {TAG}            |
| Other-Model   | vllm, c=2     | 90.00%   | 4/4   | PR #9 [H200, n=4, c=2] |

Speed (speed)

| Model | Config | latency_p50_s | Source |
| ----- | ------ | ------------- | ------ |
| tiny          | llamacpp, c=2 | 0.500         | PR #8 [H200, n=4, c=2]            |
| Other-Model   | llamacpp, c=2 | 0.400         | PR #9 [H200, n=4, c=2]            |

Twice (summary)

| Model | Config | accuracy | Source |
| ----- | ------ | -------- | ------ |
| tiny          | llamacpp, c=2 | 1.00%    | PR #1 {TAG}            |
| tiny          | llamacpp, c=2 | 2.00%    | PR #2 {TAG}            |
"""

ANSWER = 42
'''

MMSU_TABLES = '''"""MMSU of a demo project: its rows need sglang-omni's router on GPUs.

Accuracy (accuracy)

| Model     | Config        | accuracy | total | Source                     |
| --------- | ------------- | -------- | ----- | -------------------------- |
| demo-omni | llamacpp, c=2 | 70.88%   | 5/5   | PR #3 [H200, n=4, c=2]     |
"""
'''

# The project's own client: asks the server, writes the result JSON the rows read.
CLIENT = '''
import argparse, json, os, sys, time, urllib.request
p = argparse.ArgumentParser()
for flag in ("--port", "--model", "--output-dir", "--asr-device", "--max-samples"):
    p.add_argument(flag)
p.add_argument("--sleep", type=float, default=0)
a = p.parse_args()
time.sleep(a.sleep)
latencies = []
for i in range(4):
    body = {"model": a.model, "max_tokens": 4, "messages": [{"role": "user", "content": f"{i} + 1 ="}]}
    req = urllib.request.Request(f"http://127.0.0.1:{a.port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    json.load(urllib.request.urlopen(req, timeout=120))
    latencies.append(time.perf_counter() - t0)
latencies.sort()
result = {"summary": {"accuracy": 0.25, "correct": 1, "total_samples": 4, "failed_requests": 0},
          "speed": {"latency_p50_s": latencies[2]},
          "seen": {"python": sys.executable, "asr_device": a.asr_device, "cwd": os.getcwd(),
                   "omni_ci_home": os.environ.get("OMNI_CI_HOME"), "demo_flag": os.environ.get("DEMO_FLAG")}}
os.makedirs(a.output_dir, exist_ok=True)
json.dump(result, open(os.path.join(a.output_dir, "arith_results.json"), "w"))
'''

CLIENT_CMD = ("python benchmarks/eval/arith_client.py --port {port} --model {model} --output-dir {output_dir} "
              "--asr-device {asr_gpu}")


def _row(row_id: str, section: str, cells: dict, workload: str = "n=4, c=2", **extra) -> dict:
    return {"id": row_id, "file": "benchmarks/eval/benchmark_arith.py",
            "locate": {"section_substring": section, "config_substring": "llamacpp, c=2",
                       "source_workload": workload},
            "client": CLIENT_CMD, "result_json": "arith_results.json", "cells": cells, **extra}


ACC = {"accuracy": {"path": "summary.accuracy", "format": "{v:.2%}"},
       "total": {"paths": {"v": "summary.correct", "t": "summary.total_samples"}, "format": "{v}/{t}"}}
SPEED = {"latency_p50_s": {"path": "speed.latency_p50_s", "format": "{v:.3f}"}}


class Project:
    """The user's repository, a Hugging Face cache holding what its config lists, and runs of pytest."""

    def __init__(self, tmp: Path, rows: list[dict] | None = None, llama_server: str = "llama-server"):
        self.tmp, self.repo, self.llama_server = tmp, tmp / "demo-project", llama_server
        self.gguf = model_files.resolve(profiles.load_profile("tiny"), "gguf").path  # cellbench's tiny model
        evals = self.repo / "benchmarks" / "eval"
        evals.mkdir(parents=True)
        self.bench = evals / "benchmark_arith.py"
        self.bench.write_text(ARITH_TABLES)
        (evals / "benchmark_omni_mmsu.py").write_text(MMSU_TABLES)
        (evals / "arith_client.py").write_text(CLIENT)
        # The venv the config names: `python` in a client must be this one, found first on PATH.
        self.venv_python = tmp / "demo-venv" / "bin" / "python"
        self.venv_python.parent.mkdir(parents=True)
        self.venv_python.symlink_to(sys.executable)
        self.hf = tmp / "hf"
        for kind, repo in (("datasets", "demo/arith"), ("models", "demo/asr"), ("models", "demo/tiny-legacy")):
            (self.hf / "hub" / f"{kind}--{repo.replace('/', '--')}" / "snapshots" / "abc123").mkdir(parents=True)
        self.config = self.repo / "models" / "demo" / "config.yaml"
        self.config.parent.mkdir(parents=True)
        self.config.write_text(yaml.safe_dump(self._config(rows), sort_keys=False))
        self._git("init", "-q", "-b", "main")
        self._git("config", "user.name", "Demo Dev")  # who the refresh's commit is by
        self._git("config", "user.email", "dev@example.com")
        self._git("add", ".")
        self._git("commit", "-q", "-m", "the demo project")

    def _config(self, rows: list[dict] | None) -> dict:
        return {
            "name": "demo", "description": "a demo project's reference rows", "hf_model_id": "tiny",
            "hf_datasets": ["demo/arith"],
            "auxiliary_models": [{"kind": "hf", "id": "demo/asr", "install_cmd": "huggingface-cli download demo/asr",
                                  "used_for": "scoring"}],
            "python_packages": [{"name": "json", "install_cmd": "uv pip install json", "used_for": "results"}],
            "path_links": [{"target": "benchmarks/eval", "install_cmd": "git checkout benchmarks",
                            "used_for": "the tables"}],
            "default_venv_python": ["/nonexistent/venv/bin/python", str(self.venv_python)],
            "omni_ci_home": str(self.tmp / "ci-home"),
            "auto_env": {"DEMO_FLAG": "on"},
            "model_aliases": {"demo/tiny-legacy": ["tiny"]},
            # No default_server_profile (tests/eval/test_eval_config.py loads one): a row whose model
            # no profile claims then runs its own `server` template, as that runner does.
            "server_profile_by_hf_model_id": {"tiny": "llama", "demo/omni": "omni_router"},
            "server_profiles": {
                # sglang-omni's router: no `framework`; it needs GPUs, so its rows cannot run here.
                "omni_router": {"server_gpus": 2, "model_name": "demo-omni", "num_workers": 2,
                                "num_gpus_per_worker": 1, "worker_extra_args": "--config {repo_root}/omni.yaml",
                                "wait_timeout": 600, "server_boot_timeout_s": 660, "router_policy": "least_request",
                                "model_path": "{model}", "worker_host": "127.0.0.1"},
                "llama": {"framework": "llamacpp", "max_concurrency": 2, "server_boot_timeout_s": 300},
            },
            "rows": rows if rows is not None else [
                _row("arith-acc", "Accuracy (summary)", ACC, server_health="http://localhost:{port}/health",
                     server_extra_by_hardware={HW: "--no-warmup", "H200": "--flash-attn"}),
                _row("arith-speed", "Speed (speed)", SPEED),
                _row("arith-twice", "Twice (summary)", {"accuracy": ACC["accuracy"]}),
                {**_row("mmsu-router", "Accuracy", ACC), "file": "benchmarks/eval/benchmark_omni_mmsu.py",
                 "hf_model_id": "demo/omni"},
                # The runner's older style: no profile, the row's own shell `server` template. It serves
                # the tiny model under another name (model_aliases) and has a workload of its own, so it
                # lands on a row of its own: one locator and one workload twice would be refused.
                {**_row("arith-legacy", "Speed (speed)", SPEED, workload="n=4, c=2, shell"),
                 "hf_model_id": "demo/tiny-legacy",
                 "server": f"{self.llama_server} -m {self.gguf} --host 127.0.0.1 --port {{port}} --alias {{model}} "
                           "-c 2048 --slots --slot-save-path {repo_root}",
                 "server_gpus": 0, "server_boot_timeout_s": 300, "server_health": "http://localhost:{port}/health"},
            ],
        }

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HF_HOME": str(self.hf),
                "MODELSCOPE_CACHE": str(self.tmp / "modelscope"), **extra}

    def command(self, *args: str) -> list[str]:
        # No --eval-root: the config's own repository is the root.
        return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "eval",
                f"--eval-config={self.config}", f"--results-dir={self.tmp / 'results'}", f"--hardware={HW}", *args]

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args), cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                              check=False, env=self.env(**env))

    def state(self) -> dict:
        (path,) = (self.tmp / "results" / "eval" / "demo").glob("*/run-state.json")
        return json.loads(path.read_text())

    def lines(self) -> list[str]:
        return self.bench.read_text().splitlines()


def _imports(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ANSWER == 42


def test_the_runner_format_runs_unchanged_and_edits_as_the_runner_would(tmp_path, llama_server):
    project = Project(tmp_path, llama_server=llama_server)
    before = project.lines()
    result = project.run("--benchmarks", "arith")
    out = result.stdout
    assert result.returncode == 1, out[-4000:]  # arith-twice cannot be located: that is its test
    assert "cellbench eval precheck" in out and "✗" not in out.split("cellbench eval precheck")[1].split("===")[0]
    assert "test_eval_row[mmsu-router]" not in out, "--benchmarks arith selects the arith file's rows only"

    after = project.lines()
    # Replaced: this model's row with this hardware's tag, never Other-Model's row holding the same tag.
    tiny_acc = next(line for line in after if line.startswith("| tiny") and "25.00%" in line)
    assert tiny_acc.split("|")[3:5] == [" 25.00%   ", " 1/4   "] and "main " in tiny_acc and TAG in tiny_acc
    assert before.index("| tiny          | llamacpp, c=2 | 10.00%   | 4/4   | PR #8 " + TAG + "            |") \
        == after.index(tiny_acc)
    assert f"| Other-Model   | llamacpp, c=2 | 91.00%   | 4/4   | PR #9 {TAG}            |" in after
    # Appended: identity cells copied from tiny's row (not the other model's, last in the table),
    # widths from the data rows, not the narrower header.
    (speed,) = [line for line in after if TAG in line and "Speed" not in line and line not in before
                and line.count("|") == 5]
    cells = speed.split("|")
    assert cells[1] == " tiny          " and cells[2] == " llamacpp, c=2 " and len(cells[3]) == len(" 0.500         ")
    assert after.index(speed) == before.index("| Other-Model   | llamacpp, c=2 | 0.400         | PR #9 [H200, n=4, c=2]"
                                              "            |") + 1
    # Ambiguous: two rows of this model carry the tag; nothing is edited and no server started for it.
    assert "| tiny          | llamacpp, c=2 | 1.00%    | PR #1 " in project.bench.read_text()
    assert len(after) == len(before) + 2  # the speed row's and the legacy row's
    _imports(project.bench)

    state = project.state()
    rows = {row["id"]: row for row in state["rows"]}
    assert rows["arith-acc"]["edit"]["action"] == "replaced" and rows["arith-speed"]["edit"]["action"] == "appended"
    assert rows["arith-twice"]["status"] == "fail" and "2 rows match" in rows["arith-twice"]["reason"]
    assert rows["arith-twice"]["rounds"] == []
    assert "FAILED RUN arith-twice" in out and "edits replaced: 1" in out and "edits appended: 2" in out
    # The row's own server template ran under /bin/sh, placeholders filled, and appended a tiny row
    # with its own tag right after the speed row's.
    legacy = rows["arith-legacy"]
    assert legacy["edit"]["action"] == "appended"
    assert legacy["edit"]["line"] == rows["arith-speed"]["edit"]["line"] + 1
    legacy_line = after[legacy["edit"]["line"] - 1]
    assert legacy_line.split("|")[1] == " tiny          " and f"[{HW}, n=4, c=2, shell]" in legacy_line
    shell = legacy["rounds"][0]["server"]["command"]["argv"]
    assert shell[:2] == ["/bin/sh", "-c"] and shell[2].startswith(f"{llama_server} -m {project.gguf} ")
    assert "--alias demo/tiny-legacy" in shell[2] and f"--slot-save-path {project.repo.resolve()}" in shell[2]
    assert legacy["rounds"][0]["server"]["framework"] == "openai"
    # The round ran as that runner would: the config's venv `python`, {asr_gpu} = cpu, cwd = the
    # project, its auto_env and omni_ci_home, and this hardware's extra server arguments.
    first = rows["arith-acc"]["rounds"][0]
    seen = json.loads(Path(first["result_json"]).read_text())["seen"]
    assert seen == {"python": str(project.venv_python), "asr_device": "cpu", "cwd": str(project.repo.resolve()),
                    "omni_ci_home": str(tmp_path / "ci-home"), "demo_flag": "on"}
    argv = first["server"]["command"]["argv"]
    assert argv[-1] == "--no-warmup" and "--flash-attn" not in argv
    assert first["server"]["command"]["cwd"] == str(project.repo.resolve())
    # Supervision: one line per row per stage on the console; those and every server and client line in run.log.
    (run_log,) = (tmp_path / "results" / "eval" / "demo").glob("*/run.log")
    log = run_log.read_text()
    stages = ["arith-acc: START round 1: llamacpp server on 127.0.0.1:", "arith-acc: server ready after",
              "arith-acc: client running: python benchmarks/eval/arith_client.py --port",
              "arith-acc: PASS, table replaced line", "arith-speed: PASS, table appended line",
              "arith-twice: FAIL: locator in benchmark_arith.py: 2 rows match"]
    for stage in stages:
        assert stage in log and stage in out, stage
    assert "arith-acc server | " in log and "arith-acc server | " not in out, "the server's own output: run.log only"


def test_a_run_killed_after_its_second_row_keeps_both_rows_edits(tmp_path, llama_server):
    slow = _row("arith-slow", "Twice (summary)", {"accuracy": ACC["accuracy"]}, client=CLIENT_CMD + " --sleep 600")
    slow["locate"]["config_substring"] = "slow, c=2"  # no row yet: it would append one
    slow["new_row"] = {"Model": "tiny", "Config": "slow, c=2"}
    project = Project(tmp_path, rows=[_row("arith-acc", "Accuracy (summary)", ACC),
                                      _row("arith-speed", "Speed (speed)", SPEED), slow])
    proc = subprocess.Popen(project.command(), cwd=PROJECT_ROOT, env=project.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            states = list((tmp_path / "results" / "eval" / "demo").glob("*/run-state.json"))
            if states and len(json.loads(states[0].read_text())["rows"]) == 2:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(5)  # the third row's server is up and its client is sleeping
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the third row is running"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    text = project.bench.read_text()
    assert "| tiny          | llamacpp, c=2 | 25.00%   | 1/4   | main " in text, out[-3000:]
    assert sum(TAG in line and "Speed" not in line for line in text.splitlines()) == 5  # 4 before + the speed row
    assert "slow" not in text
    rows = {row["id"]: row for row in project.state()["rows"]}
    assert set(rows) == {"arith-acc", "arith-speed"} and all(r["edit"]["status"] == "ok" for r in rows.values())
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE], \
        "a server or client outlived the killed run"
    _imports(project.bench)


def _fake_nvidia_smi(folder: Path, me: int) -> Path:
    """An nvidia-smi that reports two GPUs, one of them held by process `me`."""
    script = folder / "nvidia-smi"
    script.write_text(f"""#!/bin/sh
case "$*" in
  *--query-gpu=index,uuid*) printf '0, GPU-aaa\\n1, GPU-bbb\\n' ;;
  *--query-compute-apps*) printf 'GPU-aaa, {me}, 40000, python3\\n' ;;
  *--query-gpu=name*) printf 'NVIDIA H200\\n' ;;
  *) printf 'NVIDIA-SMI fake\\n' ;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_precheck_lists_a_busy_gpu_by_pid_and_stops_the_run_before_any_server(tmp_path):
    project = Project(tmp_path)
    fake = tmp_path / "fakebin"
    fake.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        _fake_nvidia_smi(fake, holder.pid)
        path = f"{fake}{os.pathsep}{os.environ['PATH']}"
        result = project.run("--benchmarks", "omni_mmsu", "--gpu-pool", "0,1", PATH=path)
        cli = subprocess.run([sys.executable, "-m", "bench.cli", "eval", "precheck", "--config", str(project.config),
                              "--benchmarks", "omni_mmsu"], capture_output=True, text=True, timeout=300,
                             env=project.env(PATH=path), cwd=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:]
    user = psutil.Process().username()
    busy = f"✗ GPU 0 is used by pid {holder.pid} ({user}, 40000 MiB, python3)"
    assert busy in result.stdout and "never kills" in result.stdout
    assert "rows need up to 2 free GPU(s); 1 free" in result.stdout
    assert "✗ sglang_omni_router importable by" in result.stdout, "the router rows' own environment is checked"
    assert "no server was started" in result.stdout + result.stderr
    assert not (tmp_path / "results" / "eval" / "demo").exists() or not list(
        (tmp_path / "results" / "eval" / "demo").glob("*/*/round_1")), "a row ran"
    assert cli.returncode == 1 and busy in cli.stdout and "FAIL" in cli.stdout
    for line in cli.stdout.splitlines():
        if line.startswith("✗"):
            assert " — fix: " in line, line


def test_a_gpu_row_on_a_machine_without_gpus_is_skipped_with_the_reason(tmp_path):
    project = Project(tmp_path)
    result = project.run("--benchmarks", "omni_mmsu", "--no-precheck", "-rs")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "SKIPPED" in result.stdout and "needs 2 GPU(s); this machine has no GPU(s)" in result.stdout
    assert "Traceback" not in result.stdout


def test_commit_with_nothing_changed_says_so_in_one_line(tmp_path, llama_server):
    project = Project(tmp_path, rows=[_row("arith-acc", "Accuracy (summary)", ACC)])
    result = project.run("--commit", "--smoke", "2")  # a smoke run edits nothing
    assert result.returncode == 0, result.stdout[-3000:]
    assert "no changes — nothing to commit" in result.stdout and "commit FAILED" not in result.stdout
    assert project._git("log", "--oneline").count("\n") == 1


def test_the_generic_openai_adapter_serves_an_eval_row_from_its_profile_command(tmp_path, llama_server):
    """A server cellbench has no adapter for: the profile's `command` (here llama-server itself,
    run as any user's binary would be) starts, is checked and stopped like any other."""
    project = Project(tmp_path, rows=[{**_row("arith-acc", "Accuracy (summary)", ACC), "server_profile": "mine"}])
    data = yaml.safe_load(project.config.read_text())
    data["server_profiles"]["mine"] = {"framework": "openai", "command": [
        llama_server, "-m", "{model_path}", "--host", "{host}", "--port", "{port}", "--alias", "tiny", "-c", "2048"]}
    project.config.write_text(yaml.safe_dump(data, sort_keys=False))
    result = project.run()
    assert result.returncode == 0, result.stdout[-3000:]
    (row,) = project.state()["rows"]
    command = row["rounds"][0]["server"]["command"]["argv"]
    assert row["rounds"][0]["server"]["framework"] == "openai" and command[0] == llama_server
    assert command[command.index("-m") + 1].endswith(".gguf") and row["edit"]["action"] == "replaced"
