"""How many tokens a prompt will take, estimated without a tokenizer, and the bucket check.

A character-class estimate fitted to the tiny model's byte-level BPE tokenizer (vocabulary 2,048:
about two letters per token, a token per digit), plus the ChatML template's tokens around each
message, tool result and tool call: the build steers every prompt's size with it, so it needs no
tokenizer and gives the same bytes everywhere. token_stats.py measures the real counts afterwards.
"""

from __future__ import annotations

import functools
import math
import re

# Tokens per character class, least-squares fitted on this text with a tokenizer trained by the
# tiny model's recipe (real/estimate: mean 1.02, 5th-95th percentile 0.89-1.17).
TOKENS_PER_LETTER, TOKENS_PER_DIGIT, TOKENS_PER_SYMBOL = 0.5, 1.2, 0.6
CHARS_PER_TOKEN = 2.2       # to turn a token budget into a character budget for tool payloads
MESSAGE_OVERHEAD = 6        # <|im_start|>role\n ... <|im_end|>\n
TOOL_OVERHEAD = 10          # <tool_response> ... </tool_response> around each tool result
CALL_OVERHEAD = 16          # <tool_call>{"name": ..., "arguments": ...}</tool_call>
GENERATION_PROMPT = 3       # <|im_start|>assistant\n

_DIGIT, _SYMBOL, _SPACE = re.compile(r"\d"), re.compile(r"[^\w\s]"), re.compile(r"\s")


@functools.lru_cache(maxsize=4096)  # the same messages are re-estimated while a trace is sized
def estimate_tokens(text: str) -> int:
    digits, symbols = _DIGIT.subn("", text)[1], _SYMBOL.subn("", text)[1]
    letters = len(text) - digits - symbols - _SPACE.subn("", text)[1]
    return math.ceil(TOKENS_PER_LETTER * letters + TOKENS_PER_DIGIT * digits + TOKENS_PER_SYMBOL * symbols)


def estimate_request(messages: list[dict]) -> int:
    """Input tokens of a request after a ChatML chat template, estimated."""
    total = GENERATION_PROMPT
    for m in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(m.get("content") or "")
        total += TOOL_OVERHEAD if m.get("role") == "tool" else 0
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            total += CALL_OVERHEAD + estimate_tokens(fn["name"] + fn["arguments"])
    return total


def in_bucket(name: str, est: int, lo: int, hi: int) -> None:
    """Fail the build rather than write a prompt whose estimate left its bucket."""
    if not lo <= est <= hi:
        raise AssertionError(f"{name}: estimated {est} input tokens, outside its bucket [{lo}, {hi}]")
