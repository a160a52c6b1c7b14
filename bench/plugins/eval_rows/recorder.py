"""`EvalRecorder`, on the controller: each finished row's table edit, at once, and the run-state.

A row's run reaches it as a CellRecord of kind `eval`, through `pytest_cellbench_cell_finished`
(bench/plugins/transport.py), from whichever process ran the row (xdist workers included). The edit
lands under a lock per file, atomically, and only after the new file still parses and only the
intended lines changed (bench.eval.tables), so a run killed at row 9 keeps rows 1-8; the run's
`run-state.json` records every row, round and edit outcome. At the end: the summary and the commit
(bench.eval.tables.commit; `--no-commit` skips it). It also answers `--benchmarks help`: the
rows listed, and the session ended before any worker starts. The eval plugin
(bench/plugins/eval.py) registers it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.base.paths import cache_root
from bench.eval.config.benchmarks import listing, wants_listing
from bench.eval.config.schema import EvalConfig, EvalRow
from bench.eval.row import row_edit
from bench.eval.runlog import RUN_LOG, RunLog
from bench.eval.state import RunState
from bench.eval.tables import apply_edits
from bench.eval.tables.commit import commit_tables, uncommitted
from bench.load.watch.progress import terminal_writer
from bench.plugins.eval_rows.session import EVAL_CONFIG, eval_run_dir, refusal, rounds_averaged, source_of
from bench.plugins.hooks import EVAL, CellRecord
from bench.plugins.options import settings


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
