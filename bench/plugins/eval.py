"""The eval plugin: every row of `models/<model>/eval.yaml` is a test, `test_eval_row[<row id>]`.

`pytest -m eval` runs the rows (`-k <row id>` one of them); each starts its server through the
same launcher as the benchmark cells, runs its client and computes its table cells. Before any
server starts, the eval precheck (bench.eval.precheck) must pass, and each row's locator must
find its place in its table with this machine's hardware tag. A row's table edit lands as soon
as the row finishes, on the controller (under xdist too): under a lock per file, atomically, and
only after the new file still parses and only the intended lines changed, so a run killed at
row 9 keeps rows 1-8. The run's `run-state.json` records every row, round and edit outcome.

The options (`--eval-config`, `--smoke`, ... and the shared `--model`, `--rounds`,
`--results-dir`, `--port`, `--install`, `--host-lock-timeout`) are declared in
bench/plugins/opts and read as `settings(config).eval.<field>` and `settings(config).<field>`.
This module holds the hooks: the config loaded, one test per row, the selection, the run's
folder announced and the precheck. What a process keeps for the rows is in
bench/plugins/eval_rows/session.py. Each row's run reaches the controller's `EvalRecorder`
(bench/plugins/eval_rows/recorder.py) as a CellRecord of kind `eval`, through
`pytest_cellbench_cell_finished` (bench/plugins/transport.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import adapters
from bench.eval.config.benchmarks import select_rows
from bench.eval.config.loader import load_eval_config
from bench.eval.config.schema import EvalConfig, EvalConfigError, EvalRow, config_path
from bench.eval.precheck import run_checks
from bench.eval.runlog import RUN_LOG, RunLog
from bench.eval.state import refreshed_rows
from bench.plugins.eval_rows.recorder import EvalRecorder
from bench.plugins.eval_rows.session import EVAL_CONFIG, PRECHECK, SHARED_ROUNDS, eval_client_python, eval_run_dir
from bench.plugins.hooks import register_stashed, unregister_stashed
from bench.plugins.options import settings
from bench.setup.profiles import PROFILES_DIR

RECORDER = pytest.StashKey[EvalRecorder]()
ANNOUNCED = pytest.StashKey[bool]()  # the run's folder and run.log were printed


def _config_path(config: pytest.Config) -> Path:
    explicit = settings(config).eval.eval_config
    return explicit if explicit is not None else config_path(settings(config).model, PROFILES_DIR)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SHARED_ROUNDS] = {}
    path = _config_path(config)
    try:
        frameworks = set(adapters.registry())
        loaded = None
        if path.is_file():
            loaded = load_eval_config(path, settings(config).eval.eval_root, frameworks)
        config.stash[EVAL_CONFIG] = loaded
    except EvalConfigError as exc:
        if settings(config).eval.eval_config is not None:
            raise pytest.UsageError(str(exc)) from None
        config.stash[EVAL_CONFIG] = exc  # a broken shipped config fails the eval rows, not `-m chat`
    if not hasattr(config, "workerinput"):
        register_stashed(config, RECORDER, EvalRecorder(config), "cellbench-eval-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The refresh's commit lines come last, after pytest's own summary, as the seed's run ends:
    `Review:   git show HEAD`, `Revert: ...`, `Run dir: ...`."""
    recorder = config.stash.get(RECORDER, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if recorder is not None and recorder.commit_lines and reporter is not None:
        for line in recorder.commit_lines:
            reporter.write_line(line)
    unregister_stashed(config, RECORDER)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "eval_row" not in metafunc.fixturenames:
        return
    loaded = metafunc.config.stash[EVAL_CONFIG]
    if isinstance(loaded, EvalConfig):
        params = [pytest.param(row, id=row.id,
                               marks=[pytest.mark.eval, getattr(pytest.mark, row.server_profile.framework)])
                  for row in loaded.rows]
    else:  # one visible test that says what is wrong, instead of silently collecting nothing
        problem = str(loaded) if loaded else f"no eval config at {_config_path(metafunc.config)}"
        params = [pytest.param(problem, id="eval-config", marks=[pytest.mark.eval])]
    metafunc.parametrize("eval_row", params)


def _row_of(item: pytest.Item) -> EvalRow | None:
    row = item.callspec.params.get("eval_row") if hasattr(item, "callspec") else None
    return row if isinstance(row, EvalRow) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    loaded = config.stash[EVAL_CONFIG]
    if not isinstance(loaded, EvalConfig):
        return
    chosen_by = settings(config).eval
    retry_from = chosen_by.retry_failed_from
    try:
        done = refreshed_rows(retry_from) if retry_from is not None else set()
        chosen = {row.id for row in select_rows(loaded.rows, chosen_by.benchmarks, chosen_by.exclude_ids)} - done
    except (ValueError, EvalConfigError) as exc:
        raise pytest.UsageError(str(exc)) from None
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        row = _row_of(item)
        (drop if row is not None and row.id not in chosen else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def announce_run(config: pytest.Config, rows: int) -> None:
    """The run's folder and its run.log, first of all (the file is created here), so the seed's
    second terminal (`tail -f <run-dir>/run.log`) follows the run from before the precheck."""
    if ANNOUNCED in config.stash:
        return
    config.stash[ANNOUNCED] = True
    loaded = config.stash[EVAL_CONFIG]
    assert isinstance(loaded, EvalConfig)
    run_dir = eval_run_dir(config)
    RunLog(run_dir / RUN_LOG).note([f"eval run {settings(config).run_id}: {rows} row(s) of {loaded.source}",
                                    f"run dir {run_dir}"])
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"Run dir:  {run_dir}")
        reporter.write_line(f"Follow:   tail -f {run_dir / RUN_LOG}   # in a second terminal: every row's server"
                            " and client lines")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Under xdist the controller collects nothing itself: it announces the run when a worker
    reports eval rows, before any of them is scheduled."""
    rows = sum("test_eval_row[" in nodeid for nodeid in ids)
    config = node.config
    if rows and isinstance(config.stash[EVAL_CONFIG], EvalConfig) and not settings(config).pytest.collect_only:
        announce_run(config, rows)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The run's folder, then the precheck, once the selection is final, before any server starts:
    failed, it ends a plain run here; on an xdist worker each row fails with it instead."""
    rows = [row for row in map(_row_of, session.items) if row is not None]
    config = session.config
    if not rows or settings(config).pytest.collect_only:
        return
    worker = hasattr(config, "workerinput")
    if not worker:
        announce_run(config, len(rows))
    if settings(config).eval.no_precheck:
        return
    loaded = config.stash[EVAL_CONFIG]
    assert isinstance(loaded, EvalConfig)
    checks = run_checks(loaded, rows, eval_client_python(config), settings(config).eval.gpu_pool)
    failed = [check.line() for check in checks if not check.ok]
    config.stash[PRECHECK] = failed
    if not worker:
        RunLog(eval_run_dir(config) / RUN_LOG).note(["precheck:", *(check.line() for check in checks)])
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not worker:
        reporter.write_sep("=", "cellbench eval precheck")
        for check in checks:
            reporter.write_line(check.line())
    if failed and not hasattr(config, "workerinput"):
        pytest.exit(f"eval precheck failed ({len(failed)} ✗); no server was started. Fix and rerun, or pass "
                    "--no-precheck", returncode=pytest.ExitCode.USAGE_ERROR)
