"""Every number that defines the tiny model, in one place.

Bump `RECIPE_VERSION` in `bench/setup/tinymodel/build.py` whenever anything here, the corpus, the chat
template or a writer changes: the cache directory is keyed by it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """A Llama shaped like the small real ones (GQA, head_dim 64), but ~1.7 M parameters."""

    vocab: int = 2048
    hidden: int = 256
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 512
    # 32K, not 4K: llama-server caps each slot at the training context, and the agent split
    # reaches ~9.3K tokens of this tokenizer, and users' own agent prompt files more.
    context: int = 32768
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SHAPE = Shape()
SEED = 0
INIT_STD = 0.02  # what transformers' initializer_range gives a Llama

# Specials take the first ids, in this order; the trainer assigns ids in list order.
PAD_TOKEN, IM_START_TOKEN, EOS_TOKEN = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START_TOKEN, EOS_TOKEN)
PAD_ID, IM_START_ID, EOS_ID = 0, 1, 2
SPECIAL_IDS = (PAD_ID, IM_START_ID, EOS_ID)
BOS_ID = PAD_ID  # never added to prompts (add_bos false); loaders still want an id
EOS_IDS = (EOS_ID, PAD_ID)  # generation stops at either, as Qwen's models do

SERVED_NAME = "tiny-llama"  # general.name in the GGUF
