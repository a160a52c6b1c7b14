"""The eval plugin: every row of `models/<model>/eval.yaml` is a test, `test_eval_row[<row id>]`.

`pytest -m eval` runs the rows (`-k <row id>` one of them); each starts its server through the
same launcher as the benchmark cells, runs its client and computes its table cells. Tables are
edited once, when the session ends, on the controller (under xdist too): under a lock per file,
atomically, and only after the new file still parses and only the intended lines changed. The
run's `run-state.json` records every row, every round and every edit outcome.

The options (`--eval-config`, `--rounds`, `--smoke`, ... and the shared `--model`,
`--results-dir`, `--port`, `--install`, `--host-lock-timeout`) are registered and checked in
bench/plugins/options.py. Each row's run reaches the controller's `EvalRecorder` as a
CellRecord of kind `eval`, through `pytest_cellbench_cell_finished` (bench/plugins/transport.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import pytest

import adapters
from bench.base.git import git, toplevel
from bench.base.paths import PROJECT_ROOT, cache_root
from bench.eval import gpus as gpu_leases
from bench.eval.config import EvalConfig, EvalConfigError, EvalRow, load_eval_config
from bench.eval.row import RowContext, RowRun, RowUnavailable, run_row
from bench.eval.source import hardware_tag, source_prefix
from bench.eval.state import RunState, refreshed_rows
from bench.eval.tables import Locator, RowEdit, apply_edits, plan_edit
from bench.host.machine import detect
from bench.plugins import transport
from bench.plugins.fixtures import launching
from bench.plugins.hooks import EVAL, CellRecord, register_stashed, unregister_stashed
from bench.plugins.options import results_root, settings
from bench.setup.profiles import PROFILES_DIR

EVAL_CONFIG = pytest.StashKey["EvalConfig | EvalConfigError | None"]()
RECORDER = pytest.StashKey["EvalRecorder"]()
SHARED_ROUNDS = pytest.StashKey[dict]()  # this process's finished rounds, for rows that can share them


def _config_path(config: pytest.Config) -> Path:
    explicit = config.getoption("eval_config")
    if explicit is not None:
        return explicit
    model = config.getoption("model")
    if model.endswith((".yaml", ".yml")) or "/" in model:
        path = Path(model)
        return path.parent / path.stem / "eval.yaml"
    return PROFILES_DIR / model / "eval.yaml"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SHARED_ROUNDS] = {}
    path = _config_path(config)
    try:
        frameworks = set(adapters.registry())
        config.stash[EVAL_CONFIG] = load_eval_config(path, PROJECT_ROOT, frameworks) if path.is_file() else None
    except EvalConfigError as exc:
        if config.getoption("eval_config") is not None:
            raise pytest.UsageError(str(exc)) from None
        config.stash[EVAL_CONFIG] = exc  # a broken shipped config fails the eval rows, not `-m chat`
    if not hasattr(config, "workerinput"):
        register_stashed(config, RECORDER, EvalRecorder(config), "cellbench-eval-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    excluded = [s for s in config.getoption("exclude_ids").split(",") if s.strip()]
    retry_from = config.getoption("retry_failed_from")
    try:
        done = refreshed_rows(retry_from) if retry_from is not None else set()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    keep, drop = [], []
    for item in items:
        row = item.callspec.params.get("eval_row") if hasattr(item, "callspec") else None
        if isinstance(row, EvalRow) and (row.id in done or any(s in row.id for s in excluded)):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _row_context(config: pytest.Config, gpus: tuple[int, ...]) -> RowContext:
    loaded = config.stash[EVAL_CONFIG]
    return RowContext(
        run_dir=eval_run_dir(config),
        repo_root=PROJECT_ROOT,
        auto_env=loaded.auto_env if isinstance(loaded, EvalConfig) else {},
        rounds=config.getoption("rounds"),
        smoke=config.getoption("smoke"),
        table_from=config.getoption("table_from"),
        port=0 if config.getoption("port") is None else config.getoption("port"),
        install=config.getoption("install"),
        gpus=gpus,
        shared_rounds=config.stash[SHARED_ROUNDS],
    )


def eval_run_dir(config: pytest.Config) -> Path:
    """<results root>/eval/<config name>/<run id>: the session's run-state.json and row logs."""
    loaded = config.stash[EVAL_CONFIG]
    name = loaded.name if isinstance(loaded, EvalConfig) else "unknown"
    return results_root(config) / "eval" / name / settings(config).run_id


def _edit(row: EvalRow, hardware: str, prefix: str, cells: dict[str, str], note: str = "") -> RowEdit:
    return RowEdit(row_id=row.id, locate=Locator(**asdict(row.locate)), hardware=hardware, source_prefix=prefix,
                   cells=cells, source_note=note, new_row=row.new_row)


@pytest.fixture
def run_eval_row(request: pytest.FixtureRequest):
    """Run one row and assert it: ok passes, a failed round fails, a row that cannot run here skips."""

    def run(row: EvalRow | str) -> RowRun:
        if isinstance(row, str):  # the config is missing (skip) or broken (fail): the text says which
            if row.startswith("no eval config"):
                pytest.skip(row)
            pytest.fail(row, pytrace=False)
        # Check the locator before spending an hour on the row: a locator that cannot edit its
        # table (ambiguous, missing column, no such section) fails now, not at session end.
        probe = _edit(row, "probe", "probe", {column: "0" for column in row.cells})
        _, planned = plan_edit(row.file.read_text(encoding="utf-8"), probe)
        if planned.status != "ok":
            reason = f"locator in {row.file.name}: {planned.reason}"
            _finish(request.node, row, RowRun(row.id, reason=reason))
            pytest.fail(f"{row.id}: {reason}", pytrace=False)
        needed = row.server_profile.server_gpus
        if needed:
            pool = settings(request.config).gpu_pool or tuple(range(len(detect().gpus)))
            timeout = request.config.getoption("host_lock_timeout")
            with gpu_leases.lease(pool, needed, cache_root() / "gpu-locks", timeout) as leased, launching() as launch:
                outcome = _run(row, request, _row_context(request.config, leased), launch)
        else:
            launch = request.getfixturevalue("server_launcher")  # the cells' lifecycle, host lock included
            outcome = _run(row, request, _row_context(request.config, ()), launch)
        if outcome.status != "ok":
            detail = f"\n{outcome.excerpt}" if outcome.excerpt else ""
            pytest.fail(f"{row.id}: {outcome.reason}{detail}", pytrace=False)
        return outcome

    return run


def _run(row: EvalRow, request: pytest.FixtureRequest, ctx: RowContext, launch) -> RowRun:
    try:
        outcome = run_row(row, ctx, launch)
    except RowUnavailable as exc:
        _finish(request.node, row, RowRun(row.id, status="skipped", reason=str(exc)))
        pytest.skip(f"{row.id}: {exc}")
    _finish(request.node, row, outcome)
    return outcome


def _finish(item: pytest.Item, row: EvalRow, run: RowRun) -> None:
    """Settle the row's test with its run: the controller's EvalRecorder gets it through
    `pytest_cellbench_cell_finished` (bench/plugins/transport.py), under xdist too."""
    profile = row.server_profile
    transport.finish(item, CellRecord(kind=EVAL, verdict=run.status, reason=run.reason, framework=profile.framework,
                                      split=profile.split, eval_row=row.id, eval_run=run.to_json()))


class EvalRecorder:
    """On the controller: run-state after every row; the table edits and the summary at the end."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.state: RunState | None = None
        self.runs: dict[str, dict] = {}
        self.commit_lines: list[str] = []

    @property
    def rows(self) -> dict[str, EvalRow]:
        loaded = self.config.stash[EVAL_CONFIG]
        return {row.id: row for row in loaded.rows} if isinstance(loaded, EvalConfig) else {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Taken before any row runs: the Source cells name the code as it was when measuring began.
        self.hardware = hardware_tag(detect(), self.config.getoption("hardware"))
        self.prefix = source_prefix(PROJECT_ROOT)

    def _state(self) -> RunState:
        if self.state is None:
            cfg = self.config
            loaded = cfg.stash[EVAL_CONFIG]
            assert isinstance(loaded, EvalConfig), "rows ran, so the config loaded"
            self.state = RunState(eval_run_dir(cfg), {
                "model": loaded.name, "config": str(loaded.source), "hardware": self.hardware,
                "source_prefix": self.prefix, "rounds": cfg.getoption("rounds"), "smoke": cfg.getoption("smoke"),
                "table_from": cfg.getoption("table_from"), "table_update": self._updates_tables(),
                "retry_failed_from": str(cfg.getoption("retry_failed_from") or "") or None,
            })
        return self.state

    def _updates_tables(self) -> bool:
        return self.config.getoption("smoke") is None and not self.config.getoption("no_table_update")

    def pytest_cellbench_cell_finished(self, cell: CellRecord) -> None:
        if cell.kind != EVAL or cell.eval_run is None or cell.eval_row not in self.rows:
            return
        self.runs[cell.eval_row] = cell.eval_run
        self._state().record_row(cell.eval_run)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.runs:
            return
        state = self._state()
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            why = "session interrupted: rerun with --retry-failed-from"
            edits_allowed = False
        else:
            why = "smoke run" if self.config.getoption("smoke") is not None else "--no-table-update"
            edits_allowed = self._updates_tables()
        by_file: dict[Path, list[RowEdit]] = defaultdict(list)
        for row_id, run in self.runs.items():
            if run["status"] != "ok":
                state.record_edit(row_id, {"status": "skipped", "reason": f"row {run['status']}"})
            elif not edits_allowed:
                state.record_edit(row_id, {"status": "skipped", "reason": why})
            else:
                row = self.rows[row_id]
                by_file[row.file].append(_edit(row, self.hardware, self.prefix, run["cells"], run["source_note"]))
        edited: list[Path] = []
        for path, edits in by_file.items():
            for outcome in apply_edits(path, edits, cache_root() / "table-locks"):
                state.record_edit(outcome.row_id, {**outcome.to_json(), "file": str(path)})
                if outcome.status == "ok" and path not in edited:
                    edited.append(path)
        state.write(finished=True)
        if state.summary()["failed_edits"] and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.config.getoption("commit") and edited:
            self.commit_lines = commit_tables(edited, self.hardware, state)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.state is None:
            return
        terminalreporter.write_sep("=", "cellbench eval summary")
        for line in [*self.state.summary_lines(), *self.commit_lines]:
            terminalreporter.write_line(line)


def commit_tables(files: list[Path], hardware: str, state: RunState) -> list[str]:
    """Commit only the edited benchmark files, in the repository that holds them (`git commit --
    <files>` leaves anything else the user staged alone); never push. Returns what to print."""
    s = state.summary()
    message = (f"Refresh reference tables on {hardware}: {s['replaced']} replaced, {s['appended']} appended\n\n"
               f"cellbench eval run {state.path.parent.name} ({state.header['source_prefix']}).\n"
               f"Run state: {state.path}\n")
    root = toplevel(files[0])
    if root is None or any(toplevel(path) != root for path in files):
        return [f"commit FAILED: the edited files are not all in one git repository: {[str(f) for f in files]}"]
    rel = [str(path.resolve().relative_to(root.resolve())) for path in files]
    for step in (["add", "--", *rel], ["commit", "-q", "-m", message, "--", *rel]):
        done = git(root, *step)
        if done.returncode != 0:
            return [(f"commit FAILED ({' '.join(step[:1])}): {(done.stderr or done.stdout).strip()}; "
                     "the edits are in the working tree")]
    return [f"Review:   git -C {root} show HEAD",
            f"Revert:   git -C {root} reset --soft HEAD~1   # keeps the edits, uncommitted",
            f"Run dir:  {state.path.parent}"]
