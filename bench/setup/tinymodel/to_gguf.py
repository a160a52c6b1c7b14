"""The tiny model as a GGUF file, written with the `gguf` package from the same weights.

Two conventions differ from the HF folder, and both follow llama.cpp's own HF converter so that
the GGUF computes the same function as the HF model:
* Q and K rows are permuted: HF rotates dimension pairs (i, i + head_dim/2), llama.cpp's `llama`
  architecture rotates adjacent pairs (2i, 2i + 1).
* Dimension order: GGUF lists a tensor's dims innermost first; the writer reverses numpy's shape
  itself, so HF-shaped (out, in) arrays are passed unchanged.
Tied embeddings need no `output.weight`: llama.cpp falls back to `token_embd.weight`.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from bench.setup.tinymodel.recipe import BOS_ID, EOS_ID, PAD_ID, SERVED_NAME, SHAPE
from bench.setup.tinymodel.tokenizer.bpe import Vocabulary

# HF module name -> GGUF tensor name, per layer.
_LAYER_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def rope_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's `LlamaModel.permute`: within each head, row r*half + i moves to 2i + r."""
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def gguf_tensors(hf: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    tensors = {"token_embd.weight": hf["model.embed_tokens.weight"], "output_norm.weight": hf["model.norm.weight"]}
    for layer in range(SHAPE.layers):
        for module, short in _LAYER_NAMES.items():
            weight = hf[f"model.layers.{layer}.{module}.weight"]
            if short == "attn_q":
                weight = rope_permute(weight, SHAPE.heads)
            elif short == "attn_k":
                weight = rope_permute(weight, SHAPE.kv_heads)
            tensors[f"blk.{layer}.{short}.weight"] = np.ascontiguousarray(weight)
    return tensors


def write_gguf(path: Path, vocab: Vocabulary, hf: dict[str, np.ndarray], template: str) -> None:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(SERVED_NAME)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(SHAPE.context)
    writer.add_embedding_length(SHAPE.hidden)
    writer.add_block_count(SHAPE.layers)
    writer.add_feed_forward_length(SHAPE.intermediate)
    writer.add_head_count(SHAPE.heads)
    writer.add_head_count_kv(SHAPE.kv_heads)
    writer.add_rope_dimension_count(SHAPE.head_dim)
    writer.add_rope_freq_base(SHAPE.rope_theta)
    writer.add_layer_norm_rms_eps(SHAPE.rms_norm_eps)
    writer.add_vocab_size(len(vocab.tokens))

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # the regex our ByteLevel pre-tokenizer uses
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(
        [gguf.TokenType.CONTROL if i in vocab.special else gguf.TokenType.NORMAL for i in range(len(vocab.tokens))]
    )
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_pad_token_id(PAD_ID)
    writer.add_add_bos_token(False)
    writer.add_chat_template(template)

    for name, tensor in gguf_tensors(hf).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
