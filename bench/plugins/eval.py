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
Each row's run reaches the controller's `EvalRecorder` as a CellRecord of kind `eval`, through
`pytest_cellbench_cell_finished` (bench/plugins/transport.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT, cache_root
from bench.eval.config.benchmarks import listing, select_rows, wants_listing
from bench.eval.config.loader import load_eval_config
from bench.eval.config.schema import EvalConfig, EvalConfigError, EvalRow, config_path
from bench.eval.precheck import ClientPython, client_python, locator_clashes, run_checks
from bench.eval.row import RowContext, row_edit
from bench.eval.runlog import RUN_LOG, RunLog
from bench.eval.source import hardware_tag, source_prefix
from bench.eval.state import RunState, refreshed_rows
from bench.eval.tables import apply_edits
from bench.eval.tables.commit import commit_tables, uncommitted
from bench.host.machine import detect
from bench.load.watch.progress import terminal_writer
from bench.plugins.hooks import EVAL, CellRecord, register_stashed, unregister_stashed
from bench.plugins.options import results_root, settings
from bench.setup.profiles import PROFILES_DIR

EVAL_CONFIG = pytest.StashKey["EvalConfig | EvalConfigError | None"]()
RECORDER = pytest.StashKey["EvalRecorder"]()
SHARED_ROUNDS = pytest.StashKey[dict]()  # this process's finished rounds, for rows that can share them
PRECHECK = pytest.StashKey[list[str]]()  # the precheck's ✗ lines (empty: passed)
SOURCE = pytest.StashKey[tuple[str, str]]()  # (hardware tag, Source prefix) of this run
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
    checks = run_checks(loaded, rows, _client_python(config), settings(config).eval.gpu_pool)
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


def _client_python(config: pytest.Config) -> ClientPython:
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


def _row_context(config: pytest.Config, gpus: tuple[int, ...]) -> RowContext:
    loaded = config.stash[EVAL_CONFIG]
    assert isinstance(loaded, EvalConfig), "rows run, so the config loaded"
    s = settings(config)
    return RowContext(
        run_dir=eval_run_dir(config),
        repo_root=loaded.root,
        auto_env=loaded.auto_env,
        python=_client_python(config).path,
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


class EvalRecorder:
    """On the controller: each finished row's table edit, at once, and the run-state after it;
    the summary and the commit at the end (bench.eval.tables.commit; `--no-commit` skips it)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.state: RunState | None = None
        self.runs: dict[str, dict] = {}
        self.edited: list[Path] = []
        self.commit_lines: list[str] = []
        self.seen: set[Path] = set()  # table files checked for the user's own uncommitted edits
        self.dirty_before: set[Path] = set()  # those that had some

    @property
    def rows(self) -> dict[str, EvalRow]:
        loaded = self.config.stash[EVAL_CONFIG]
        return {row.id: row for row in loaded.rows} if isinstance(loaded, EvalConfig) else {}

    @pytest.hookimpl(tryfirst=True)  # before xdist starts any worker
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        loaded = self.config.stash[EVAL_CONFIG]
        if isinstance(loaded, EvalConfig) and wants_listing(settings(self.config).eval.benchmarks):
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            write = reporter.write_line if reporter is not None else print
            for line in listing(loaded.rows, loaded.root):
                write(line)
            pytest.exit("--benchmarks help: nothing was run", returncode=pytest.ExitCode.OK)
        if isinstance(loaded, EvalConfig):
            self.hardware, self.prefix = source_of(self.config)

    def _state(self) -> RunState:
        if self.state is None:
            loaded = self.config.stash[EVAL_CONFIG]
            assert isinstance(loaded, EvalConfig), "rows ran, so the config loaded"
            rows = settings(self.config).eval
            self.state = RunState(eval_run_dir(self.config), {
                "model": loaded.name, "config": str(loaded.source), "hardware": self.hardware,
                "source_prefix": self.prefix, "rounds": settings(self.config).rounds, "smoke": rows.smoke,
                "table_from": rows.table_from, "table_update": self._updates_tables(),
                "retry_failed_from": str(rows.retry_failed_from or "") or None,
            })
        return self.state

    def _updates_tables(self) -> bool:
        rows = settings(self.config).eval
        return rows.smoke is None and not rows.no_table_update

    def pytest_cellbench_cell_finished(self, cell: CellRecord) -> None:
        if cell.kind != EVAL or cell.eval_run is None or cell.eval_row not in self.rows:
            return
        run = cell.eval_run
        self.runs[cell.eval_row] = run
        state = self._state()
        state.record_row(run)
        edit = self._edit_now(self.rows[run["id"]], run)
        state.record_edit(run["id"], edit)
        state.write()
        RunLog(state.path.parent / RUN_LOG, say=terminal_writer(self.config)).stage(run["id"], _verdict_line(run, edit))

    def _edit_now(self, row: EvalRow, run: dict) -> dict:
        """The row's table edit, as the seed's runner makes it: inline, as soon as the row is done;
        never in a file outside the tables root."""
        refused = refusal(self.config, row)
        if refused:
            return {"status": "fail", "reason": refused, "file": str(row.file)}
        if run["status"] != "ok":
            return {"status": "skipped", "reason": f"row {run['status']}"}
        if not self._updates_tables():
            why = "smoke run" if settings(self.config).eval.smoke is not None else "--no-table-update"
            return {"status": "skipped", "reason": why}
        edit = row_edit(row, self.hardware, self.prefix, run["cells"], run["source_note"],
                        mean_of=rounds_averaged(self.config))
        if settings(self.config).eval.commit and row.file not in self.seen:
            self.seen.add(row.file)  # only this process edits tables: as the user left it before the run
            self.dirty_before |= uncommitted([row.file])
        outcome = apply_edits(row.file, [edit], cache_root() / "table-locks")[0]
        if outcome.status == "ok" and outcome.before != outcome.after and row.file not in self.edited:
            self.edited.append(row.file)
        return {**outcome.to_json(), "file": str(row.file)}

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.runs:
            return
        state = self._state()
        state.write(finished=True)
        if state.summary()["failed_edits"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if settings(self.config).eval.commit:  # never pushed
            committed = commit_tables(self.edited, state.path.parent, self.hardware, state.summary(),
                                      state.header["source_prefix"], self.dirty_before)
            self.commit_lines = committed.lines
            state.header["commit"] = committed.record
            state.write(finished=True)
            if not committed.ok and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.state is None:
            return
        terminalreporter.write_sep("=", "cellbench eval summary")
        for line in self.state.summary_lines():
            terminalreporter.write_line(line)


def _verdict_line(run: dict, edit: dict) -> str:
    """PASS/FAIL/SKIPPED and what became of the row's table edit, as the console and run.log say it."""
    verdict = {"ok": "PASS", "fail": "FAIL"}.get(run["status"], run["status"].upper())
    if run["status"] != "ok":
        return f"{verdict}: {run['reason']}"
    where = f" in {Path(edit['file']).name}" if edit.get("file") else ""
    warning = f"; WARNING: {edit['warning']}" if edit.get("warning") else ""
    if edit["status"] == "ok":
        return f"{verdict}, table {edit['reason']}{where}{warning}"
    return f"{verdict}, table edit {edit['status']}: {edit.get('reason', '')}{where}"
