"""The tiny model's tokenizer: byte-level BPE trained here, in the GPT-2 style llama.cpp knows.

GPT-2's pre-tokenizer regex (`ByteLevel(use_regex=True)`) is what lets the GGUF declare
`tokenizer.ggml.pre = gpt-2` and have llama.cpp split text exactly as `tokenizers` does.
`<tool_call>` is deliberately not a single token: a random model would then emit it now and
then, and llama-server answers HTTP 500 to tool requests whose output it cannot parse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from bench.setup.tinymodel.recipe import SHAPE, SPECIAL_IDS, SPECIAL_TOKENS
from bench.setup.tinymodel.tokenizer.corpus import corpus


def train_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=SHAPE.vocab,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable, whatever the corpus
        min_frequency=1,  # the corpus is small; pairs seen once still fill the vocabulary
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    if tokenizer.get_vocab_size() != SHAPE.vocab:
        # A short vocabulary would silently change every tensor shape downstream.
        raise RuntimeError(f"tokenizer has {tokenizer.get_vocab_size()} tokens, the recipe needs {SHAPE.vocab}")
    ids = [tokenizer.token_to_id(token) for token in SPECIAL_TOKENS]
    if ids != list(SPECIAL_IDS):  # configs and the GGUF hard-code these ids
        raise RuntimeError(f"special tokens got ids {ids}, the recipe needs {list(SPECIAL_IDS)}")
    return tokenizer


@dataclass(frozen=True)
class Vocabulary:
    """The tokenizer as GGUF stores it: tokens by id, which ids are special, and the merges."""

    tokens: list[str]
    special: frozenset[int]
    merges: list[str]


def vocabulary(tokenizer: Tokenizer) -> Vocabulary:
    by_id = {token_id: token for token, token_id in tokenizer.get_vocab(with_added_tokens=True).items()}
    if sorted(by_id) != list(range(len(by_id))):
        raise RuntimeError("tokenizer ids are not contiguous; GGUF needs one token per id")
    special = frozenset(
        token_id for token_id, added in tokenizer.get_added_tokens_decoder().items() if added.special
    )
    merges = json.loads(tokenizer.to_str())["model"]["merges"]  # only reachable through the serialised model
    # tokenizers >= 0.20 stores a merge as a pair; GGUF (like the old format) wants "left right".
    return Vocabulary(
        tokens=[by_id[i] for i in range(len(by_id))],
        special=special,
        merges=[m if isinstance(m, str) else " ".join(m) for m in merges],
    )
