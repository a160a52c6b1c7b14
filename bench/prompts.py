"""Prompts: one request's messages and budget, as every split file and loader produces them."""

from __future__ import annotations

from dataclasses import dataclass, field


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
