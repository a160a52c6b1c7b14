"""Prompts made to a trace's token lengths with the run's model's tokenizer.

A trace records how long each request was, not what it said, so the user message is synthesised:
words drawn from the tokenizer's own vocabulary, each chosen so that it is one token alone and one
token after a space. Byte-level BPE splits text into words before merging (GPT-2's pre-tokenizer
rule), so a message of n such words separated by spaces is exactly n tokens; every message is
encoded once more to check it. The chat template adds its own tokens on top (role headers, the
generation prompt): the server's `usage.prompt_tokens` is the input length plus that constant.

Mooncake's `hash_ids` say which 512-token blocks two requests share: block id h is always the same
512 words (drawn from a generator seeded by the run's seed and h), so requests whose lists open with
the same ids open with exactly that text, as the traced service's prefix cache saw them; the tokens
beyond the listed blocks are the request's own (seeded by the seed and its position). The same
trace, tokenizer and seed give the same prompts on every run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.setup.prompts import Prompt
from bench.setup.traces.parse import HASH_BLOCK_TOKENS, Trace, TraceEntry

_WORD = re.compile(r"^[a-z]{2,12}$")
_BLOCK, _OWN = 0, 1  # the streams of a seed: a shared block's words, a request's own words


class TokenizerMissing(LookupError):
    """The model profile names no tokenizer cellbench can load here."""


def check_tokenizer(builtin: str | None, profile_name: str) -> None:
    """TokenizerMissing unless `tokenizer_path` can give the profile's tokenizer: only the built-in
    tiny model's for now (other profiles name no tokenizer file, and nothing is downloaded)."""
    if builtin != "tiny":
        raise TokenizerMissing(f"--trace-file makes each prompt to its input length with the model's tokenizer, and "
                           f"profile {profile_name!r} has none cellbench can load: use the built-in model "
                           "(--model tiny)")


def tokenizer_path(builtin: str | None, profile_name: str) -> Path:
    """The tokenizer.json of a profile's model: the built-in tiny model's (built on first use)."""
    check_tokenizer(builtin, profile_name)
    from bench.setup.tinymodel import ensure_tiny_model  # imported on use: it pulls in tokenizers and gguf

    return ensure_tiny_model().hf_dir / "tokenizer.json"


class Synthesiser:
    """Messages of an exact token count from one tokenizer (`tokenizers`' tokenizer.json)."""

    def __init__(self, path: Path, seed: int = 0) -> None:
        from tokenizers import Tokenizer  # imported on use, as the tiny model's build does

        self.tokenizer = Tokenizer.from_file(str(path))
        self.seed = seed
        self._blocks: dict[tuple[int, int, tuple[int, ...]], tuple[str, ...]] = {}
        self.words = _single_token_words(self.tokenizer)
        if len(self.words) < 16:
            raise ValueError(f"{path}: only {len(self.words)} words of one token each; too few to make prompts")

    def _draw(self, stream: int, key: int, n: int, scope: tuple[int, ...] = ()) -> list[str]:
        rng = np.random.default_rng([self.seed, stream, key % 2**63, *scope])
        return [self.words[i] for i in rng.integers(0, len(self.words), size=n)]

    def block(self, hash_id: int, size: int = HASH_BLOCK_TOKENS, scope: tuple[int, ...] = ()) -> tuple[str, ...]:
        """The `size` words hash id `hash_id` stands for (drawn once per synthesiser); `scope` keeps
        apart the blocks of conversations whose ids are their own (a Weka trace's local ids)."""
        key = (hash_id, size, scope)
        if key not in self._blocks:
            self._blocks[key] = tuple(self._draw(_BLOCK, hash_id, size, scope))
        return self._blocks[key]

    def words_for(self, entry: TraceEntry, position: int, block_size: int = HASH_BLOCK_TOKENS,
                  scope: tuple[int, ...] = (), own: tuple[int, ...] = ()) -> list[str]:
        """The entry's input as words: its shared blocks, then words of its own (drawn for
        `position` within `own`), cut to its length."""
        words: list[str] = []
        for hash_id in entry.hash_ids:
            words.extend(self.block(hash_id, block_size, scope))
        if len(words) < entry.input_tokens:
            words.extend(self._draw(_OWN, position, entry.input_tokens - len(words), own))
        return words[: entry.input_tokens]

    def text(self, entry: TraceEntry, position: int, block_size: int = HASH_BLOCK_TOKENS,
             scope: tuple[int, ...] = (), own: tuple[int, ...] = ()) -> str:
        return " ".join(self.words_for(entry, position, block_size, scope, own))

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


def trace_prompts(trace: Trace, synth: Synthesiser) -> tuple[Prompt, ...]:
    """One prompt per trace entry, in order: its user message exactly `input_tokens` tokens long (checked),
    its max_tokens the entry's output length."""
    texts = [synth.text(entry, i) for i, entry in enumerate(trace.entries)]
    counts = [len(e.ids) for e in synth.tokenizer.encode_batch(texts, add_special_tokens=False)]
    prompts = []
    for i, (entry, text, n) in enumerate(zip(trace.entries, texts, counts, strict=True)):
        if n != entry.input_tokens:  # never expected: the words are chosen so that it cannot happen
            raise ValueError(f"{trace.name} line {entry.line}: the message is {n} tokens, not {entry.input_tokens}")
        prompts.append(Prompt(name=f"{trace.name}:{entry.line}", messages=({"role": "user", "content": text},),
                              max_tokens=entry.output_tokens, description=f"trace entry {i}",
                              meta={"trace_line": entry.line, "input_tokens": entry.input_tokens}))
    return tuple(prompts)


def _single_token_words(tokenizer: object) -> Sequence[str]:
    """Lower-case words that are one token alone and one token after a space, in token-id order."""
    encode = tokenizer.encode  # type: ignore[attr-defined]
    vocab: dict[str, int] = tokenizer.get_vocab()  # type: ignore[attr-defined]
    words = []
    for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
        word = token[1:] if token.startswith("Ġ") else None  # byte-level BPE writes a leading space as Ġ
        if word is None or not _WORD.match(word):
            continue
        if len(encode(word, add_special_tokens=False).ids) == 1 and len(encode(" " + word,
                                                                                add_special_tokens=False).ids) == 1:
            words.append(word)
    return words
