"""`cellbench eval locate` and `cellbench eval precheck`: what a row would do, before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT

pytestmark = pytest.mark.session  # every test runs `cellbench eval` in a subprocess


def _cellbench(*args: str, cwd: Path = PROJECT_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", "eval", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, check=False)


def test_locate_prints_one_line_per_row_of_the_tiny_config():
    rows = yaml.safe_load((PROJECT_ROOT / "models" / "tiny" / "eval.yaml").read_text())["rows"]
    result = _cellbench("locate", "--hardware", "Nowhere CPU")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith(("✓", "✗"))]
    assert [line.split()[1] for line in lines] == [row["id"] for row in rows]
    assert all(" appends as line " in line for line in lines), "no row has this made-up hardware's tag yet"
    assert "hardware [Nowhere CPU]" in result.stdout


TABLE = '''"""Seed-TTS of a demo project.

Accuracy (accuracy.wer)

Note (EN): three rounds, averaged by hand.

| Model | Config | wer_corpus | Source |
| ----- | ------ | ---------- | ------ |
| tiny  | EN, c=16 | 1.95%    | PR #4 [Lab CPU, full-set, c=16, n=3 mean] |
| tiny  | ZH, c=16 | 2.95%    | PR #4 [Lab CPU, full-set, c=16] |
| tiny  | ZH, c=16 | 3.95%    | PR #5 [Lab CPU, full-set, c=16] |
"""
'''


def test_locate_previews_a_mean_overwritten_and_an_ambiguity_without_running_anything(tmp_path):
    (tmp_path / "benchmark_seedtts.py").write_text(TABLE)
    row = {"file": "benchmark_seedtts.py", "client": "python c.py --port {port} --output-dir {output_dir}",
           "result_json": "w.json", "cells": {"wer_corpus": {"path": "summary.wer_corpus", "format": "{v:.2%}"}}}
    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump({
        "name": "demo", "hf_model_id": "tiny", "default_server_profile": "llama", "tables_root": ".",
        "server_profiles": {"llama": {"framework": "llamacpp"}},
        "rows": [{**row, "id": "en", "locate": {"section_substring": "Accuracy (accuracy.wer)",
                                                "config_substring": "EN, c=16",
                                                "source_workload": "full-set, c=16, n=3 mean"}},
                 {**row, "id": "zh", "locate": {"section_substring": "Accuracy (accuracy.wer)",
                                                "config_substring": "ZH, c=16", "source_workload": "full-set, c=16"}}],
    }))
    before = (tmp_path / "benchmark_seedtts.py").read_text()
    result = _cellbench("locate", "--config", str(config), "--eval-root", str(tmp_path), "--hardware", "Lab CPU")
    assert result.returncode == 1, "an ambiguous row is a failure to fix before the run"
    en = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["en"])
    assert en.startswith("✓ en  benchmark_seedtts.py:9  replaces line 9:")
    assert "WARNING: overwrites an n=3 mean row with a single-round value" in en
    zh = next(line for line in result.stdout.splitlines() if line.split()[1:2] == ["zh"])
    assert zh.startswith("✗ zh") and "2 rows match" in zh
    assert (tmp_path / "benchmark_seedtts.py").read_text() == before, "locate writes nothing"


def test_precheck_of_the_tiny_config_passes_here_with_one_line_per_check():
    result = _cellbench("precheck")
    assert result.returncode == 0, result.stdout + result.stderr
    checks = [line for line in result.stdout.splitlines() if line.startswith(("✓", "✗"))]
    assert checks and all(line.startswith("✓") for line in checks)
    assert any("clients' Python" in line for line in checks) and any("model tiny" in line for line in checks)
    assert result.stdout.rstrip().endswith("OK")


def test_precheck_names_the_fix_for_what_is_missing(tmp_path):
    config = tmp_path / "eval.yaml"
    (tmp_path / "benchmark_x.py").write_text('"""x"""\n')
    config.write_text(yaml.safe_dump({
        "name": "demo", "hf_model_id": "tiny", "default_server_profile": "llama", "tables_root": ".",
        "server_profiles": {"llama": {"framework": "llamacpp"}},
        "hf_datasets": ["nobody/no-such-dataset"],
        "python_packages": [{"name": "no_such_module_xyz", "install_cmd": "uv pip install no-such-module-xyz"}],
        "default_venv_python": [str(tmp_path / "missing" / "python"), sys.executable],
        "rows": [{"id": "x", "file": "benchmark_x.py", "client": "python c.py", "result_json": "r.json",
                  "locate": {"section_substring": "A", "config_substring": "B", "source_workload": "c=1"},
                  "cells": {"a": {"path": "summary.a"}}}],
    }))
    result = _cellbench("precheck", "--config", str(config), "--eval-root", str(tmp_path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert f"✓ clients' Python {sys.executable} (default_venv_python)" in lines
    assert ("✗ dataset nobody/no-such-dataset in the Hugging Face cache — fix: "
            "huggingface-cli download --repo-type dataset nobody/no-such-dataset") in lines
    assert ("✗ package no_such_module_xyz importable by the clients' Python — fix: "
            "uv pip install no-such-module-xyz") in lines
    assert lines[-1] == "FAIL: 2 ✗"


def _venv_config(tmp_path: Path, **extra) -> Path:
    """sglang-omni's way of writing install commands: `<venv-python>` stands for the clients' Python."""
    config = tmp_path / "eval.yaml"
    (tmp_path / "benchmark_x.py").write_text('"""x"""\n')
    config.write_text(yaml.safe_dump({
        "name": "demo", "hf_model_id": "tiny", "default_server_profile": "llama", "tables_root": ".",
        "server_profiles": {"llama": {"framework": "llamacpp"}},
        "auxiliary_models": [{"kind": "modelscope", "id": "nobody/paraformer-zh",
                              "install_cmd": "<venv-python> -m modelscope download nobody/paraformer-zh"}],
        "python_packages": [{"name": "no_such_module_xyz",
                             "install_cmd": "<venv-python> -m pip install no-such-module-xyz"}],
        "rows": [{"id": "x", "file": "benchmark_x.py", "client": "python c.py", "result_json": "r.json",
                  "locate": {"section_substring": "A", "config_substring": "B", "source_workload": "c=1"},
                  "cells": {"a": {"path": "summary.a"}}}],
        **extra,
    }))
    return config


def _precheck_lines(config: Path, tmp_path: Path, *args: str, **env: str) -> list[str]:
    run_env = {key: value for key, value in os.environ.items() if key != "EVAL_VENV_PYTHON"}
    run_env.update(MODELSCOPE_CACHE=str(tmp_path / "modelscope"), **env)
    result = subprocess.run([sys.executable, "-m", "bench.cli", "eval", "precheck", "--config", str(config),
                             "--eval-root", str(tmp_path), *args], capture_output=True, text=True, timeout=300,
                            cwd=PROJECT_ROOT, check=False, env=run_env)
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_precheck_fixes_name_the_venv_python_given_not_a_placeholder(tmp_path):
    venv = tmp_path / "omni-venv" / "bin" / "python"
    venv.parent.mkdir(parents=True)
    venv.symlink_to(sys.executable)
    lines = _precheck_lines(_venv_config(tmp_path), tmp_path, "--venv-python", str(venv))
    assert f"✓ clients' Python {venv} (--venv-python)" in lines
    assert (f"✗ model nobody/paraformer-zh in the ModelScope cache — fix: {venv} -m modelscope download "
            "nobody/paraformer-zh") in lines
    assert (f"✗ package no_such_module_xyz importable by the clients' Python — fix: {venv} -m pip install "
            "no-such-module-xyz") in lines
    assert not [line for line in lines if "<venv-python>" in line]
    from_env = _precheck_lines(_venv_config(tmp_path), tmp_path, EVAL_VENV_PYTHON=str(venv))
    assert f"✓ clients' Python {venv} ($EVAL_VENV_PYTHON)" in from_env
    assert not [line for line in from_env if "<venv-python>" in line]


def test_precheck_keeps_the_placeholder_only_when_the_clients_python_is_unknown(tmp_path):
    # No Python given and none of the config's default_venv_python exists: which one is meant is unknown.
    missing = [str(tmp_path / "a" / "python"), str(tmp_path / "b" / "python")]
    lines = _precheck_lines(_venv_config(tmp_path, default_venv_python=missing), tmp_path)
    assert any(line.startswith(f"✗ clients' Python {missing[-1]} (default_venv_python) does not exist")
               for line in lines), lines
    assert ("✗ model nobody/paraformer-zh in the ModelScope cache — fix: <venv-python> -m modelscope download "
            "nobody/paraformer-zh") in lines
    # None given, none listed: the clients run on cellbench's own Python, which the fix then names.
    fallback = _precheck_lines(_venv_config(tmp_path), tmp_path)
    assert f"✓ clients' Python {sys.executable} (cellbench)" in fallback
    assert (f"✗ package no_such_module_xyz importable by the clients' Python — fix: {sys.executable} -m pip install "
            "no-such-module-xyz") in fallback


OMNI_ROW = {"server": "serve --port {port}", "server_gpus": 0, "client": "python c.py", "result_json": "r.json",
            "cells": {"accuracy": {"path": "summary.accuracy"}},
            "locate": {"section_substring": "Accuracy", "config_substring": "modalities=text ",
                       "source_workload": "c=8"}}


def _omni_project(tmp_path: Path) -> Path:
    """sglang-omni's layout: the runner's config, its tables in benchmarks/eval/, a notes file beside."""
    evals = tmp_path / "benchmarks" / "eval"
    evals.mkdir(parents=True)
    table = ('"""Accuracy\n\n| Model | Config | accuracy | Source |\n| - | - | - | - |\n'
             '| Qwen3-Omni | modalities=text  | 70.88% | PR #316 [H200, full-set, c=8] |\n"""\n')
    for name in ("benchmark_omni_mmsu.py", "benchmark_omni_seedtts.py", "benchmark_tts_seedtts.py"):
        (evals / name).write_text(table)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmark_notes.py").write_text(table)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"name": "qwen3-omni", "hf_model_id": "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                                      # the rows' only name is the model id; the tables say Qwen3-Omni
                                      "model_aliases": {"Qwen/Qwen3-Omni-30B-A3B-Instruct": "Qwen3-Omni"}, "rows": [
        {**OMNI_ROW, "id": "mmsu-text", "file": "benchmarks/eval/benchmark_omni_mmsu.py"},
        {**OMNI_ROW, "id": "seedtts-en", "file": "benchmarks/eval/benchmark_omni_seedtts.py"},
        {**OMNI_ROW, "id": "s2pro-en", "file": "benchmarks/eval/benchmark_tts_seedtts.py"},
        {**OMNI_ROW, "id": "notes", "file": "docs/benchmark_notes.py"}]}))
    return config


def test_benchmarks_help_lists_the_names_and_an_unknown_one_exits_2(tmp_path):
    config = _omni_project(tmp_path)
    for action in ("locate", "precheck"):
        listed = _cellbench(action, "--config", str(config), "--eval-root", str(tmp_path), "--benchmarks", "help")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert "  qwen_seedtts (alias of omni_seedtts): benchmarks/eval/benchmark_omni_seedtts.py, 1 row(s)" in lines
        assert "  mmsu (alias of omni_mmsu): benchmarks/eval/benchmark_omni_mmsu.py, 1 row(s)" in lines
        assert "      s2pro-en  [Accuracy] modalities=text" in lines
    unknown = _cellbench("locate", "--config", str(config), "--eval-root", str(tmp_path), "--benchmarks", "mmsu,nope")
    assert unknown.returncode == 2
    assert unknown.stderr == ("cellbench eval: --benchmarks: unknown nope; this config accepts omni_mmsu, "
                              "omni_seedtts, tts_seedtts, notes, mmsu, qwen_seedtts, s2pro_seedtts (`--benchmarks "
                              "help` lists each with its files and rows)\n")


def test_locate_selects_by_the_seeds_names_and_refuses_a_file_outside_benchmarks_eval(tmp_path):
    config = _omni_project(tmp_path)
    chosen = _cellbench("locate", "--config", str(config), "--eval-root", str(tmp_path), "--hardware", "H200",
                        "--benchmarks", "mmsu,s2pro_seedtts")
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    located = [line.split()[1] for line in chosen.stdout.splitlines() if line.startswith("✓")]
    assert located == ["mmsu-text", "s2pro-en"]
    refused = _cellbench("locate", "notes", "--config", str(config), "--eval-root", str(tmp_path))
    assert refused.returncode == 1
    (line,) = [line for line in refused.stdout.splitlines() if line.startswith("✗")]
    assert line == (f"✗ notes  benchmark_notes.py  refused: {tmp_path / 'docs' / 'benchmark_notes.py'} is outside the "
                    f"tables root {tmp_path / 'benchmarks' / 'eval'}/ (tables_root in {config}); no table outside it "
                    "is edited")
