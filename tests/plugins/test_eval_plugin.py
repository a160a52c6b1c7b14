"""Eval rows end to end: real pytest sessions, a real llama-server, cellbench's own arith client.

Each test writes a benchmark file with a reference table and an eval config into tmp_path, runs
`pytest -m eval --eval-config ...` in a fresh process the way a user does, and checks what the
user relies on: which table rows changed and how, that the file still imports, what
run-state.json says, and the exit code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

HW = "Test CPU"
BENCHMARK = '''"""A benchmark file as cellbench refreshes it.

Reference Results

Accuracy (summary)

| Model | Config        | accuracy | total_samples | Source                       |
| ----- | ------------- | -------- | ------------- | ---------------------------- |
| tiny  | llamacpp, c=2 | 12.50%   | 4             | PR #7 [H200, n=4, c=2]       |

Speed (speed)

| Model | Config | latency_p50_s | output_tok_per_s | Source |
| ----- | ------ | ------------- | ---------------- | ------ |

Local v1 Pipeline Result (this workspace, 2026-11-01)

Accuracy (summary)

| Model | Config        | accuracy | total_samples | Source                       |
| ----- | ------------- | -------- | ------------- | ---------------------------- |
| tiny  | llamacpp, c=2 | 99.00%   | 4             | local [Test CPU, n=4, c=2]   |
"""

ANSWER = 42
'''
ARITH = "{python} {repo_root}/benchmarks/eval/benchmark_arith.py --model {model} --port {port} " \
        "--output-dir {output_dir} --max-samples {max_samples} --concurrency 2 --max-tokens 8"


def _row(row_id: str, section: str, cells: dict, **extra) -> dict:
    return {"id": row_id, "file": "", "client": ARITH, "max_samples": 4, "timeout_s": 300,
            "result_json": "arith_results.json", "new_row": {"Model": "tiny", "Config": "llamacpp, c=2"},
            "locate": {"section_substring": section, "config_substring": "llamacpp, c=2",
                       "source_workload": "n=4, c=2"},
            "cells": cells, **extra}


ACCURACY = {"accuracy": {"path": "summary.accuracy", "format": "{v:.2%}"},
            "total_samples": {"path": "summary.total_samples"}}
SPEED = {"latency_p50_s": {"path": "speed.latency_p50_s", "format": "{v:.3f}"},
         "output_tok_per_s": {"path": "speed.output_tok_per_s", "format": "{v:.1f}"}}


class Setup:
    def __init__(self, tmp_path: Path, rows: list[dict] | None = None, server_gpus: int = 0):
        self.tmp = tmp_path
        self.bench = tmp_path / "repo" / "benchmark_t.py"
        self.bench.parent.mkdir()
        self.bench.write_text(BENCHMARK)
        rows = rows or [_row("acc", "Accuracy (summary)", ACCURACY), _row("speed", "Speed (speed)", SPEED)]
        for row in rows:
            row["file"] = str(self.bench)
        self.config = tmp_path / "eval.yaml"
        self.config.write_text(yaml.safe_dump({
            "name": "tiny-test", "hf_model_id": "tiny", "default_server_profile": "llama",
            "tables_root": str(self.bench.parent),  # not the eval root's benchmarks/eval: said so
            "server_profiles": {"llama": {"framework": "llamacpp", "max_concurrency": 2, "server_gpus": server_gpus}},
            "rows": rows,
        }))

    def run(self, *args: str, commit: bool = False) -> subprocess.CompletedProcess:
        # `--opt=path`: pytest takes a bare existing path among the arguments for a rootdir hint.
        # --eval-root: the clients are cellbench's own ({repo_root}/benchmarks/eval/...). The
        # benchmark file is in no git repository, so there is nothing to commit it in.
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "eval", f"--eval-config={self.config}",
               f"--results-dir={self.tmp / 'results'}", f"--hardware={HW}", f"--eval-root={PROJECT_ROOT}",
               *([] if commit else ["--no-commit"]), *args]
        return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, check=False,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})

    def states(self) -> list[dict]:
        paths = sorted((self.tmp / "results" / "eval" / "tiny-test").glob("*/run-state.json"))
        return [json.loads(p.read_text()) for p in paths]

    def rows_tagged(self, tag: str) -> list[str]:
        return [line for line in self.bench.read_text().splitlines() if tag in line]


def _imports(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ANSWER == 42 and "Reference Results" in (module.__doc__ or "")


def test_first_run_appends_second_replaces_and_the_file_still_imports(tmp_path, llama_server):
    setup = Setup(tmp_path)
    original = BENCHMARK.splitlines()
    first = setup.run()
    assert first.returncode == 0, first.stdout[-3000:]
    assert "edits appended: 2" in first.stdout
    appended = setup.rows_tagged(f"[{HW}, n=4, c=2]")
    official = [line for line in appended if "99.00%" not in line]
    assert len(official) == 2, appended  # one per official table; the Local row is never touched
    acc_row = next(line for line in official if "%" in line)
    assert "| tiny  | llamacpp, c=2 |" in acc_row and "| 4 " in acc_row
    text = setup.bench.read_text()
    assert "| tiny  | llamacpp, c=2 | 12.50%   | 4             | PR #7 [H200, n=4, c=2]       |" in text
    assert "local [Test CPU, n=4, c=2]   |" in text and "99.00%" in text
    assert len(text.splitlines()) == len(original) + 2
    _imports(setup.bench)

    state = setup.states()[0]
    assert state["summary"]["appended"] == 2 and state["hardware"] == HW
    by_id = {row["id"]: row for row in state["rows"]}
    assert by_id["speed"]["rounds"][0]["shared_with"] == "acc"  # one client run served both rows
    assert by_id["acc"]["edit"]["action"] == "appended"

    second = setup.run()
    assert second.returncode == 0, second.stdout[-3000:]
    assert "edits replaced: 2" in second.stdout and "edits appended: 0" in second.stdout
    after = setup.bench.read_text()
    assert len(after.splitlines()) == len(original) + 2
    assert len([line for line in setup.rows_tagged(f"[{HW}, n=4, c=2]") if "99.00%" not in line]) == 2
    _imports(setup.bench)


def test_smoke_runs_the_rows_with_few_samples_and_changes_no_file(tmp_path, llama_server):
    setup = Setup(tmp_path)
    result = setup.run("--smoke", "2")
    assert result.returncode == 0, result.stdout[-3000:]
    assert setup.bench.read_text() == BENCHMARK
    state = setup.states()[0]
    assert state["smoke"] == 2 and state["summary"]["skipped_edits"] == 2
    acc = next(row for row in state["rows"] if row["id"] == "acc")
    argv = acc["rounds"][0]["client"]["argv"]
    assert argv[argv.index("--max-samples") + 1] == "2"
    assert acc["edit"] == {"status": "skipped", "reason": "smoke run"}


def test_a_failing_client_fails_its_row_and_edits_nothing(tmp_path, llama_server):
    broken = _row("acc", "Accuracy (summary)", ACCURACY,
                  client=["{python}", "-c",
                          "import sys; print('Traceback (most recent call last):\\nBoom'); sys.exit(3)"])
    setup = Setup(tmp_path, rows=[broken])
    result = setup.run()
    assert result.returncode == 1
    assert "FAILED RUN acc: round 1: client exit 3" in result.stdout
    assert setup.bench.read_text() == BENCHMARK
    state = setup.states()[0]
    assert state["rows"][0]["fail_excerpt"].startswith("Traceback") and state["summary"]["failed_runs"]


def test_a_locator_that_cannot_edit_fails_before_any_server_starts(tmp_path):
    bad = _row("acc", "Accuracy (summary)", {**ACCURACY, "not_a_column": {"path": "summary.accuracy"}})
    setup = Setup(tmp_path, rows=[bad])
    result = setup.run()
    assert result.returncode == 1
    assert "not_a_column" in result.stdout
    state = setup.states()[0]
    assert state["rows"][0]["rounds"] == [] and "locator" in state["rows"][0]["reason"]


def test_rounds_are_all_kept_and_the_table_can_take_their_mean(tmp_path, llama_server):
    setup = Setup(tmp_path, rows=[_row("acc", "Accuracy (summary)", ACCURACY)])
    result = setup.run("--rounds", "2", "--table-from", "mean")
    assert result.returncode == 0, result.stdout[-3000:]
    (row,) = setup.rows_tagged(f"[{HW}, n=4, c=2] (n=2 mean)")
    assert "| 4 " in row and "4.0" not in row, row  # a mean of counts stays a clean count
    acc = setup.states()[0]["rows"][0]
    assert len(acc["rounds"]) == 2
    assert acc["spread"]["total_samples"]["v"]["values"] == [4, 4]


def test_xdist_rows_lease_gpus_from_the_pool_and_the_controller_edits(tmp_path, llama_server):
    rows = [_row("acc", "Accuracy (summary)", ACCURACY),
            _row("speed", "Speed (speed)", SPEED, max_samples=3)]  # a different run: no sharing
    setup = Setup(tmp_path, rows=rows, server_gpus=1)
    result = setup.run("-n", "2", "--gpu-pool", "0,1", "--no-precheck")  # no real GPUs: the pool is a label
    assert result.returncode == 0, result.stdout[-3000:]
    assert "edits appended: 2" in result.stdout
    state = setup.states()[0]
    for row in state["rows"]:
        (gpu,) = row["gpus"]
        assert gpu in (0, 1)
        assert row["rounds"][0]["server"]["command"]["env"]["CUDA_VISIBLE_DEVICES"] == str(gpu)
    _imports(setup.bench)


def test_retry_failed_from_and_exclude_ids_deselect_rows(tmp_path):
    setup = Setup(tmp_path)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "run-state.json").write_text(json.dumps({"rows": [
        {"id": "acc", "status": "ok", "edit": {"status": "ok", "action": "replaced"}},
        {"id": "speed", "status": "ok", "edit": {"status": "fail", "reason": "ambiguous"}},
    ]}))
    retry = setup.run("--collect-only", "-q", f"--retry-failed-from={earlier}")
    assert "test_eval_row[speed]" in retry.stdout and "test_eval_row[acc]" not in retry.stdout
    excluded = setup.run("--collect-only", "-q", "--exclude-ids", "spe,zzz")
    assert "test_eval_row[acc]" in excluded.stdout and "test_eval_row[speed]" not in excluded.stdout


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


def test_commit_holds_only_the_edited_benchmark_file(tmp_path, llama_server):
    setup = Setup(tmp_path, rows=[_row("acc", "Accuracy (summary)", ACCURACY)])
    repo = setup.bench.parent
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "t")
    _git(repo, "config", "user.email", "t@t")
    _git(repo, "add", "benchmark_t.py")
    _git(repo, "commit", "-q", "-m", "tables")
    (repo / "notes.txt").write_text("the user's own staged work\n")
    _git(repo, "add", "notes.txt")
    result = setup.run(commit=True)  # the default: no flag
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.stdout.rstrip().splitlines()[-3:-1] == [
        "Review:   git show HEAD", "Revert:   git reset --soft HEAD~1   # keeps the edits, staged"]
    subject, _, files = _git(repo, "show", "--name-only", "--format=%s", "HEAD").strip().partition("\n\n")
    assert subject.startswith("[Docs] Refresh reference benchmarks via /running-eval-suite (") and files == \
        "benchmark_t.py"
    assert "notes.txt" in _git(repo, "diff", "--cached", "--name-only")  # still staged, not committed
    assert _git(repo, "status", "--porcelain", "benchmark_t.py") == ""
