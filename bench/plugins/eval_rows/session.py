"""What one pytest process keeps for the eval rows, on the stash, and what a row reads from it.

The loaded eval config (or why it did not load), this process's finished rounds that rows may
share, the precheck's ✗ lines and the run's (hardware tag, Source prefix); from them the run's
folder, the client's Python, whether a row may edit its table or run beside another, and the
`RowContext` a row runs with. The eval plugin (bench/plugins/eval.py) fills the stash.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.eval.config.schema import EvalConfig, EvalConfigError, EvalRow
from bench.eval.precheck import ClientPython, client_python, locator_clashes
from bench.eval.row import RowContext
from bench.eval.runlog import RUN_LOG, RunLog
from bench.eval.source import hardware_tag, source_prefix
from bench.host.machine import detect
from bench.load.watch.progress import terminal_writer
from bench.plugins.options import results_root, settings

EVAL_CONFIG = pytest.StashKey[EvalConfig | EvalConfigError | None]()
SHARED_ROUNDS = pytest.StashKey[dict]()  # this process's finished rounds, for rows that can share them
PRECHECK = pytest.StashKey[list[str]]()  # the precheck's ✗ lines (empty: passed)
SOURCE = pytest.StashKey[tuple[str, str]]()  # (hardware tag, Source prefix) of this run


def eval_client_python(config: pytest.Config) -> ClientPython:
    loaded = config.stash[EVAL_CONFIG]
    assert isinstance(loaded, EvalConfig)
    return client_python(settings(config).eval.venv_python, loaded)


def refusal(config: pytest.Config, row: EvalRow) -> str | None:
    """Why `row` may not edit its table (its file is outside the config's tables root), or None."""
    loaded = config.stash[EVAL_CONFIG]
    return loaded.refused(row) if isinstance(loaded, EvalConfig) else "refused: no eval config"


def clash_of(config: pytest.Config, row: EvalRow) -> str | None:
    """Why `row` may not run beside another row of its file (the two would meet one Config), or None."""
    loaded = config.stash[EVAL_CONFIG]
    if not isinstance(loaded, EvalConfig):
        return None
    return next((clash.reason for _, clash in locator_clashes(loaded, [row])), None)


def source_of(config: pytest.Config) -> tuple[str, str]:
    """(hardware tag, Source prefix), taken once per process before the first row runs: the Source
    cells name the code as it was when measuring began."""
    if SOURCE not in config.stash:
        loaded = config.stash[EVAL_CONFIG]
        root = loaded.root if isinstance(loaded, EvalConfig) else PROJECT_ROOT
        config.stash[SOURCE] = (hardware_tag(detect(), settings(config).eval.hardware), source_prefix(root))
    return config.stash[SOURCE]


def row_context(config: pytest.Config, gpus: tuple[int, ...]) -> RowContext:
    loaded = config.stash[EVAL_CONFIG]
    assert isinstance(loaded, EvalConfig), "rows run, so the config loaded"
    s = settings(config)
    return RowContext(
        run_dir=eval_run_dir(config),
        repo_root=loaded.root,
        auto_env=loaded.auto_env,
        python=eval_client_python(config).path,
        hardware=source_of(config)[0],
        rounds=s.rounds,
        smoke=s.eval.smoke,
        table_from=s.eval.table_from,
        port=0 if s.port is None else s.port,
        install=s.install,
        pinned=s.pinned,
        gpus=gpus,
        shared_rounds=config.stash[SHARED_ROUNDS],
        log=RunLog(eval_run_dir(config) / RUN_LOG, say=terminal_writer(config)),
    )


def eval_run_dir(config: pytest.Config) -> Path:
    """<results root>/eval/<config name>/<run id>: the session's run-state.json and row logs."""
    loaded = config.stash[EVAL_CONFIG]
    name = loaded.name if isinstance(loaded, EvalConfig) else "unknown"
    return results_root(config) / "eval" / name / settings(config).run_id


def rounds_averaged(config: pytest.Config) -> int:
    s = settings(config)
    return s.rounds if s.eval.table_from == "mean" else 1
