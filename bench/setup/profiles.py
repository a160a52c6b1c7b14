"""Model profiles: what one model is for each framework, read from `models/<name>.yaml`.

A profile names the artefact each model format needs (a GGUF file, an HF or MLX folder, an Ollama
tag), the id the server must list, the directory its results go to, and the sampling fields every
request carries. The schema is checked on load, so a typo fails at once, naming file and field,
instead of surfacing as a server that cannot find its model twenty minutes into a run.

Schema (`builtin` profiles name no repos: the model is built locally):

    name: str                      # the profile's handle
    results_name: str              # directory name under results/
    builtin: tiny                  # optional
    sampling: {field: value, ...}  # optional; merged into every request
    api_key_env: NAME              # optional: the environment variable holding the servers' API key
    formats:                       # at least one of gguf, hf, mlx, ollama
      gguf:   {repo: owner/name, file: x.gguf, served_id: str, alias: str}
      hf|mlx: {repo: owner/name, served_id: str, alias: str}
      ollama: {tag: str, served_id: str}         # served_id defaults to the tag
    openai:                        # optional: a server for the generic `openai` adapter
      command: [argv...]           # may name {host}, {port}, {model_path}, {api_key}; absent: only --endpoint
      env: {NAME: value}           # added to the server's environment; may name the same
      ready_path: /v1/models       # GET answering 200 means ready
      port: 8012                   # the server's port unless --port says otherwise
      format: gguf                 # the format whose file is {model_path} and whose id is served
      served_id: str               # the id the server lists; default: that format's served_id

`alias` is the name the serve command gives the model where the framework lets us choose; it
defaults to `served_id`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import yaml

from bench.base.defaults import DEFAULT_MODEL
from bench.base.paths import PROJECT_ROOT
from bench.setup.model_ref import ModelFormat

PROFILES_DIR = PROJECT_ROOT / "models"
FORMATS: tuple[str, ...] = get_args(ModelFormat)
TOP_FIELDS = ("name", "results_name", "builtin", "sampling", "formats", "ignore_eos", "openai", "api_key_env")
ENTRY_FIELDS = ("repo", "file", "tag", "served_id", "alias")
# Request fields the engine owns; a profile's `sampling` overriding them would corrupt a run.
ENGINE_FIELDS = ("model", "messages", "stream", "stream_options", "max_tokens", "tools")
# Where a downloaded model comes from, per format; builtin models take none of these.
SOURCE_FIELDS: dict[str, tuple[str, ...]] = {
    "gguf": ("repo", "file"),
    "hf": ("repo",),
    "mlx": ("repo",),
    "ollama": ("tag",),
}
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
OPENAI_FIELDS = ("command", "env", "ready_path", "port", "format", "served_id")
COMMAND_PLACEHOLDERS = ("host", "port", "model_path", "api_key")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProfileError(ValueError):
    """A profile file is missing or does not match the schema; the message names file and field."""


class ProfileUnavailable(LookupError):
    """The profile is valid but its model cannot be had here (no such format, no download)."""


def _tiny_path(fmt: str) -> Path:
    # Imported on use: it pulls in tokenizers and gguf.
    from bench.setup.tinymodel import ensure_tiny_model

    model = ensure_tiny_model()
    return model.gguf_path if fmt == "gguf" else model.hf_dir  # mlx-lm loads the HF folder


# Builtin model -> (the formats it exists in, how to get the local path of one).
BUILTINS: dict[str, tuple[tuple[str, ...], Callable[[str], Path]]] = {"tiny": (("gguf", "hf", "mlx"), _tiny_path)}


@dataclass(frozen=True)
class FormatEntry:
    served_id: str
    repo: str | None = None
    file: str | None = None
    tag: str | None = None
    alias: str | None = None


@dataclass(frozen=True)
class OpenAIServer:
    """How to start (or only how to address) a server for the generic `openai` adapter."""

    command: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    ready_path: str = "/v1/models"
    port: int = 8012
    format: str | None = None
    served_id: str | None = None

    @property
    def takes_api_key(self) -> bool:
        """Whether the command (or its environment) gives the server the key: `{api_key}`."""
        return any("{api_key}" in arg for arg in [*(self.command or ()), *self.env.values()])


@dataclass(frozen=True)
class ModelProfile:
    name: str
    results_name: str
    sampling: dict[str, Any]
    formats: dict[str, FormatEntry]
    source: Path
    builtin: str | None = None
    ignore_eos: bool = False  # ask for max_tokens every time, where the server accepts ignore_eos
    openai: OpenAIServer | None = None
    api_key_env: str | None = None  # the environment variable holding the API key (its name, never the key)


@dataclass(frozen=True)
class ApiKey:
    """The key sent as `Authorization: Bearer ...`, and where it came from; its repr never shows it."""

    value: str = field(repr=False)
    source: str  # "--api-key", "OPENAI_API_KEY", or "$NAME (the profile's api_key_env)"

    def redact(self, text: str) -> str:
        """`text` with every occurrence of the key written `***`."""
        return text.replace(self.value, "***")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.value}"}


def api_key(given: str | None, environ: Mapping[str, str], profile: ModelProfile) -> ApiKey | None:
    """The API key as OpenAI's clients take it: `--api-key` (`given`), else OPENAI_API_KEY, else the
    variable the profile's `api_key_env` names; None when none is set. ValueError when `given` is
    empty or the profile's variable is not set (the profile says its servers want a key)."""
    if given is not None:
        if not given.strip():
            raise ValueError("--api-key takes a key, got an empty one")
        return ApiKey(given, "--api-key")
    if environ.get("OPENAI_API_KEY", "").strip():
        return ApiKey(environ["OPENAI_API_KEY"], "OPENAI_API_KEY")
    name = profile.api_key_env
    if name is None:
        return None
    if not environ.get(name, "").strip():
        raise ValueError(f"model profile {profile.source}: its api_key_env names ${name}, which is not set; "
                         f"set it, or pass --api-key KEY or set OPENAI_API_KEY")
    return ApiKey(environ[name], f"${name} (the profile's api_key_env)")


class _Schema:
    """Checks one parsed file; every failure names the file and the dotted field."""

    def __init__(self, source: Path) -> None:
        self.source = source

    def fail(self, field: str, problem: str) -> ProfileError:
        return ProfileError(f"model profile {self.source}: field '{field}': {problem}")

    def text(self, data: dict, key: str, field: str) -> str | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(field, f"must be a non-empty string, got {value!r}")
        return value

    def required_text(self, data: dict, key: str) -> str:
        value = self.text(data, key, key)
        if value is None:
            raise self.fail(key, "is required")
        return value

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(field, f"keys must be strings, got {key!r}")
        return value

    def known_keys(self, data: dict, allowed: tuple[str, ...], field: str) -> None:
        for key in data:
            if key not in allowed:
                where = f"{field}.{key}" if field else key
                raise self.fail(where, f"unknown field; allowed: {', '.join(allowed)}")

    def profile(self, data: Any) -> ModelProfile:
        data = self.mapping(data, "<top level>")
        self.known_keys(data, TOP_FIELDS, "")
        name = self.required_text(data, "name")
        results_name = self.required_text(data, "results_name")
        if "/" in results_name or "\\" in results_name or results_name in (".", ".."):
            raise self.fail("results_name", f"must be a plain directory name, got {results_name!r}")
        builtin = self.text(data, "builtin", "builtin")
        if builtin is not None and builtin not in BUILTINS:
            raise self.fail("builtin", f"unknown builtin model {builtin!r}; known: {', '.join(BUILTINS)}")
        sampling = dict(self.mapping(data.get("sampling", {}), "sampling"))
        for key in sampling:
            if key in ENGINE_FIELDS:
                raise self.fail(f"sampling.{key}", "is set by the benchmark itself, not by a model profile")
        if "formats" not in data:
            raise self.fail("formats", "is required")
        formats = self.mapping(data["formats"], "formats")
        if not formats:
            raise self.fail("formats", f"must name at least one of {', '.join(FORMATS)}")
        entries = {fmt: self.entry(fmt, raw, builtin) for fmt, raw in formats.items()}
        ignore_eos = data.get("ignore_eos", False)
        if not isinstance(ignore_eos, bool):
            raise self.fail("ignore_eos", f"must be true or false, got {ignore_eos!r}")
        openai = self.openai(data["openai"], entries) if "openai" in data else None
        key_env = self.text(data, "api_key_env", "api_key_env")
        if key_env is not None and not _ENV_NAME.match(key_env):
            # not echoed: a key written here by mistake must not reach the terminal
            raise self.fail("api_key_env", "must be the name of an environment variable (such as MY_SERVER_KEY) "
                                           "that holds the key, not the key itself")
        return ModelProfile(name, results_name, sampling, entries, self.source, builtin, ignore_eos, openai,
                            key_env)

    def openai(self, raw: Any, entries: dict[str, FormatEntry]) -> OpenAIServer:
        raw = self.mapping(raw, "openai")
        self.known_keys(raw, OPENAI_FIELDS, "openai")
        command = None
        if "command" in raw:
            if not isinstance(raw["command"], list) or not raw["command"]:
                raise self.fail("openai.command", "must be a non-empty list of strings (an argv)")
            command = tuple(self.template(arg, f"openai.command[{i}]") for i, arg in enumerate(raw["command"]))
        env = self.mapping(raw.get("env", {}), "openai.env")
        env = {key: self.template(value, f"openai.env.{key}") for key, value in env.items()}
        ready_path = self.text(raw, "ready_path", "openai.ready_path") or "/v1/models"
        if not ready_path.startswith("/"):
            raise self.fail("openai.ready_path", f"must be a path starting with /, got {ready_path!r}")
        port = raw.get("port", 8012)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise self.fail("openai.port", f"must be a port number, got {port!r}")
        fmt = self.text(raw, "format", "openai.format")
        if fmt is not None and fmt not in entries:
            raise self.fail("openai.format", f"names no format of this profile; it has {', '.join(entries)}")
        uses_path = any("{model_path}" in arg for arg in [*(command or ()), *env.values()])
        if uses_path and fmt is None and len(entries) > 1:
            raise self.fail("openai.format", "is required when the command names {model_path} and the profile "
                                             f"has several formats ({', '.join(entries)})")
        served_id = self.text(raw, "served_id", "openai.served_id")
        return OpenAIServer(command, env, ready_path, port, fmt, served_id)

    def template(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(field, f"must be a non-empty string, got {value!r}")
        for name in _PLACEHOLDER.findall(value):
            if name not in COMMAND_PLACEHOLDERS:
                raise self.fail(field, f"unknown placeholder {{{name}}}; known: "
                                       + ", ".join(f"{{{p}}}" for p in COMMAND_PLACEHOLDERS))
        return value

    def entry(self, fmt: str, raw: Any, builtin: str | None) -> FormatEntry:
        field = f"formats.{fmt}"
        if fmt not in FORMATS:
            raise self.fail(field, f"unknown format; known: {', '.join(FORMATS)}")
        raw = self.mapping(raw, field)
        self.known_keys(raw, ENTRY_FIELDS, field)
        values = {key: self.text(raw, key, f"{field}.{key}") for key in ENTRY_FIELDS}
        if builtin is not None:
            built_formats = BUILTINS[builtin][0]
            if fmt not in built_formats:
                raise self.fail(field, f"builtin {builtin!r} exists only as {', '.join(built_formats)}")
            needed: tuple[str, ...] = ()
        else:
            needed = SOURCE_FIELDS[fmt]
        for key in ("repo", "file", "tag"):
            if key in needed and values[key] is None:
                raise self.fail(f"{field}.{key}", f"is required for a downloaded {fmt} model")
            if key not in needed and values[key] is not None:
                why = f"a builtin model has no {key}" if builtin else f"the {fmt} format takes no {key}"
                raise self.fail(f"{field}.{key}", why)
        if values["repo"] is not None and not _REPO_ID.match(values["repo"]):
            raise self.fail(f"{field}.repo", f"must look like owner/name, got {values['repo']!r}")
        served_id = values["served_id"] or values["tag"]  # an Ollama server lists the tag itself
        if served_id is None:
            raise self.fail(f"{field}.served_id", "is required")
        return FormatEntry(served_id, values["repo"], values["file"], values["tag"], values["alias"])


def available_profiles() -> list[str]:
    return sorted(path.stem for path in PROFILES_DIR.glob("*.yaml"))


def load_profile(name_or_path: str) -> ModelProfile:
    """A shipped profile by name (`tiny` -> models/tiny.yaml), or any profile file by path."""
    looks_like_path = name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path or "/" in name_or_path
    source = Path(name_or_path) if looks_like_path else PROFILES_DIR / f"{name_or_path}.yaml"
    if not source.is_file():
        known = ", ".join(available_profiles()) or "none"
        raise ProfileError(f"model profile {name_or_path!r}: no file {source} (shipped profiles: {known})")
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ProfileError(f"model profile {source}: not valid YAML: {' '.join(str(exc).split())}") from exc
    return _Schema(source).profile(data)


MODEL_VARIABLE = "APPLEBENCH_MODEL"  # SiliconBench's variable for the profile its scripts run


def chosen_model(given: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The profile a session runs and what chose it: `--model` (`given`), else APPLEBENCH_MODEL,
    else DEFAULT_MODEL ("default"). SiliconBench's profile names are cellbench's (qwen3-0.6b), so a
    shell that sets the variable for SiliconBench runs the same model here. Empty counts as unset,
    as a shell's `${APPLEBENCH_MODEL:-...}` takes it."""
    if given is not None:
        return given, "--model"
    if environ.get(MODEL_VARIABLE, "").strip():
        return environ[MODEL_VARIABLE].strip(), MODEL_VARIABLE
    return DEFAULT_MODEL, "default"
