"""Random fp32 weights for the tiny Llama, named and shaped as Hugging Face stores them.

Each tensor gets its own generator seeded from (SEED, tensor name), so adding or reordering
tensors never changes the others. Normals are drawn in float64 and only then rounded to float32:
a last-bit difference in a platform's libm (the sampler's tail uses log/exp) then almost never
survives the rounding, which keeps the files byte-identical across machines.
"""

from __future__ import annotations

import hashlib

import numpy as np

from bench.setup.tinymodel.recipe import INIT_STD, SEED, SHAPE


def _normal(name: str, shape: tuple[int, ...]) -> np.ndarray:
    name_key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([SEED, name_key])))
    return (rng.standard_normal(shape) * INIT_STD).astype(np.float32)


def _ones(size: int) -> np.ndarray:
    return np.ones(size, dtype=np.float32)


def hf_weights() -> dict[str, np.ndarray]:
    """HF layout: Linear weights are (out_features, in_features); embeddings tied, so no lm_head."""
    shape = SHAPE
    h, hd = shape.hidden, shape.head_dim
    weights = {"model.embed_tokens.weight": _normal("model.embed_tokens.weight", (shape.vocab, h))}
    for layer in range(shape.layers):
        prefix = f"model.layers.{layer}"
        linear = {
            "self_attn.q_proj": (shape.heads * hd, h),
            "self_attn.k_proj": (shape.kv_heads * hd, h),
            "self_attn.v_proj": (shape.kv_heads * hd, h),
            "self_attn.o_proj": (h, shape.heads * hd),
            "mlp.gate_proj": (shape.intermediate, h),
            "mlp.up_proj": (shape.intermediate, h),
            "mlp.down_proj": (h, shape.intermediate),
        }
        for module, dims in linear.items():
            name = f"{prefix}.{module}.weight"
            weights[name] = _normal(name, dims)
        weights[f"{prefix}.input_layernorm.weight"] = _ones(h)
        weights[f"{prefix}.post_attention_layernorm.weight"] = _ones(h)
    weights["model.norm.weight"] = _ones(h)
    return weights
