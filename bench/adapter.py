"""What an adapter declares: a framework described as data, with no engine logic in it.

An adapter module builds one `Adapter`: the platforms it runs on, its install recipe, how to turn
a model profile into a serve command, the endpoint that says "ready", which model id the server
must list, and its protocol capabilities. The engine reads these fields; it never branches on a
framework's name.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bench.installs import Installation, Recipe

ModelFormat = Literal["gguf", "hf", "mlx", "ollama"]


@dataclass(frozen=True)
class Capabilities:
    """Protocol facts that change how requests are built and how responses are read."""

    include_usage: bool = True  # honours stream_options.include_usage
    ignore_eos: bool = False  # accepts `ignore_eos` (transformers serve answers 422 to it)
    done_marker: bool = True  # ends streams with `data: [DONE]`
    sse_comments: bool = False  # sends `: keepalive` comment lines
    unknown_model: Literal["accepted", "400", "404", "409", "error"] = "accepted"


@dataclass(frozen=True)
class ModelRef:
    """The model as one framework sees it: the local artefact and the id the server must list."""

    path: Path | None  # a GGUF file or a model directory; None for registry tags (ollama)
    served_id: str  # the id `/v1/models` must list and every request sends
    alias: str | None = None  # what the serve command names it, when the adapter can choose


@dataclass(frozen=True)
class ServeContext:
    install: Installation
    model: ModelRef
    host: str
    port: int
    split: str
    concurrency: int


@dataclass(frozen=True)
class ServeCommand:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the inherited environment
    cwd: Path | None = None

    def to_json(self) -> dict:
        return {"argv": self.argv, "env": self.env, "cwd": str(self.cwd) if self.cwd else None}


def this_platform() -> str:
    """`linux-x86_64`, `darwin-arm64`, ... (CUDA adds a separate flag, not a platform)."""
    return f"{platform.system().lower()}-{platform.machine().lower().replace('amd64', 'x86_64')}"


@dataclass(frozen=True)
class Adapter:
    name: str
    platforms: frozenset[str]
    model_format: ModelFormat
    default_port: int
    ready_path: str
    recipe: Recipe
    serve: Callable[[ServeContext], ServeCommand]
    capabilities: Capabilities = Capabilities()
    startup_timeout_s: float = 300.0
    notes: str = ""

    def runs_here(self) -> bool:
        return this_platform() in self.platforms

    def request_extras(self) -> dict:
        """Fields every benchmark request carries for this framework."""
        extras: dict = {}
        if self.capabilities.include_usage:
            extras["stream_options"] = {"include_usage": True}
        return extras
