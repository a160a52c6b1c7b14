"""An eval refresh ends as sglang-omni's `/running-eval-suite` does: one local commit, three lines.

The user's project is a git repository in tmp_path shaped like sglang-omni: its reference tables
in `benchmarks/eval/benchmark_*.py` docstrings (the real files' layout: banner, disclaimer,
metadata, `| Model | Config | ... | Source |` tables, `PR #316 [H200, full-set, c=8]` tags), the
runner's config under `.claude/skills/running-eval-suite/models/qwen3-omni/config.yaml`, and a
client of its own that writes result JSON. The rows' server is cellbench's fault server in its
well-behaved mode, started from each row's own `server` template, so no GPU is needed. The run is a
real pytest session (pytester) with the seed's command line: `--benchmarks mmsu,qwen_seedtts`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT
from tests.eval.test_eval_real_tables import mmsu_doc  # benchmark_omni_mmsu.py's real layout

pytestmark = pytest.mark.integration  # starts the fault server for each selected row: ~15 s

MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
WORKLOAD = "router, 2-worker, full-set, c=8"
FAULT_SERVER = PROJECT_ROOT / "tests" / "support" / "faultserver.py"
SUBJECT = re.compile(r"^\[Docs\] Refresh reference benchmarks via /running-eval-suite \((\d{8}T\d{6}Z)\)$")

SEEDTTS = '''"""Seed-TTS WER of {model} against an OpenAI-compatible omni server.

{banner}

Benchmark: Seed-TTS | Dataset: zhaochenyang20/seed-tts-eval-arrow
Last verified: 2026-05-04

Accuracy (accuracy.wer)

| Model      | Config            | wer_corpus | evaluated | Source                                      |
| ---------- | ----------------- | ---------- | --------- | ------------------------------------------- |
| {model:<10} | EN, voice_clone=T | 1.95%      | 1088      | PR #411 [H200, V1-pipeline, full-set, c=16] |

Local v1 Pipeline Result (this workspace, 2026-05-01)

Accuracy (accuracy.wer)

| Model      | Config            | wer_corpus | evaluated | Source                   |
| ---------- | ----------------- | ---------- | --------- | ------------------------ |
| {model:<10} | EN, voice_clone=T | 1.01%      | 1088      | local [H200, c=16]       |
"""
'''

# The project's client: asks the server it was given, then writes the result JSON the row reads.
CLIENT = '''
import argparse, json, os, urllib.request
p = argparse.ArgumentParser()
p.add_argument("--port"); p.add_argument("--output-dir"); p.add_argument("--kind")
a = p.parse_args()
urllib.request.urlopen(f"http://127.0.0.1:{a.port}/v1/models", timeout=30).read()
results = {
    "mmsu": ("mmsu_results.json", {"summary": {"overall_accuracy": 0.7342, "parseable_samples": 4998,
                                               "unparseable_samples": 2, "total_samples": 5000},
                                   "speed_metrics": {"latency_mean_s": 0.3114, "latency_p95_s": 0.4421,
                                                     "throughput_qps": 25.5}}),
    "seedtts": ("wer_results.json", {"summary": {"wer_corpus": 0.0188, "evaluated": 1088, "total_samples": 1088}}),
}
name, result = results[a.kind]
os.makedirs(a.output_dir, exist_ok=True)
json.dump(result, open(os.path.join(a.output_dir, name), "w"))
'''


def _row(row_id: str, file: str, section: str, config: str, kind: str, cells: dict, **extra) -> dict:
    return {"id": row_id, "file": f"benchmarks/eval/{file}",
            "locate": {"section_substring": section, "config_substring": config, "source_workload": WORKLOAD},
            "server": f"{sys.executable} {FAULT_SERVER} --port {{port}} --served-id {{model}}",
            "server_gpus": 0, "server_health": "http://localhost:{port}/health", "server_boot_timeout_s": 60,
            "client": "python benchmarks/eval/fake_client.py --port {port} --output-dir {output_dir} --kind " + kind,
            "result_json": "mmsu_results.json" if kind == "mmsu" else "wer_results.json", "cells": cells, **extra}


ACCURACY = {"overall_accuracy": {"path": "summary.overall_accuracy", "format": "{v:.2%}"},
            "parseable_samples": {"paths": {"v": "summary.parseable_samples", "t": "summary.total_samples"},
                                  "format": "{v}/{t}"},
            "unparseable_samples": {"path": "summary.unparseable_samples", "format": "{v}"}}
SPEED = {"latency_mean_s": {"path": "speed_metrics.latency_mean_s", "format": "{v:.3f}"},
         "latency_p95_s": {"path": "speed_metrics.latency_p95_s", "format": "{v:.3f}"},
         "throughput_qps": {"path": "speed_metrics.throughput_qps", "format": "{v:.2f}"}}
WER = {"wer_corpus": {"path": "summary.wer_corpus", "format": "{v:.2%}"},
       "evaluated": {"path": "summary.evaluated", "format": "{v}"}}
ROWS = [
    _row("mmsu-text-c8-accuracy", "benchmark_omni_mmsu.py", "Accuracy (accuracy)", "modalities=text ", "mmsu",
         ACCURACY),
    _row("mmsu-text-c8-speed", "benchmark_omni_mmsu.py", "Speed (speed)", "modalities=text ", "mmsu", SPEED),
    _row("seedtts-en-vc-accuracy", "benchmark_omni_seedtts.py", "Accuracy (accuracy.wer)", "EN, voice_clone=T",
         "seedtts", WER),
    _row("s2pro-en-accuracy", "benchmark_tts_seedtts.py", "Accuracy (accuracy.wer)", "EN, voice_clone=T", "seedtts",
         WER, hf_model_id="fishaudio/s2-pro"),
]


class OmniProject:
    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
        self.pytester = pytester
        self.repo = pytester.path / "sglang-omni"
        evals = self.repo / "benchmarks" / "eval"
        evals.mkdir(parents=True)
        (evals / "benchmark_omni_mmsu.py").write_text(mmsu_doc())
        (evals / "benchmark_omni_seedtts.py").write_text(SEEDTTS.format(model="Qwen3-Omni",
                                                                        banner="H200 Full-Set Reference Results"))
        (evals / "benchmark_tts_seedtts.py").write_text(SEEDTTS.format(model="S2-Pro", banner="Reference Results"))
        (evals / "fake_client.py").write_text(CLIENT)
        (self.repo / "README.md").write_text("sglang-omni, as far as this test needs it\n")
        # The models and dataset the config names, in the cache its auto_env names; the shell's
        # HF_HOME points at an empty one, so precheck passes only if it looks where the rows look.
        self.hf = pytester.path / "hf-cache"
        for kind, repo in (("models", MODEL), ("models", "fishaudio/s2-pro"), ("datasets", "ddwang2000/MMSU")):
            (self.hf / "hub" / f"{kind}--{repo.replace('/', '--')}" / "snapshots" / "abc123").mkdir(parents=True)
        monkeypatch.setenv("HF_HOME", str(pytester.path / "empty-hf"))
        monkeypatch.setenv("CELLBENCH_CACHE", str(pytester.path / "cellbench-cache"))  # the host lock's home
        monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
        self.config = self.repo / ".claude" / "skills" / "running-eval-suite" / "models" / "qwen3-omni" / "config.yaml"
        self.config.parent.mkdir(parents=True)
        self.config.write_text(yaml.safe_dump({
            "name": "qwen3-omni", "hf_model_id": MODEL, "hf_datasets": ["ddwang2000/MMSU"],
            "auto_env": {"HF_ENDPOINT": "https://hf-mirror.com", "HF_HOME": str(self.hf)},
            "default_venv_python": [sys.executable], "rows": ROWS,
            # Rows without a router profile have only their model id for a name; the tables say Qwen3-Omni.
            "model_aliases": {MODEL: ["Qwen3-Omni"]}}, sort_keys=False))
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Omni Dev")
        self.git("config", "user.email", "dev@example.com")
        self.git("add", ".")
        self.git("commit", "-q", "-m", "the tables as merged")
        (pytester.path / "pytest.ini").write_text("[pytest]\nmarkers =\n    eval: an eval row\n")
        pytester.makepyfile(test_eval=(PROJECT_ROOT / "bench" / "test_eval.py").read_text())
        self.results = pytester.path / "results"

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo), *args], check=True, capture_output=True,
                              text=True).stdout

    def run(self, *args: str) -> pytest.RunResult:
        # In a process of its own: an in-process run drops the modules it imported when it ends, and
        # the next one in this process would meet httpx holding the dropped httpcore's classes.
        return self.pytester.runpytest_subprocess(
            str(self.pytester.path / "test_eval.py"), "-p", "no:cacheprovider", "-m", "eval",
            "-W", "ignore::pytest.PytestAssertRewriteWarning", f"--eval-config={self.config}",
            f"--results-dir={self.results}", "--hardware=H200", *args)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> OmniProject:
    made = OmniProject(pytester, monkeypatch)
    monkeypatch.chdir(made.repo)  # the seed's user runs it from their checkout
    return made


def test_the_refresh_commits_once_with_the_seeds_message_and_ends_with_its_three_lines(project):
    (project.repo / "notes.txt").write_text("the user's own work, staged before the run\n")
    project.git("add", "notes.txt")
    before = project.git("rev-parse", "HEAD").strip()
    result = project.run("--benchmarks", "mmsu,qwen_seedtts")
    out = result.stdout.str()
    assert result.ret == 0, out[-4000:]

    # --benchmarks mmsu,qwen_seedtts: the MMSU file's rows and Qwen3-Omni's SeedTTS row, not S2-Pro's.
    result.assert_outcomes(passed=3, deselected=1)
    (state_path,) = project.results.glob("eval/qwen3-omni/*/run-state.json")
    state = json.loads(state_path.read_text())
    assert sorted(row["id"] for row in state["rows"]) == ["mmsu-text-c8-accuracy", "mmsu-text-c8-speed",
                                                          "seedtts-en-vc-accuracy"]
    assert all(row["edit"]["action"] == "appended" for row in state["rows"])

    # Exactly one new commit, the seed's subject with the run's UTC timestamp, holding the edited files only.
    assert project.git("rev-list", f"{before}..HEAD").split() == [project.git("rev-parse", "HEAD").strip()]
    subject, *body = project.git("log", "-1", "--format=%B").splitlines()
    run_dir = state_path.parent
    found = SUBJECT.match(subject)
    assert found, subject
    assert run_dir.name.startswith(found.group(1))
    assert "Hardware: H200; 0 row(s) replaced, 3 appended." in body and f"Run dir: {run_dir}" in body
    assert project.git("show", "--name-only", "--format=", "HEAD").split() == [
        "benchmarks/eval/benchmark_omni_mmsu.py", "benchmarks/eval/benchmark_omni_seedtts.py"]
    assert "git push" not in out
    assert state["commit"]["subject"] == subject and state["commit"]["commit"] == project.git(
        "rev-parse", "--short=7", "HEAD").strip(), "run-state.json names the commit"

    # Nothing else changed: the user's staged file is still staged, and nothing is left uncommitted.
    assert project.git("status", "--porcelain", "--untracked-files=all").splitlines() == ["A  notes.txt"]
    mmsu = project.git("show", "HEAD:benchmarks/eval/benchmark_omni_mmsu.py")
    tag = f"[H200, {WORKLOAD}]"
    (acc,) = [line for line in mmsu.splitlines() if tag in line and "73.42%" in line]
    assert [cell.strip() for cell in acc.split("|")[1:6]] == ["Qwen3-Omni", "modalities=text", "73.42%", "4998/5000",
                                                              "2"]
    (speed,) = [line for line in mmsu.splitlines() if tag in line and "0.311" in line]
    assert [cell.strip() for cell in speed.split("|")[3:6]] == ["0.311", "0.442", "25.50"]
    seedtts = project.git("show", "HEAD:benchmarks/eval/benchmark_omni_seedtts.py")
    assert "| local [H200, c=16]       |" in seedtts and seedtts.count(tag) == 1, "the Local table is never touched"

    # The run ends with the seed's three lines, after pytest's own summary.
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[-3:] == ["Review:   git show HEAD", "Revert:   git reset --soft HEAD~1   # keeps the edits, staged",
                          f"Run dir:  {run_dir}"]
    assert lines[-4].startswith(f"Committed {project.git('rev-parse', '--short=7', 'HEAD').strip()} in ")
    # The precheck looked where the rows look (the config's HF_HOME), not in the shell's empty cache.
    assert f"✓ model {MODEL} in the Hugging Face cache" in out


def test_no_commit_leaves_the_edits_in_the_working_tree(project):
    before = project.git("rev-parse", "HEAD").strip()
    result = project.run("--benchmarks", "s2pro_seedtts", "--no-commit")
    assert result.ret == 0, result.stdout.str()[-4000:]
    result.assert_outcomes(passed=1, deselected=3)
    assert project.git("rev-parse", "HEAD").strip() == before
    assert project.git("status", "--porcelain").splitlines() == [" M benchmarks/eval/benchmark_tts_seedtts.py"]
    assert "Review:" not in result.stdout.str()


def test_benchmarks_help_lists_every_name_with_its_files_and_rows_and_runs_nothing(project):
    result = project.run("--benchmarks", "help")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    for line in ("  omni_mmsu: benchmarks/eval/benchmark_omni_mmsu.py, 2 row(s)",
                 "  mmsu (alias of omni_mmsu): benchmarks/eval/benchmark_omni_mmsu.py, 2 row(s)",
                 "  qwen_seedtts (alias of omni_seedtts): benchmarks/eval/benchmark_omni_seedtts.py, 1 row(s)",
                 "  s2pro_seedtts (alias of tts_seedtts): benchmarks/eval/benchmark_tts_seedtts.py, 1 row(s)",
                 "      mmsu-text-c8-speed  [Speed (speed)] modalities=text"):
        assert line in out.splitlines(), line
    assert not list(project.results.glob("eval/*/*/run-state.json")), "a row ran"
    under_xdist = project.run("--benchmarks", "help", "-n", "2")  # the controller lists; no worker starts
    assert under_xdist.ret == 0 and "  mmsu (alias of omni_mmsu): benchmarks/eval/benchmark_omni_mmsu.py, 2 row(s)" \
        in under_xdist.stdout.str().splitlines()
    unknown = project.run("--benchmarks", "mmsu,tts")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    assert "--benchmarks: unknown tts; this config accepts omni_mmsu, omni_seedtts, tts_seedtts, mmsu" \
        in unknown.stderr.str()


def test_a_row_outside_benchmarks_eval_is_refused_before_any_server_starts(project):
    (project.repo / "docs").mkdir()
    (project.repo / "docs" / "benchmark_notes.py").write_text(mmsu_doc())
    data = yaml.safe_load(project.config.read_text())
    data["rows"].append({**ROWS[0], "id": "notes-accuracy", "file": "docs/benchmark_notes.py"})
    project.config.write_text(yaml.safe_dump(data, sort_keys=False))
    head = project.git("rev-parse", "HEAD")
    refused = project.run("--benchmarks", "notes")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    why = (f"refused: {project.repo / 'docs' / 'benchmark_notes.py'} is outside the tables root "
           f"{project.repo / 'benchmarks' / 'eval'}/ (tables_root in {project.config}); no table outside it is edited")
    assert f"✗ row notes-accuracy: {why} — fix: move benchmark_notes.py under" in refused.stdout.str()
    # Past the precheck, the row still never runs, and its edit says why.
    forced = project.run("--benchmarks", "notes", "--no-precheck")
    assert forced.ret == pytest.ExitCode.TESTS_FAILED
    (state_path,) = project.results.glob("eval/qwen3-omni/*/run-state.json")
    (row,) = json.loads(state_path.read_text())["rows"]
    assert row["rounds"] == [] and row["reason"] == why
    assert row["edit"] == {"status": "fail", "reason": why, "file": str(project.repo / "docs" / "benchmark_notes.py")}
    assert project.git("status", "--porcelain", "benchmarks", "docs") == "?? docs/\n", "nothing edited or committed"
    assert project.git("rev-parse", "HEAD") == head
    assert (project.repo / "docs" / "benchmark_notes.py").read_text() == mmsu_doc()


def test_a_table_file_the_user_had_edited_is_committed_with_a_warning(project):
    tts = project.repo / "benchmarks" / "eval" / "benchmark_tts_seedtts.py"
    tts.write_text(tts.read_text().replace("Last verified: 2026-05-04", "Last verified: 2026-05-04 (notes WIP)"))
    result = project.run("--benchmarks", "s2pro_seedtts")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert ("WARNING: benchmarks/eval/benchmark_tts_seedtts.py had uncommitted edits before the run; they are in "
            "this commit too") in result.stdout.str().splitlines()
    assert "also carries edits made before the run" in project.git("log", "-1", "--format=%b")
    assert "(notes WIP)" in project.git("show", "HEAD:benchmarks/eval/benchmark_tts_seedtts.py")
