"""`cellbench eval locate` and `cellbench eval precheck`: what a row would do, before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from bench.base.paths import PROJECT_ROOT


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
        "name": "demo", "hf_model_id": "tiny", "default_server_profile": "llama",
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
        "name": "demo", "hf_model_id": "tiny", "default_server_profile": "llama",
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
