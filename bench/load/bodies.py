"""The JSON bodies of a level's chat requests, serialised before the level's clock starts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bench.core.level_run import LevelConfig
from bench.setup.prompts import Prompt


def build_body(cfg: LevelConfig, prompt: Prompt, nonce: str = "") -> dict[str, Any]:
    """`{model, messages, max_tokens, stream: true, **extra_body}`, plus `tools` when the prompt has any;
    `nonce` opens the first message's text."""
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": with_nonce(prompt.messages, nonce),
        "max_tokens": prompt.max_tokens,
        "stream": True,
        **cfg.extra_body,
    }
    if prompt.tools is not None:
        body["tools"] = list(prompt.tools)
    return body


def asked_max_tokens(cfg: LevelConfig, prompt: Prompt) -> int | None:
    """The max_tokens `build_body` sends for `prompt` (the extra body's, where it sets one)."""
    value = cfg.extra_body.get("max_tokens", prompt.max_tokens)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def with_nonce(messages: Sequence[dict], nonce: str) -> list[dict]:
    """`messages` with `nonce` at the very start of the first message's text (a text part put
    first where the content is a list of parts), the other messages as they are."""
    if not nonce or not messages:
        return list(messages)
    first = dict(messages[0])
    content = first.get("content")
    if isinstance(content, list):
        head = content[0] if content else None
        if isinstance(head, dict) and head.get("type") == "text":
            first["content"] = [{**head, "text": nonce + str(head.get("text", ""))}, *content[1:]]
        else:
            first["content"] = [{"type": "text", "text": nonce}, *content]
    else:
        first["content"] = nonce + (content or "")
    return [first, *messages[1:]]


def encode_bodies(cfg: LevelConfig, prompts: Sequence[Prompt], n: int, kind: str = "r") -> list[tuple[Prompt, bytes]]:
    """Request bodies, serialised ahead (a 16 KB agent prompt takes ~0.1 ms to encode: client
    time that would otherwise land in schedule lag). Request i sends body i % len(bodies): the
    first min(len(prompts), n) prompts' bodies, or with `cfg.nonce` one body per request, prompt
    i % len(prompts) opened by "[cellbench <kind><i> <nonce>] "."""
    if cfg.nonce is None:
        return [(p, json.dumps(build_body(cfg, p)).encode()) for p in prompts[: min(len(prompts), n)]]
    picked = [prompts[i % len(prompts)] for i in range(n)] if prompts else []
    return [(p, json.dumps(build_body(cfg, p, f"[cellbench {kind}{i} {cfg.nonce}] ")).encode())
            for i, p in enumerate(picked)]
