"""Prompts: one request's messages and budget, and a run's measured prompts with their warm-up.

Every prompt file and loader produces these (bench.setup.prompt_files reads the files; the traces
make them to a trace's token lengths). A warm-up prompt may not open like a measured one
(`assert_no_shared_prefix`), so warming up never primes a prefix cache for the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Warm-up must not prime a prefix cache for the measured prompts: their first messages may not
# begin with the same text. 32 characters cover the chat template's role header plus a few
# tokens of content, so a shared block in a paged KV cache would need an identical opening.
PREFIX_CHARS = 32


@dataclass(frozen=True)
class Prompt:
    """One benchmark request: OpenAI chat messages plus the output budget.

    `tools` is the request's `tools` parameter (None: tools, if any, are stated only in the
    system prompt's text, as SiliconBench's agent split does).
    """

    name: str
    messages: tuple[dict, ...]
    max_tokens: int
    description: str = ""
    tools: tuple[dict, ...] | None = None
    meta: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PromptSet:
    """The measured prompts of one run, the warm-up sent before them, and where they came from."""

    prompts: tuple[Prompt, ...]
    warmup: tuple[Prompt, ...]
    source: Path
    format: str  # "cellbench", "siliconbench", "sharegpt" or "jsonl"


def assert_no_shared_prefix(measured: tuple[Prompt, ...] | list[Prompt],
                            warmup: tuple[Prompt, ...] | list[Prompt]) -> None:
    """Raise ValueError if a warm-up prompt's first message opens like a measured prompt's."""
    opening: dict[str, str] = {}
    for m in measured:
        opening.setdefault(_opening(m), m.name)
    for w in warmup:
        head = _opening(w)
        for other, name in opening.items():
            if head and other and (head.startswith(other) or other.startswith(head)):
                raise ValueError(f"warm-up prompt {w.name!r} shares its first {PREFIX_CHARS} characters "
                                 f"with measured prompt {name!r}: {head!r}")


def _opening(p: Prompt) -> str:
    return str(p.messages[0].get("content") or "")[:PREFIX_CHARS] if p.messages else ""
