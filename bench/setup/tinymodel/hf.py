"""The tiny model as a Hugging Face folder: what transformers, vLLM and mlx-lm load.

`config.json` carries both spellings of a few fields (`rope_theta` next to `rope_parameters`,
`torch_dtype` next to `dtype`): transformers 5 writes only the new ones, and older loaders
(vLLM < 0.10, mlx-lm, llama.cpp's converter) read only the old ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer

from bench.setup.tinymodel.recipe import BOS_ID, EOS_IDS, EOS_TOKEN, PAD_ID, PAD_TOKEN, SHAPE


def json_bytes(value: Any) -> bytes:
    """The one JSON encoding for every file we write: sorted keys, so rebuilds are byte-identical."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def model_config() -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": SHAPE.vocab,
        "hidden_size": SHAPE.hidden,
        "intermediate_size": SHAPE.intermediate,
        "num_hidden_layers": SHAPE.layers,
        "num_attention_heads": SHAPE.heads,
        "num_key_value_heads": SHAPE.kv_heads,
        "head_dim": SHAPE.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": SHAPE.context,
        "rms_norm_eps": SHAPE.rms_norm_eps,
        "rope_theta": SHAPE.rope_theta,
        "rope_parameters": {"rope_theta": SHAPE.rope_theta, "rope_type": "default"},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "use_cache": True,
        "bos_token_id": BOS_ID,
        "eos_token_id": list(EOS_IDS),
        "pad_token_id": PAD_ID,
        "torch_dtype": "float32",
        "dtype": "float32",
    }


def generation_config() -> dict[str, Any]:
    # Sampling by default: a random model at temperature 0 loops on one token (often a newline).
    return {
        "bos_token_id": BOS_ID,
        "eos_token_id": list(EOS_IDS),
        "pad_token_id": PAD_ID,
        "do_sample": True,
        "temperature": 1.0,
    }


def tokenizer_config(tokenizer: Tokenizer, template: str) -> dict[str, Any]:
    added = {
        str(token_id): {
            "content": token.content,
            "lstrip": token.lstrip,
            "normalized": token.normalized,
            "rstrip": token.rstrip,
            "single_word": token.single_word,
            "special": token.special,
        }
        for token_id, token in sorted(tokenizer.get_added_tokens_decoder().items())
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": SHAPE.context,
        "chat_template": template,  # older loaders read it only here, newer ones prefer chat_template.jinja
    }


def write_hf(directory: Path, tokenizer: Tokenizer, weights: dict[str, np.ndarray], template: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "config.json": json_bytes(model_config()),
        "generation_config.json": json_bytes(generation_config()),
        # Re-encoded like every other JSON file; loaders read the vocab as a map, so order is free.
        "tokenizer.json": json_bytes(json.loads(tokenizer.to_str())),
        "tokenizer_config.json": json_bytes(tokenizer_config(tokenizer, template)),
        "special_tokens_map.json": json_bytes({"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}),
        "chat_template.jinja": template.encode("utf-8"),
    }
    for name, content in files.items():
        (directory / name).write_bytes(content)
    weights_path = directory / "model.safetensors"
    save_file(weights, str(weights_path), metadata={"format": "pt"})
    weights_path.chmod(0o644)  # safetensors creates it owner-only; a server in a container may run as another user
