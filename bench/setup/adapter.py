"""What an adapter declares: a framework described as data, with no engine logic in it.

An adapter module builds one `Adapter`: the platforms it runs on, its install recipe, how to turn
a model profile into a serve command, the endpoint that says "ready", which model id the server
must list, and its protocol capabilities. The engine reads these fields; it never branches on a
framework's name. `ModelRef` and `ModelFormat` (bench.setup.model_ref) are part of this contract
and importable from here.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.core.result.model import ServerCommand
from bench.setup.installs.cache import Installation, Recipe
from bench.setup.model_ref import ModelFormat, ModelRef
from bench.setup.profiles import ModelProfile
from bench.setup.server_metrics import ServerMetrics

__all__ = [
    "Adapter", "Bound", "Capabilities", "ModelFormat", "ModelRef", "NotConfigured", "ServeCommand", "ServeContext",
    "ServerNaming", "host_platforms", "this_platform",
]


@dataclass(frozen=True)
class Capabilities:
    """Protocol facts that change how requests are built (`Adapter.request_extras`, the cell's
    request body). How a server ends its streams or answers an unknown model is not declared: the
    stream parser and the verdict rules handle every form, whoever the server is."""

    include_usage: bool = True  # send stream_options.include_usage (token counts from the server)
    ignore_eos: bool = False  # send `ignore_eos` when asked: the server accepts and honours it
    # False where the server takes its sampling settings from its first request and keeps them for its
    # life: the greedy fidelity run then gets a server of its own (bench.run.audits.fidelity).
    sampling_per_request: bool = True


UNITS = {"GiB": 2**30, "MiB": 2**20, "GB": 10**9, "MB": 10**6}


@dataclass(frozen=True)
class Reservation:
    """Memory the framework sets aside as it starts and states in its log (a KV cache pool): the level's
    memory block gives it beside the server's peak (bench.core.figures.memory), so that a pool sized
    up front is told apart from what the model and its live cache use."""

    what: str  # what is set aside, as the reports name it: "KV cache"
    patterns: tuple[str, ...]  # regular expressions, each with the groups `amount` and `unit` (UNITS)

    def read(self, log: str) -> tuple[int, str] | None:
        """The bytes set aside and the lines that say so: each process's last statement, summed (a process
        named by `pid=N` in its lines, as vLLM's tensor-parallel workers are); None without one."""
        found: dict[str, tuple[int, str]] = {}
        for line in log.splitlines():
            for pattern in self.patterns:
                if (m := re.search(pattern, line)) and m.group("unit") in UNITS:
                    process = re.search(r"pid=(\d+)", line)
                    found[process.group(1) if process else ""] = (
                        round(float(m.group("amount")) * UNITS[m.group("unit")]), line.strip()[:300])
        if not found:
            return None
        return sum(b for b, _ in found.values()), "\n".join(line for _, line in found.values())


@dataclass(frozen=True)
class ServerNaming:
    """How a server names the model it serves, where that is not `served_id` everywhere (the default).
    The cell's model check (bench.core.verdicts.Identity) and an eval row's read it."""

    # Other ids the server names the served model by, in its responses or on /v1/models (`<path>@main`).
    other_ids: tuple[str, ...] = ()
    # False where /v1/models lists something other than what the server serves (its download cache):
    # the listing is still recorded, but says nothing about the served model.
    lists_served: bool = True


@dataclass(frozen=True)
class ServeContext:
    install: Installation
    model: ModelRef
    host: str
    port: int
    split: str
    concurrency: int
    platform: str = ""  # the platform tag the command is for (e.g. "linux-x86_64+cuda")
    # A server profile's knobs for adapters that have them (an eval config's sglang-omni router
    # profile: workers, GPUs per worker, worker arguments); other adapters ignore them.
    options: Mapping[str, Any] = field(default_factory=dict)
    workdir: Path | None = None  # a folder of this server's own (its log's), for files it needs
    # The API key clients send (--api-key, OPENAI_API_KEY, a profile's api_key_env), for a server
    # that takes one on its command line; None: no key. The engine redacts it wherever the command
    # is recorded (ServeCommand.secrets).
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ServeCommand:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the inherited environment
    cwd: Path | None = None
    cpus: tuple[int, ...] | None = None  # CPU affinity it starts with (Linux): its processes inherit it
    files: dict[Path, str] = field(default_factory=dict)  # written before the server starts
    # A file where the server records the process groups of children it starts in sessions of
    # their own (sglang-omni's router and its workers): those groups are stopped with the server.
    group_manifest: Path | None = None
    # Values written `***` wherever the command is recorded (the result, the server log's first
    # line): the API key a server was given.
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text

    def shown(self) -> str:
        """The argv as one line, as the server log records it."""
        return self.redact(" ".join(self.argv))

    def to_json(self) -> ServerCommand:
        """The command as a result's server records it (secrets redacted)."""
        argv = [self.redact(arg) for arg in self.argv]
        env = {key: self.redact(value) for key, value in self.env.items()}
        out: ServerCommand = {"argv": argv, "env": env, "cwd": str(self.cwd) if self.cwd else None}
        if self.cpus is not None:
            out["cpus"] = list(self.cpus)
        return out

    def setup_json(self) -> dict[str, object]:
        """The files written before it starts and its process-group manifest, which an eval row's
        round records beside `to_json()`; {} for a command with neither. A result has no place for
        them: the one adapter that writes them (sglang-omni's router) serves no benchmark cell."""
        out: dict[str, object] = {}
        if self.files:
            out["files"] = {str(path): text for path, text in self.files.items()}
        if self.group_manifest is not None:
            out["group_manifest"] = str(self.group_manifest)
        return out


class NotConfigured(LookupError):
    """An adapter defined by the user's profile or command line has nothing to run; says how."""


@dataclass(frozen=True)
class Bound:
    """An adapter made concrete for one profile (and endpoint): what a cell runs."""

    adapter: Adapter
    install: Installation
    model: ModelRef


# Every Linux tag a framework with a CPU and a CUDA build runs on.
LINUX_PLATFORMS = ("linux-x86_64", "linux-aarch64", "linux-x86_64+cuda", "linux-aarch64+cuda")


def this_platform() -> str:
    """`linux-x86_64`, `darwin-arm64`, ...: the OS and CPU, without accelerators."""
    return f"{platform.system().lower()}-{platform.machine().lower().replace('amd64', 'x86_64')}"


def host_platforms() -> tuple[str, ...]:
    """The platform tags this host offers, most specific first: `linux-x86_64+cuda` when an
    NVIDIA GPU answers `nvidia-smi`, then the plain `linux-x86_64`."""
    # Imported on use: detection runs nvidia-smi, which only this question needs.
    from bench.host.machine import detect

    base = this_platform()
    return (f"{base}+cuda", base) if detect().gpus else (base,)


@dataclass(frozen=True)
class Adapter:
    """A framework as data. `recipes` and `serve` may differ per platform tag: a recipe keyed
    `"*"` applies wherever no tag-specific one exists; `serve` reads `ServeContext.platform`."""

    name: str
    platforms: frozenset[str]
    model_format: ModelFormat
    default_port: int
    ready_path: str
    recipes: Mapping[str, Recipe]
    serve: Callable[[ServeContext], ServeCommand]
    capabilities: Capabilities = Capabilities()
    startup_timeout_s: float = 300.0
    served_id: Callable[[ModelRef], str] | None = None  # when the server names the model itself
    # How the installed release names the model, where releases differ: (the model as `model_for_server`
    # made it, the installation) -> ServerNaming. None: `served_id` everywhere.
    naming: Callable[[ModelRef, Installation], ServerNaming] | None = None
    # Set by adapters that a profile or `--endpoint` defines instead of code (the generic
    # `openai` one): (profile, endpoint or None) -> Bound, or raises NotConfigured.
    bind: Callable[[ModelProfile, str | None], Bound] | None = None
    # False for a server only eval configs start (sglang-omni's router): no benchmark cells, no
    # weekly update, no nightly matrix entry.
    benchmark_cells: bool = True
    # True when `serve` places ServeContext.options["extra_args"] itself (a router passes them to
    # its workers); otherwise the engine appends them to the server's argv.
    places_extra_args: bool = False
    notes: str = ""
    server_metrics: ServerMetrics | None = None  # its Prometheus endpoint, scraped around each level
    reservation: Reservation | None = None  # the memory it states it set aside as it started

    def command(self, ctx: ServeContext, *, metrics: bool = True) -> ServeCommand:
        """`serve(ctx)`, with the flags that turn its metrics endpoint on unless `metrics` is False
        (--server-metrics off): the server a cell starts."""
        command = self.serve(ctx)
        flags = self.server_metrics.flags if self.server_metrics is not None and metrics else ()
        return replace(command, argv=[*command.argv, *flags]) if flags else command

    def platform_here(self) -> str | None:
        """The most specific platform tag of this host that the adapter supports, or None."""
        return next((tag for tag in host_platforms() if tag in self.platforms), None)

    def runs_here(self) -> bool:
        return self.platform_here() is not None

    def recipe_for(self, platform_tag: str) -> Recipe:
        return self.recipes.get(platform_tag) or self.recipes["*"]

    @property
    def recipe(self) -> Recipe:
        """The recipe for this host (the generic one where the adapter does not run here)."""
        return self.recipe_for(self.platform_here() or "*")

    def model_for_server(self, model: ModelRef) -> ModelRef:
        """The model with the id this framework's server will list (e.g. mlx-lm: the absolute path)."""
        if self.served_id is None:
            return model
        return replace(model, served_id=self.served_id(model))

    def naming_for(self, model: ModelRef, install: Installation) -> ServerNaming:
        """How this installation's server names `model` (from `model_for_server`)."""
        return self.naming(model, install) if self.naming is not None else ServerNaming()

    @property
    def takes_endpoint(self) -> bool:
        """Whether `--endpoint` (an already-running server of unknown make) can be this framework."""
        return self.bind is not None

    def request_extras(self) -> dict:
        """Fields every benchmark request carries for this framework."""
        extras: dict = {}
        if self.capabilities.include_usage:
            extras["stream_options"] = {"include_usage": True}
        return extras
