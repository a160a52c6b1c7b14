"""`cellbench eval precheck`: is this machine ready for a config's rows? One line per check.

Each check is ✓, or ✗ with the exact command that fixes it: the clients' Python, what the config
says its rows need (models and datasets in the Hugging Face or ModelScope cache, importable
packages, paths under the eval root), locators whose config substring spans two Configs and
pairs of rows of one file that would meet one Config (a result would be filed under the other
Config's label, or replaced by the other row's), the ports, and GPUs other processes hold
(listed by PID, user and memory; never killed). A ✗ stops `pytest -m eval` before any server
starts, unless `--no-precheck`. A config's install commands may say `<venv-python>`: it is
printed as the clients' Python, unless that Python was not given and does not exist.

The checks see the environment the rows get: the shell's, with the config's `auto_env` (and
`omni_ci_home`) over it, so a cache that `auto_env` moves (HF_HOME, XDG_CACHE_HOME,
MODELSCOPE_CACHE) is looked up where the rows will look. A download fix carries the hub settings
`auto_env` gives (`HF_ENDPOINT=https://hf-mirror.com HF_HOME=... huggingface-cli download ...`), so a
user who copies it downloads from the same hub into the same cache. Secrets (tokens) never appear.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.eval.client import path_with
from bench.eval.config.schema import ROUTER_FRAMEWORK, EvalConfig, EvalRow, Requirement
from bench.eval.gpus import busy_gpus
from bench.eval.row import row_claim
from bench.eval.tables import AMBIGUITY_FIX, CLASH_FIX, Clash, Locator, clashes, config_ambiguity, parse_tables
from bench.host.ports import free_port
from bench.setup import profiles

PYTHON_ENV = "EVAL_VENV_PYTHON"
VENV_PYTHON = "<venv-python>"  # the clients' Python in a config's install_cmd, as sglang-omni's configs write it
CHECK_TIMEOUT_S = 30
# What a download fix carries from auto_env, per hub: where it downloads from and into which cache.
HUB_SETTINGS = {"hf": ("HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"),
                "modelscope": ("MODELSCOPE_DOMAIN", "MODELSCOPE_CACHE")}


@dataclass(frozen=True)
class ClientPython:
    path: str
    source: str  # "--venv-python", "$EVAL_VENV_PYTHON", "default_venv_python", "cellbench"
    tried: tuple[str, ...] = ()

    def fill(self, command: str) -> str:
        """`command` with `<venv-python>` as this Python: the one the user gave, or one that exists;
        a guess that does not exist (no default_venv_python entry does) leaves the placeholder."""
        known = self.source in ("--venv-python", f"${PYTHON_ENV}") or Path(self.path).exists()
        return command.replace(VENV_PYTHON, self.path) if known else command


def client_python(explicit: str | None, config: EvalConfig) -> ClientPython:
    """The clients' Python: `--venv-python`, then `$EVAL_VENV_PYTHON`, then the first existing
    entry of the config's `default_venv_python` (the last one when none exists, so precheck names
    it), then the Python cellbench runs on when the config names none."""
    if explicit:
        return ClientPython(explicit, "--venv-python")
    if os.environ.get(PYTHON_ENV):
        return ClientPython(os.environ[PYTHON_ENV], f"${PYTHON_ENV}")
    listed = config.environment.venv_python
    if listed:
        found = next((p for p in listed if Path(p).exists()), listed[-1])
        return ClientPython(found, "default_venv_python", listed)
    return ClientPython(sys.executable, "cellbench")


@dataclass(frozen=True)
class Check:
    ok: bool
    what: str
    fix: str = ""  # the command (or action) that turns a ✗ into a ✓

    def line(self) -> str:
        return f"✓ {self.what}" if self.ok else f"✗ {self.what} — fix: {self.fix}"


def _python_runs(python: ClientPython) -> Check:
    if not Path(python.path).exists():
        tried = f" (tried {', '.join(python.tried)})" if len(python.tried) > 1 else ""
        return Check(False, f"clients' Python {python.path} ({python.source}) does not exist{tried}",
                     f"--venv-python /path/to/venv/bin/python, or export {PYTHON_ENV}=...")
    return Check(True, f"clients' Python {python.path} ({python.source})")


def rows_environment(config: EvalConfig) -> dict[str, str]:
    """The environment the rows' servers and clients get: the shell's, `auto_env` over it."""
    return {**os.environ, **config.auto_env}


def with_hub_settings(command: str, hub: str, auto_env: Mapping[str, str]) -> str:
    """`command` prefixed with the hub settings `auto_env` gives and the command does not set itself."""
    given = [f"{name}={shlex.quote(auto_env[name])}" for name in HUB_SETTINGS[hub]
             if name in auto_env and f"{name}=" not in command]
    return " ".join([*given, command]) if command and given else command


def _imports(python: str, module: str, env: Mapping[str, str]) -> bool:
    try:
        done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=CHECK_TIMEOUT_S,
                              env={**env, "PATH": path_with(python, dict(env))})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def hf_cache(env: Mapping[str, str]) -> Path:
    """The hub cache as huggingface_hub finds it: HF_HUB_CACHE, else $HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    cache = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "huggingface" / "hub"


def _in_hf_cache(repo: str, kind: str, env: Mapping[str, str]) -> bool:
    """A snapshot of `repo` in the Hugging Face hub cache (`models--org--name/snapshots/<rev>`)."""
    folder = hf_cache(env) / f"{kind}s--{repo.replace('/', '--')}" / "snapshots"
    return folder.is_dir() and any(folder.iterdir())


def _in_modelscope_cache(repo: str, env: Mapping[str, str]) -> bool:
    base = Path(env.get("MODELSCOPE_CACHE") or Path.home() / ".cache" / "modelscope" / "hub").expanduser()
    return any((base / sub / repo).exists() for sub in ("", "models"))


def _cellbench_model(model_id: str) -> Check | None:
    """A model id that names or is declared by a cellbench profile is checked through it."""
    for name in profiles.available_profiles():
        profile = profiles.load_profile(name)
        if name == model_id or any(entry.repo == model_id for entry in profile.formats.values()):
            return Check(True, f"model {model_id}: cellbench model profile {name!r} (built or fetched when a row runs)")
    return None


def _requirement(req: Requirement, python: ClientPython, config: EvalConfig) -> Check:
    used = f" — {req.used_for}" if req.used_for else ""
    install, env, root = python.fill(req.install), rows_environment(config), config.root
    if req.kind == "hf-model":
        found = _cellbench_model(req.id)
        if found is not None:
            return found
        return Check(_in_hf_cache(req.id, "model", env), f"model {req.id} in the Hugging Face cache{used}",
                     with_hub_settings(install, "hf", config.auto_env))
    if req.kind == "hf-dataset":
        return Check(_in_hf_cache(req.id, "dataset", env), f"dataset {req.id} in the Hugging Face cache{used}",
                     with_hub_settings(install, "hf", config.auto_env))
    if req.kind == "modelscope-model":
        return Check(_in_modelscope_cache(req.id, env), f"model {req.id} in the ModelScope cache{used}",
                     with_hub_settings(install, "modelscope", config.auto_env))
    if req.kind == "python-package":
        return Check(_imports(python.path, req.id, env),
                     f"package {req.id} importable by the clients' Python{used}", install)
    return Check((root / req.id).exists(), f"path {root / req.id}{used}", install or f"create {root / req.id}")


def _confined(config: EvalConfig, rows: list[EvalRow]) -> list[Check]:
    """Rows whose file is outside the tables root: refused before anything runs."""
    failed = [Check(False, f"row {row.id}: {why}", f"move {row.file.name} under {config.tables}/, or set "
                                                   f"tables_root in {config.source}")
              for row in rows if (why := config.refused(row))]
    return failed or [Check(True, f"tables: every row's file is under {config.tables}/")]


def locator_clashes(config: EvalConfig, selected: list[EvalRow]) -> list[tuple[Path, Clash]]:
    """Pairs of the config's rows of one file that would meet one Config (bench.eval.tables.clash),
    where at least one of the two is selected: every row of the config counts, run or not, since a
    row's substring can pick another row's Config even when that row is left out of this run."""
    chosen = {row.id for row in selected}
    by_file: dict[Path, list[EvalRow]] = {}
    for row in config.rows:
        if not config.refused(row):
            by_file.setdefault(row.file.resolve(), []).append(row)
    found = []
    for path, rows in by_file.items():
        if len(rows) < 2 or not chosen & {row.id for row in rows}:
            continue
        try:
            parsed = parse_tables(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue  # the row's own locator check names the problem
        found += [(path, clash) for clash in clashes(parsed, [row_claim(row) for row in rows])
                  if chosen & set(clash.rows)]
    return found


def _locators(config: EvalConfig, rows: list[EvalRow]) -> list[Check]:
    """Rows whose config substring spans two Configs, and pairs of rows that would meet one Config:
    refused before anything runs, naming the Configs and both rows. A file that cannot be read is
    left to the row's own locator check, which names the problem."""
    failed = []
    for row in rows:
        if config.refused(row):
            continue  # refused already, by _confined
        try:
            parsed = parse_tables(row.file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        found = config_ambiguity(parsed, Locator(**asdict(row.locate)), model=row.model_hint,
                                 aliases=row.other_model_names)
        if found:
            failed.append(Check(False, f"row {row.id} in {row.file.name}: {found}",
                                f"give row {row.id} in {config.source} {AMBIGUITY_FIX}"))
    for path, clash in locator_clashes(config, rows):
        a, b = clash.rows
        failed.append(Check(False, f"{path.name}: {clash.reason}",
                            f"give rows {a} and {b} in {config.source} each {CLASH_FIX}"))
    return failed or [Check(True, "locators: each row's config_substring matches one Config, checked against the"
                                  f" other rows of its file ({len(rows)} row(s))")]


def _ports() -> Check:
    try:
        port = free_port()
    except OSError as exc:
        return Check(False, f"no free port on 127.0.0.1: {exc}", "free a port: stop a server you started")
    return Check(True, f"free ports on 127.0.0.1 (e.g. {port})")


def _gpus(rows: list[EvalRow], pool: tuple[int, ...] | None) -> list[Check]:
    # {asr_gpu} takes a GPU only when one is left, else it is `cpu`: it never makes a row unrunnable.
    needed = max((r.server_profile.server_gpus for r in rows), default=0)
    gpus, busy, error = busy_gpus()
    if error is not None:
        if needed == 0:
            return [Check(True, f"no GPU needed ({error})")]
        return [Check(False, f"rows need up to {needed} GPU(s): {error}", "run on a machine with NVIDIA GPUs")]
    candidates = [g for g in gpus if pool is None or g in pool]
    free = [g for g in candidates if g not in {b.gpu for b in busy}]
    checks = [Check(True, f"GPUs: {len(gpus)}, free in the pool: {free}")]
    for proc in busy:
        if proc.gpu in candidates:
            checks.append(Check(False, f"GPU {proc.gpu} is used by pid {proc.pid} ({proc.user}, {proc.memory_mb} MiB, "
                                       f"{proc.name})", f"wait for it, or ask {proc.user} to stop pid {proc.pid} "
                                                        "(cellbench never kills it)"))
    if len(free) < needed:
        checks.append(Check(False, f"rows need up to {needed} free GPU(s); {len(free)} free",
                            "free GPUs, or pass --gpu-pool with idle ones"))
    return checks


def run_checks(config: EvalConfig, rows: list[EvalRow], python: ClientPython,
               pool: tuple[int, ...] | None) -> list[Check]:
    checks = [_python_runs(python)]
    runs = checks[0].ok
    unselected = {r.hf_model_id for r in config.rows} - {r.hf_model_id for r in rows}
    for req in config.environment.requirements:
        if req.kind == "hf-model" and req.id in unselected:
            continue  # only the selected rows' models must be here
        if req.kind == "python-package" and not runs:
            checks.append(Check(False, f"package {req.id}: not checked, the clients' Python is missing", checks[0].fix))
        else:
            checks.append(_requirement(req, python, config))
    if runs and any(r.server_profile.framework == ROUTER_FRAMEWORK for r in rows):
        # The rows' router runs on the clients' Python: it must import there (and torch with it).
        fix = f"install sglang-omni into that environment: {python.path} -m pip install -e <sglang-omni checkout>"
        for module in ("sglang_omni_router", "torch"):
            what = f"{module} importable by {python.path} (sglang-omni's router rows)"
            checks.append(Check(_imports(python.path, module, rows_environment(config)), what, fix))
    checks += [*_confined(config, rows), *_locators(config, rows), _ports(), *_gpus(rows, pool)]
    return checks
