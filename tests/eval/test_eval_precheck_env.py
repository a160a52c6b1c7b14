"""The precheck sees the rows' environment: the config's auto_env over the shell's.

sglang-omni's config sets `HF_ENDPOINT` (its mirror) and its caches in `auto_env`, which the rows
get over whatever the shell says. The precheck must look for models where the rows will, and a
download fix must carry the same hub settings, or the user who copies it fills the wrong cache
from the wrong hub and the next precheck fails again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from bench.eval.config.loader import load_eval_config
from bench.eval.precheck import client_python, hf_cache, run_checks, with_hub_settings

MIRROR = "https://hf-mirror.com"


@pytest.fixture(autouse=True)
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shell's own caches: empty folders the config's auto_env must win over."""
    for name in ("HF_HUB_CACHE", "HF_ENDPOINT", "XDG_CACHE_HOME", "EVAL_VENV_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "shell-hf"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "shell-modelscope"))
    return tmp_path / "shell-hf"


def _snapshot(hub: Path, kind: str, repo: str) -> None:
    (hub / f"{kind}--{repo.replace('/', '--')}" / "snapshots" / "abc123").mkdir(parents=True)


def _checks(tmp_path: Path, **top) -> list[str]:
    (tmp_path / "benchmarks" / "eval").mkdir(parents=True, exist_ok=True)
    (tmp_path / "benchmarks" / "eval" / "benchmark_omni_mmsu.py").write_text('"""x"""\n')
    source = tmp_path / "config.yaml"
    source.write_text(yaml.safe_dump({
        "name": "qwen3-omni", "hf_model_id": "Qwen/Qwen3-Omni-30B-A3B-Instruct", "hf_datasets": ["ddwang2000/MMSU"],
        "auxiliary_models": [{"kind": "hf", "id": "openai/whisper-large-v3", "install_cmd":
                              "huggingface-cli download openai/whisper-large-v3", "used_for": "WER"},
                             {"kind": "modelscope", "id": "iic/paraformer-zh"}],
        "rows": [{"id": "mmsu", "file": "benchmarks/eval/benchmark_omni_mmsu.py", "server": "serve --port {port}",
                  "server_gpus": 0, "client": "python c.py", "result_json": "r.json",
                  "locate": {"section_substring": "A", "config_substring": "B", "source_workload": "c=8"},
                  "cells": {"a": {"path": "summary.a"}}}], **top}))
    config = load_eval_config(source, tmp_path, {"openai"})
    return [check.line() for check in run_checks(config, list(config.rows), client_python(sys.executable, config),
                                                 None)]


def test_download_fixes_carry_the_configs_endpoint_and_cache(tmp_path):
    cache = tmp_path / "ci" / "huggingface"
    lines = _checks(tmp_path, auto_env={"HF_ENDPOINT": MIRROR, "HF_HOME": str(cache), "HF_TOKEN": "hf_secret"})
    hub = f"HF_ENDPOINT={MIRROR} HF_HOME={cache}"
    assert (f"✗ model Qwen/Qwen3-Omni-30B-A3B-Instruct in the Hugging Face cache — fix: {hub} huggingface-cli "
            "download Qwen/Qwen3-Omni-30B-A3B-Instruct") in lines
    assert (f"✗ dataset ddwang2000/MMSU in the Hugging Face cache — fix: {hub} huggingface-cli download "
            "--repo-type dataset ddwang2000/MMSU") in lines
    assert (f"✗ model openai/whisper-large-v3 in the Hugging Face cache — WER — fix: {hub} huggingface-cli "
            "download openai/whisper-large-v3") in lines, "a config's own install_cmd gets them too"
    assert "✗ model iic/paraformer-zh in the ModelScope cache — fix: modelscope download iic/paraformer-zh" in lines
    assert not [line for line in lines if "hf_secret" in line], "a token never reaches the console"


def test_the_lookups_use_the_configs_cache_not_the_shells(tmp_path, shell):
    cache = tmp_path / "ci" / "huggingface"
    for kind, repo in (("models", "Qwen/Qwen3-Omni-30B-A3B-Instruct"), ("datasets", "ddwang2000/MMSU"),
                       ("models", "openai/whisper-large-v3")):
        _snapshot(cache / "hub", kind, repo)
    (tmp_path / "ci" / "modelscope" / "iic" / "paraformer-zh").mkdir(parents=True)
    lines = _checks(tmp_path, auto_env={"HF_HOME": str(cache), "MODELSCOPE_CACHE": str(tmp_path / "ci" / "modelscope")})
    assert [line for line in lines if "cache" in line and not line.startswith("✓")] == []
    # The same config without auto_env looks in the shell's (empty) caches and says so.
    without = _checks(tmp_path)
    assert "✗ dataset ddwang2000/MMSU in the Hugging Face cache — fix: huggingface-cli download --repo-type dataset " \
           "ddwang2000/MMSU" in without


def test_omni_ci_home_moves_the_hub_cache_as_it_moves_the_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HOME")  # a shell HF_HOME would win for the rows too
    home = tmp_path / "calibration"
    _snapshot(home / ".cache" / "huggingface" / "hub", "datasets", "ddwang2000/MMSU")
    lines = _checks(tmp_path, omni_ci_home=str(home), auto_env={"HF_ENDPOINT": MIRROR})
    assert "✓ dataset ddwang2000/MMSU in the Hugging Face cache" in lines
    assert (f"✗ model Qwen/Qwen3-Omni-30B-A3B-Instruct in the Hugging Face cache — fix: HF_ENDPOINT={MIRROR} "
            f"XDG_CACHE_HOME={home}/.cache huggingface-cli download Qwen/Qwen3-Omni-30B-A3B-Instruct") in lines


def test_hub_settings_follow_huggingface_hubs_order_and_a_command_keeps_its_own():
    assert hf_cache({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert hf_cache({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}) == Path("/b/hub")
    assert hf_cache({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")
    assert with_hub_settings("HF_ENDPOINT=https://huggingface.co hf download x", "hf",
                             {"HF_ENDPOINT": MIRROR}) == "HF_ENDPOINT=https://huggingface.co hf download x"
    assert with_hub_settings("hf download 'a b'", "hf", {"HF_HOME": "/x y"}) == "HF_HOME='/x y' hf download 'a b'"
    assert with_hub_settings("", "hf", {"HF_ENDPOINT": MIRROR}) == ""
