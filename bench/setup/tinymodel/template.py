"""The tiny model's chat template and a renderer that behaves like the servers' renderers.

The template is ChatML with a Qwen2.5-style tools section, because that is the tool-call format
every server under test recognises (llama-server, vLLM's `hermes` parser, mlx-lm, transformers).
`render_chat` mirrors transformers' Jinja environment (trim/lstrip blocks, a `tojson` that keeps
key order and non-ASCII text), so what tests see is what a Python server would send the model.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATE_FILE = "chatml_tools.jinja"


@lru_cache(maxsize=1)
def chat_template() -> str:
    return resources.files("bench.setup.tinymodel").joinpath(TEMPLATE_FILE).read_text(encoding="utf-8")


def _tojson(value: Any, indent: int | None = None) -> str:
    # Jinja's own tojson sorts keys and HTML-escapes `<>&'`; chat renderers do neither.
    return json.dumps(value, ensure_ascii=False, indent=indent)


def render_chat(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
) -> str:
    return render_template(chat_template(), messages, tools, add_generation_prompt=add_generation_prompt)


def render_template(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
) -> str:
    """`template` (a checkpoint's chat_template.jinja) rendered as transformers renders it."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt)
