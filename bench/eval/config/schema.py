"""An eval config, `models/<model>/eval.yaml`: the rows that refresh reference tables.

A server profile names a cellbench adapter, so eval servers start through the same lifecycle
as benchmark cells; a row's client is an argument list filled per token, never a shell string.
Everything is checked on load (bench.eval.config.loader), and a failure names the file, the row and
the field.

sglang-omni's own eval runner reads the same shape from `models/<model>/config.yaml`, and such a
file loads as it is: a profile without `framework` starts sglang-omni's router (the
`sglang_omni` adapter) with its knobs (`model_name`, `num_workers`, ...); a row without a profile
runs its `server` shell template through the generic `openai` adapter; the environment lists
(`hf_datasets`, `auxiliary_models`, `python_packages`, `path_links`, `default_venv_python`) are
what `cellbench eval precheck` checks; `{asr_gpu}` in a client is a GPU the server does not use,
or `cpu`. Relative `file` paths resolve against the eval root (`--eval-root`, default the git
top level of the folder holding the config), which is also `{repo_root}` and the clients' cwd.

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
        command: [argv...]                 # framework openai only: the server's command
        # sglang-omni router knobs (framework omitted = sglang_omni): model_name, model_path,
        # num_workers, num_gpus_per_worker, worker_extra_args, worker_host, wait_timeout,
        # router_policy; server_boot_timeout_s = boot_timeout_s
    model_aliases: {Qwen/Qwen3-Omni-30B-A3B-Instruct: [Qwen3-Omni]}   # optional: other whole names a
                                           # model's table rows go by (a Model cell is matched whole,
                                           # normalised, against the row's served name, its model id
                                           # and these; never as a part of a longer name)
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
        # sglang-omni runner fields: server (a shell template with {port} {model} {gpus}
        # {repo_root}, for rows without a profile), server_gpus, server_extra_by_hardware
        # {H200: "--flag"}, server_health (URL with {port}), server_boot_timeout_s
    # top level, for `cellbench eval precheck`: hf_datasets [id], auxiliary_models [{kind: hf|
    # modelscope, id, install_cmd, used_for}], python_packages [name | {name, install_cmd,
    # used_for}], path_links [{target, install_cmd, used_for}], default_venv_python [path],
    # omni_ci_home (sets OMNI_CI_HOME, XDG_CACHE_HOME, TORCHINDUCTOR_CACHE_DIR under it)
    tables_root: benchmarks/eval             # the only folder whose tables rows may edit (relative to
                                           # the eval root, or absolute) [benchmarks/eval]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.base.dotted import json_path

CLIENT_PLACEHOLDERS = ("python", "host", "port", "output_dir", "max_samples", "model", "hf_model_id",
                       "repo_root", "row_id", "round", "asr_gpu")
TOP_FIELDS = ("name", "description", "hf_model_id", "auto_env", "default_server_profile",
              "server_profile_by_hf_model_id", "server_profiles", "rows",
              "hf_datasets", "auxiliary_models", "python_packages", "path_links", "default_venv_python",
              "omni_ci_home", "tables_root", "model_aliases")
ROUTER_FIELDS = ("model_name", "model_path", "num_workers", "num_gpus_per_worker", "worker_extra_args",
                 "worker_host", "wait_timeout", "router_policy")
PROFILE_FIELDS = ("framework", "split", "max_concurrency", "server_gpus", "boot_timeout_s", "server_boot_timeout_s",
                  "env", "command", *ROUTER_FIELDS)
ROW_FIELDS = ("id", "file", "hf_model_id", "server_profile", "locate", "new_row", "client", "max_samples",
              "timeout_s", "result_json", "cells",
              "server", "server_gpus", "server_extra_by_hardware", "server_health", "server_boot_timeout_s")
ROUTER_FRAMEWORK = "sglang_omni"  # what a profile without `framework` starts
SHELL_FRAMEWORK = "openai"  # what a row's own `server` template runs through
LOCATE_FIELDS = ("section_substring", "config_substring", "source_workload")
DEFAULT_TABLES_ROOT = Path("benchmarks") / "eval"  # the seed's "never edits anything outside benchmarks/eval/"


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
    options: dict[str, Any] = field(default_factory=dict)  # adapter knobs: router fields, openai `command`

    @property
    def in_users_environment(self) -> bool:
        """sglang-omni's router and a row's own `server` template run in the user's environment, whose
        `python` must come first on PATH; cellbench's framework installs bring their own."""
        return self.framework == ROUTER_FRAMEWORK or "shell" in self.options


@dataclass(frozen=True)
class Requirement:
    """Something a row needs that no server provides: a model or dataset in a cache, a package,
    a path; `install` is the command that provides it."""

    kind: str  # "hf-model" | "hf-dataset" | "modelscope-model" | "python-package" | "path"
    id: str
    install: str = ""
    used_for: str = ""


@dataclass(frozen=True)
class Environment:
    """What `cellbench eval precheck` checks beside the rows: clients' Python and requirements."""

    venv_python: tuple[str, ...] = ()  # default_venv_python, first existing wins
    requirements: tuple[Requirement, ...] = ()


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
    server_extra_by_hardware: dict[str, str] = field(default_factory=dict)  # hardware tag -> extra args
    server_health: str | None = None  # a URL template with {port}: its path is the ready path
    model_aliases: tuple[str, ...] = ()  # model_aliases the config declares for this row's model

    @property
    def wants_asr_gpu(self) -> bool:
        return any("{asr_gpu}" in token for token in self.client)

    @property
    def model_hint(self) -> str:
        """The model whose table rows this row's result may take: the router's served name, else the model id."""
        return self.server_profile.options.get("model_name") or self.hf_model_id

    @property
    def other_model_names(self) -> tuple[str, ...]:
        """The other whole names its table rows may carry: the model id, then the declared aliases."""
        return tuple(n for n in dict.fromkeys([self.hf_model_id, *self.model_aliases]) if n != self.model_hint)

    @property
    def benchmark(self) -> str:
        """The row's benchmark, for `--benchmarks`: its file's stem without `benchmark_`."""
        return self.file.stem.removeprefix("benchmark_")

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
    root: Path = Path(".")  # the eval root: row files, {repo_root}, the clients' cwd
    environment: Environment = Environment()
    tables_root: Path | None = None  # the only folder rows may edit; None: root / DEFAULT_TABLES_ROOT

    @property
    def tables(self) -> Path:
        return self.tables_root if self.tables_root is not None else self.root / DEFAULT_TABLES_ROOT

    def refused(self, row: EvalRow) -> str | None:
        """Why `row` may not edit its file, or None: as sglang-omni's runner, cellbench edits tables
        under `benchmarks/eval/` of the eval root only (the config's `tables_root` says another
        folder). Resolved, so a symlink out of that folder is refused too."""
        if row.file.resolve().is_relative_to(self.tables.resolve()):
            return None
        return (f"refused: {row.file} is outside the tables root {self.tables}/ (tables_root in {self.source}); "
                "no table outside it is edited")


def config_path(model: str, profiles_dir: Path) -> Path:
    """`--model tiny` -> models/tiny/eval.yaml (or sglang-omni's name for it, config.yaml);
    `--model models/x.yaml` -> models/x/eval.yaml."""
    if model.endswith((".yaml", ".yml")) or "/" in model:
        path = Path(model)
        folder = path.parent / path.stem
    else:
        folder = profiles_dir / model
    for name in ("eval.yaml", "config.yaml"):
        if (folder / name).is_file():
            return folder / name
    return folder / "eval.yaml"
