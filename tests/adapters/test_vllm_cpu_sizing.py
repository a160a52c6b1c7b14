"""vLLM-CPU's KV cache is sized for the cell from the model's own config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters import vllm

TINY = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "hidden_size": 256}
QWEN3_06B = {"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
             "hidden_size": 1024}


def _model(tmp_path: Path, config: dict) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_a_tiny_model_gets_the_least_and_a_real_one_the_most(tmp_path):
    # tiny: 1 KiB a token, 16 x 4096 tokens = 64 MiB; Qwen3-0.6B: 112 KiB a token, 7 GiB
    tiny, qwen = tmp_path / "tiny", tmp_path / "qwen"
    tiny.mkdir(), qwen.mkdir()
    assert vllm.cpu_kv_cache_gib(_model(tiny, TINY), 16, 4096) == 1
    assert vllm.cpu_kv_cache_gib(_model(qwen, QWEN3_06B), 16, 4096) == 4


def test_in_between_it_rounds_up_to_whole_gib(tmp_path):
    # 112 KiB a token x 2 requests x 8192 tokens = 1.75 GiB -> 2
    assert vllm.cpu_kv_cache_gib(_model(tmp_path, QWEN3_06B), 2, 8192) == 2


def test_head_dim_and_kv_heads_default_as_in_transformers(tmp_path):
    config = {"num_hidden_layers": 24, "num_attention_heads": 16, "hidden_size": 2048}  # 128 per head, no GQA
    # 2 x 24 x 16 x 128 x 2 B = 192 KiB a token x 8 x 4096 = 6 GiB -> capped at 4
    assert vllm.cpu_kv_cache_gib(_model(tmp_path, config), 8, 4096) == 4
    assert vllm.cpu_kv_cache_gib(_model(tmp_path, config), 1, 4096) == 1  # 0.75 GiB


@pytest.mark.parametrize("config", [None, "not json", {"hidden_size": 256}])
def test_a_model_it_cannot_read_gets_the_most(tmp_path, config):
    if config is not None:
        (tmp_path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    assert vllm.cpu_kv_cache_gib(tmp_path, 16, 4096) == vllm.CPU_KV_CACHE_GIB[1]
