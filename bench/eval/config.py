"""An eval config, `models/<model>/eval.yaml`: the rows that refresh reference tables.

A server profile names a cellbench adapter, so eval servers start through the same lifecycle
as benchmark cells; a row's client is an argument list filled per token, never a shell string.
Everything is checked on load, and a failure names the file, the row and the field.

    name: str
    description: str                       # optional
    hf_model_id: str                       # default model of every row: a cellbench model
                                           # profile name, or a repo id a profile declares
    auto_env: {NAME: value}                # set for every server and client (overrides the shell)
    default_server_profile: str            # optional
    server_profile_by_hf_model_id: {id: profile}   # optional
    server_profiles:
      <name>:
        framework: llamacpp                # a cellbench adapter
        split: chat                        # whose serve flags (context size) apply [chat]
        max_concurrency: 4                 # slots the server is sized for [1]
        server_gpus: 0                     # GPUs leased from --gpu-pool [0]
        boot_timeout_s: 300                # optional; default the adapter's
        env: {NAME: value}                 # optional, added to the server's environment
    rows:
      - id: arith-llamacpp-c4              # unique; `-k <id>` selects it
        file: benchmarks/eval/benchmark_arith.py      # relative to the project root
        hf_model_id: str                   # optional, overrides the config's
        server_profile: str                # optional: by_hf_model_id, then default_server_profile
        locate: {section_substring, config_substring, source_workload}
        new_row: {Column: text}            # optional: Model/Config text for a first append
        client: "{python} benchmarks/eval/benchmark_arith.py --port {port} ..."
        max_samples: 50                    # optional; what {max_samples} is; --smoke lowers it
        timeout_s: 1800                    # the client's wall-clock limit [1800]
        result_json: arith_results.json    # written by the client into {output_dir}
        cells:
          <column>: {path: dotted.path, format: "{v:.2%}"}
          <column>: {paths: {v: a.b, t: c.d}, format: "{v}/{t}"}
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CLIENT_PLACEHOLDERS = ("python", "host", "port", "output_dir", "max_samples", "model", "hf_model_id",
                       "repo_root", "row_id", "round")
TOP_FIELDS = ("name", "description", "hf_model_id", "auto_env", "default_server_profile",
              "server_profile_by_hf_model_id", "server_profiles", "rows")
PROFILE_FIELDS = ("framework", "split", "max_concurrency", "server_gpus", "boot_timeout_s", "env")
ROW_FIELDS = ("id", "file", "hf_model_id", "server_profile", "locate", "new_row", "client", "max_samples",
              "timeout_s", "result_json", "cells")
LOCATE_FIELDS = ("section_substring", "config_substring", "source_workload")
_ROW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=+-]*$")  # safe as a directory name and a pytest id


class EvalConfigError(ValueError):
    """An eval config does not match the schema; the message names file, row and field."""


@dataclass(frozen=True)
class ServerProfile:
    name: str
    framework: str
    split: str = "chat"
    max_concurrency: int = 1
    server_gpus: int = 0
    boot_timeout_s: float | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Locate:
    section_substring: str
    config_substring: str
    source_workload: str


@dataclass(frozen=True)
class CellSpec:
    """One table column's new text: `format` filled with the values at `paths` (alias -> dotted path)."""

    paths: dict[str, str]
    format: str

    def values(self, result: dict) -> dict[str, Any]:
        return {alias: json_path(result, path) for alias, path in self.paths.items()}

    def render(self, values: dict[str, Any]) -> str:
        try:
            return self.format.format(**values)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"format {self.format!r} with {values!r}: {exc}") from None


@dataclass(frozen=True)
class EvalRow:
    id: str
    file: Path  # absolute
    hf_model_id: str
    server_profile: ServerProfile
    locate: Locate
    client: tuple[str, ...]  # argv template, one placeholder-bearing token per argument
    result_json: str
    cells: dict[str, CellSpec]
    new_row: dict[str, str] | None = None
    max_samples: int | None = None
    timeout_s: float = 1800.0

    def client_argv(self, values: dict[str, Any], smoke: int | None = None) -> list[str]:
        """The client's argument list. Filled per token, so a value with spaces stays one argument
        and nothing is ever interpreted by a shell. Under `--smoke N` a template without
        `{max_samples}` gets `--max-samples N` appended."""
        argv = [token.format(**values) for token in self.client]
        if smoke is not None and not any("{max_samples}" in token for token in self.client):
            argv += ["--max-samples", str(smoke)]
        return argv


@dataclass(frozen=True)
class EvalConfig:
    name: str
    source: Path
    hf_model_id: str
    auto_env: dict[str, str]
    rows: tuple[EvalRow, ...]
    description: str = ""


def json_path(data: Any, path: str) -> Any:
    """`summary.accuracy` or `per_task.0.score`: dotted keys, integers index lists."""
    node = data
    for part in path.split("."):
        if isinstance(node, list) and part.lstrip("-").isdigit():
            try:
                node = node[int(part)]
            except IndexError:
                raise KeyError(f"JSON path {path!r}: index {part} out of range") from None
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"JSON path {path!r}: no {part!r}")
    return node


class _Checker:
    def __init__(self, source: Path):
        self.source = source

    def fail(self, where: str, problem: str) -> EvalConfigError:
        return EvalConfigError(f"eval config {self.source}: {where}: {problem}")

    def mapping(self, value: Any, where: str, allowed: tuple[str, ...] | None = None) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(where, f"keys must be strings, got {key!r}")
            if allowed is not None and key not in allowed:
                raise self.fail(f"{where}.{key}", f"unknown field; allowed: {', '.join(allowed)}")
        return value

    def text(self, data: dict, key: str, where: str) -> str:
        """A required non-empty string."""
        if key not in data:
            raise self.fail(f"{where}.{key}" if where else key, "is required")
        return self.optional_text(data, key, where) or ""

    def optional_text(self, data: dict, key: str, where: str) -> str | None:
        """A non-empty string, or None when the key is absent."""
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{where}.{key}" if where else key, f"must be a non-empty string, got {value!r}")
        return value

    def number(self, data: dict, key: str, where: str, default, *, integer: bool, minimum: float):
        value = data.get(key, default)
        ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
        if value is not None and (isinstance(value, bool) or not ok_type or value < minimum):
            kind = "an integer" if integer else "a number"
            raise self.fail(f"{where}.{key}", f"must be {kind} >= {minimum}, got {value!r}")
        return value

    def env(self, value: Any, where: str) -> dict[str, str]:
        env = self.mapping(value, where)
        bad = [k for k, v in env.items() if not isinstance(v, (str, int, float)) or isinstance(v, bool)]
        if bad:
            raise self.fail(f"{where}.{bad[0]}", "must be a string or number")
        return {k: str(v) for k, v in env.items()}

    def server_profile(self, name: str, raw: Any, frameworks: set[str]) -> ServerProfile:
        where = f"server_profiles.{name}"
        raw = self.mapping(raw, where, PROFILE_FIELDS)
        framework = self.text(raw, "framework", where)
        if framework not in frameworks:
            known = ", ".join(sorted(frameworks))
            raise self.fail(f"{where}.framework", f"unknown framework {framework!r}; known: {known}")
        split = self.optional_text(raw, "split", where) or "chat"
        if split not in ("chat", "agent"):
            raise self.fail(f"{where}.split", f"must be chat or agent, got {split!r}")
        return ServerProfile(
            name=name,
            framework=framework,
            split=split,
            max_concurrency=self.number(raw, "max_concurrency", where, 1, integer=True, minimum=1),
            server_gpus=self.number(raw, "server_gpus", where, 0, integer=True, minimum=0),
            boot_timeout_s=self.number(raw, "boot_timeout_s", where, None, integer=False, minimum=1),
            env=self.env(raw.get("env", {}), f"{where}.env"),
        )

    def client(self, raw: Any, where: str) -> tuple[str, ...]:
        if isinstance(raw, list):
            tokens = raw
        elif isinstance(raw, str):
            try:
                tokens = shlex.split(raw)  # split once, here; the filled tokens never meet a shell
            except ValueError as exc:
                raise self.fail(where, f"cannot split into arguments: {exc}") from None
        else:
            raise self.fail(where, "must be a command string or a list of arguments")
        if not tokens or not all(isinstance(t, str) and t for t in tokens):
            raise self.fail(where, "must hold at least one non-empty argument")
        for token in tokens:
            try:
                names = [name for _, name, _, _ in string.Formatter().parse(token) if name is not None]
            except ValueError as exc:
                raise self.fail(where, f"argument {token!r}: {exc}") from None
            for name in names:
                if name not in CLIENT_PLACEHOLDERS:
                    known = ", ".join(f"{{{p}}}" for p in CLIENT_PLACEHOLDERS)
                    raise self.fail(where, f"unknown placeholder {{{name}}} in {token!r}; known: {known}")
        return tuple(tokens)

    def cells(self, raw: Any, where: str) -> dict[str, CellSpec]:
        raw = self.mapping(raw, where)
        if not raw:
            raise self.fail(where, "must name at least one column")
        cells = {}
        for column, spec in raw.items():
            at = f"{where}.{column}"
            spec = self.mapping(spec, at, ("path", "paths", "format"))
            if ("path" in spec) == ("paths" in spec):
                raise self.fail(at, "needs exactly one of path or paths")
            if "path" in spec:
                paths = {"v": self.text(spec, "path", at)}
            else:
                paths = self.mapping(spec["paths"], f"{at}.paths")
                if not paths or not all(isinstance(p, str) and p for p in paths.values()):
                    raise self.fail(f"{at}.paths", "must map aliases to non-empty dotted paths")
            fmt = self.optional_text(spec, "format", at) or "{v}"
            used = {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(fmt) if name}
            unknown = used - set(paths)
            if unknown:
                raise self.fail(f"{at}.format", f"names {', '.join(sorted(unknown))}, which paths do not define")
            cells[column] = CellSpec(dict(paths), fmt)
        return cells

    def row(self, index: int, raw: Any, ctx: dict) -> EvalRow:
        where = f"rows[{index}]"
        raw = self.mapping(raw, where, ROW_FIELDS)
        row_id = self.text(raw, "id", where)
        if not _ROW_ID.match(row_id):
            raise self.fail(f"{where}.id", f"{row_id!r}: use letters, digits and . _ - = + only")
        where = f"row {row_id!r}"
        file = ctx["root"] / self.text(raw, "file", where)
        if not file.is_file():
            raise self.fail(f"{where}.file", f"no such file {file}")
        hf_model_id = self.optional_text(raw, "hf_model_id", where) or ctx["hf_model_id"]
        profile_name = (self.optional_text(raw, "server_profile", where)
                        or ctx["by_model"].get(hf_model_id) or ctx["default_profile"])
        if profile_name is None:
            raise self.fail(f"{where}.server_profile", "is required (no default_server_profile)")
        if profile_name not in ctx["profiles"]:
            raise self.fail(f"{where}.server_profile", f"unknown profile {profile_name!r}; "
                                                      f"known: {', '.join(ctx['profiles']) or 'none'}")
        locate = self.mapping(raw.get("locate"), f"{where}.locate", LOCATE_FIELDS) if "locate" in raw else None
        if locate is None:
            raise self.fail(f"{where}.locate", "is required")
        locator = Locate(*(self.text(locate, key, f"{where}.locate") for key in LOCATE_FIELDS))
        new_row = None
        if "new_row" in raw:
            new_row = self.env(raw["new_row"], f"{where}.new_row")
        client = self.client(raw.get("client"), f"{where}.client")
        max_samples = self.number(raw, "max_samples", where, None, integer=True, minimum=1)
        if max_samples is None and any("{max_samples}" in t for t in client):
            raise self.fail(f"{where}.max_samples", "is required when the client names {max_samples}")
        result_json = self.text(raw, "result_json", where)
        if Path(result_json).is_absolute() or ".." in Path(result_json).parts:
            raise self.fail(f"{where}.result_json", "must be a file name inside {output_dir}")
        return EvalRow(
            id=row_id,
            file=file,
            hf_model_id=hf_model_id,
            server_profile=ctx["profiles"][profile_name],
            locate=locator,
            client=client,
            result_json=result_json,
            cells=self.cells(raw.get("cells"), f"{where}.cells"),
            new_row=new_row,
            max_samples=max_samples,
            timeout_s=self.number(raw, "timeout_s", where, 1800.0, integer=False, minimum=1),
        )

    def config(self, data: Any, root: Path, frameworks: set[str]) -> EvalConfig:
        data = self.mapping(data, "<top level>", TOP_FIELDS)
        name = self.text(data, "name", "")
        hf_model_id = self.text(data, "hf_model_id", "")
        raw_profiles = self.mapping(data.get("server_profiles", {}), "server_profiles")
        profiles = {n: self.server_profile(n, p, frameworks) for n, p in raw_profiles.items()}
        by_model = self.mapping(data.get("server_profile_by_hf_model_id", {}), "server_profile_by_hf_model_id")
        for model_id, profile_name in by_model.items():
            if profile_name not in profiles:
                raise self.fail(f"server_profile_by_hf_model_id.{model_id}", f"unknown profile {profile_name!r}")
        default_profile = self.optional_text(data, "default_server_profile", "")
        if default_profile is not None and default_profile not in profiles:
            raise self.fail("default_server_profile", f"unknown profile {default_profile!r}")
        rows_raw = data.get("rows")
        if not isinstance(rows_raw, list) or not rows_raw:
            raise self.fail("rows", "must be a non-empty list")
        ctx = {"root": root, "hf_model_id": hf_model_id, "profiles": profiles, "by_model": by_model,
               "default_profile": default_profile}
        rows = tuple(self.row(i, raw, ctx) for i, raw in enumerate(rows_raw))
        seen: set[str] = set()
        for row in rows:
            if row.id in seen:
                raise self.fail(f"row {row.id!r}.id", "appears twice; ids select rows and must be unique")
            seen.add(row.id)
        return EvalConfig(name, self.source, hf_model_id, self.env(data.get("auto_env", {}), "auto_env"), rows,
                          self.optional_text(data, "description", "") or "")


def load_eval_config(source: Path, root: Path, frameworks: set[str]) -> EvalConfig:
    """Parse and check `source`; row files are resolved against `root` (the project root)."""
    if not source.is_file():
        raise EvalConfigError(f"eval config {source}: no such file")
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise EvalConfigError(f"eval config {source}: not valid YAML: {' '.join(str(exc).split())}") from None
    return _Checker(source).config(data, root, frameworks)
