"""The session's record of its cells: terminal categories, verdict counts, journals, split reports.

Each cell's verdict is its own terminal category: `fixed`, `degraded` and `capped` are counted
apart from passed and failed (letters +, D and C). As each cell finishes, one line gives its verdict and
its numbers (output tok/s and TTFT p50 per level), so the first figures show while later cells
still run, not only in the reports at the end. The session ends with one line of verdict counts,
the run id and results root, and the reports and journals it wrote (not each cell's files).

On the controller, `RunRecorder` implements `pytest_cellbench_cell_finished`: it counts the
verdict, and for a benchmark cell writes the journal of the cell's results folder after every
cell (bench.reports.journal), with the comparison against the cell's previous result when that
one was imported from another benchmark (bench.core.result.imported), and for a failed cell the
telemetry reading of its result. When the session finishes it
rebuilds comparison.json, REPORT.md, comparison.csv and the plots of every split the session touched
(bench.reports.rebuild), says in one line each which files of those folders it ignored and why
(a truncated result, another tool's JSON), and closes the journals (`partial` when interrupted).

What a session meets outside its cells is one line each, never a traceback:
- When it starts: a results folder no cell can write (`--results-dir` naming a file, a read-only
  folder, a full disk) is one `ERROR:` line and exit code 4 before any server starts
  (bench.core.result.files.results_folder_problem); each run a killed session left (a result still
  unfinished, its writer gone: bench.core.result.store.killed) is named with what of it was kept, and
  recorded in its day's journal as `interrupted` (that journal closed as `partial` if its session
  left it `running`).
- While it runs: a file under the results folder that cannot be written (the disk filled up, the
  folder went read-only) is one `ERROR:` line naming the file and the cause; the cell that met it
  fails without a traceback, no further cell runs, the journal is closed `partial` if it can still
  be written, and the session exits with code 4.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.base.clock import now_iso
from bench.core.level_run import level_label
from bench.core.result.files import NotAResult, UnwritableResults, read_result, results_folder_problem
from bench.core.result.imported import comparison_line
from bench.core.result.model import IgnoredFile, Level
from bench.core.result.store import LoadedResult, kept_line, killed, previous_of
from bench.core.verdicts import Verdict
from bench.host.machine import detect
from bench.imports.found import RESULT_NAME as SILICONBENCH_NAME
from bench.plugins import transport
from bench.plugins.hooks import BENCHMARK, CellRecord, register_stashed, unregister_stashed
from bench.plugins.html import html_path
from bench.plugins.options import results_root, settings
from bench.reports.journal import IMPORTED_COMPARISON, TELEMETRY, CellEntry, Journal
from bench.reports.journal.state import killed_cell_day
from bench.reports.journal.telemetry import failure_reading
from bench.reports.rebuild import rebuild_split
from bench.reports.standing import ChosenRun

RECORDER = pytest.StashKey["RunRecorder"]()
FAULT = pytest.StashKey[str]()  # the session's results-folder fault, as its ERROR line says it

# verdict -> (category, letter, verbose word) for pytest_report_teststatus
_STATUS = {
    Verdict.OK: ("passed", ".", "OK"),
    Verdict.FIXED: ("fixed", "+", "FIXED"),
    Verdict.DEGRADED: ("degraded", "D", "DEGRADED"),
    Verdict.CAPPED: ("capped", "C", "CAPPED"),
    Verdict.WRONG_MODEL: ("failed", "F", "WRONG-MODEL"),
    Verdict.ALL_FAILED: ("failed", "F", "ALL-FAILED"),
    Verdict.OOM: ("failed", "F", "OOM"),
    Verdict.FAILED: ("failed", "F", "FAILED"),
}


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    cell = transport.record_of(report)
    if cell is None or cell.kind != BENCHMARK or report.skipped:
        return None
    verdict = Verdict(cell.verdict)
    if report.failed and verdict in (Verdict.DEGRADED, Verdict.CAPPED):  # --strict-verdicts
        category, letter, word = "failed", "F", verdict.value.upper()
    else:
        category, letter, word = _STATUS[verdict]
    color = {"passed": "green", "fixed": "green", "failed": "red"}.get(category, "yellow")
    return category, letter, (word, {color: True})


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        register_stashed(config, RECORDER, RunRecorder(config), "cellbench-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_stashed(config, RECORDER)


def results_fault(config: pytest.Config, line: str) -> None:
    """The session's results folder cannot be written: its one `ERROR:` line (the first fault only),
    and no cell runs after it."""
    if FAULT in config.stash:
        return
    config.stash[FAULT] = line
    say(config, f"ERROR: {line}", red=True)


def say(config: pytest.Config, line: str, **markup: bool) -> None:
    """One line where the user sees it: now, or, once the session's closing work has begun (the
    progress line still open), at the top of its summary (`RunRecorder.pytest_terminal_summary`)."""
    recorder = config.stash.get(RECORDER, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if recorder is not None and recorder.closing and reporter is not None and not reporter.no_summary:
        recorder.said.append((line, markup))
    elif reporter is not None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():  # not a test's output
            reporter.write_line(line, **markup)
    else:
        print(line, file=sys.stderr)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    return True if FAULT in item.config.stash else None  # not run: its files could not be written either


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except UnwritableResults as exc:
        line = exc.line(results_root(item.config))
    results_fault(item.config, line)  # outside the `except`: the failure below carries no exception chain
    pytest.fail("the cell's files could not be written: the session stopped (the ERROR line says why)",
                pytrace=False)


class RunRecorder:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.started_at = now_iso()
        self.verdicts: Counter[str] = Counter()
        self.journals: dict[Path, Journal] = {}
        self.split_dirs: set[Path] = set()
        self.written: list[Path] = []
        self.closing = False  # pytest_sessionfinish has begun
        self.said: list[tuple[str, dict[str, bool]]] = []  # lines for the summary's top (`say`)

    def pytest_cellbench_cell_finished(self, cell: CellRecord) -> None:
        if cell.kind != BENCHMARK:
            return
        self.verdicts[cell.verdict] += 1
        line = numbers_line(cell)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if line and reporter is not None:
            reporter.write_line(line)
        if not cell.journaled:
            return
        assert cell.framework and cell.split and cell.model and cell.machine and cell.results_root  # journaled
        directory = Path(cell.results_root) / cell.model / (cell.machine if cell.machine_folder is None
                                                             else cell.machine_folder)
        if cell.result_path:
            self.split_dirs.add(Path(cell.result_path).parent)
        try:
            if directory not in self.journals:
                self.journals[directory] = Journal.open(directory, model=cell.model, machine=cell.machine,
                                                        started_at=self.started_at)
            evidence = {**cell.evidence, **imported_comparison(cell.result_path), **telemetry(cell)}
            self.journals[directory].record(CellEntry(cell.framework, cell.split, cell.verdict, cell.reason,
                                                      cell.result_path, list(cell.annotations), evidence))
        except OSError as exc:
            results_fault(self.config, UnwritableResults(getattr(exc, "filename", None) or directory, exc)
                          .line(results_root(self.config)))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Before any server: the results folder can be written (else one ERROR line, exit code 4);
        then the runs a killed session left, one line each."""
        if settings(self.config).pytest.collect_only:
            return
        root = results_root(self.config)
        if (problem := results_folder_problem(root)) is not None:
            raise pytest.UsageError(problem)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for line in name_killed_runs(root / settings(self.config).profile.results_name / detect().folder):
            if reporter is not None:
                reporter.write_line(line, yellow=True)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.closing = True
        root = results_root(self.config)
        for split_dir in sorted(self.split_dirs):
            if FAULT in self.config.stash:
                break  # its reports could not be written either
            try:
                this_run = ChosenRun((settings(self.config).run_id,), "this pytest session's")
                comparison, written = rebuild_split(split_dir, this_run=this_run)
            except OSError as exc:
                results_fault(self.config, UnwritableResults(getattr(exc, "filename", None) or split_dir, exc)
                              .line(root))
                break
            for line in ignored_lines(split_dir.relative_to(root), comparison["ignored"]):
                say(self.config, line, yellow=True)
            plots = [p for p in written if p.suffix == ".png"]
            self.written += [p for p in written if p not in plots]  # comparison.json, REPORT.md, comparison.csv
            if plots:
                self.written.append(plots[0].parent)  # plots/, as one line
        faulted = FAULT in self.config.stash
        if faulted and not self.journals:  # a cell stopped before any was journaled: the run is partial all the same
            with contextlib.suppress(OSError):
                model, machine = settings(self.config).profile.results_name, detect()
                directory = root / model / machine.folder
                self.journals[directory] = Journal.open(directory, model=model, machine=machine.slug,
                                                        started_at=self.started_at)
        for journal in self.journals.values():
            try:
                journal.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED or faulted)
            except OSError as exc:
                results_fault(self.config, UnwritableResults(journal.md_path, exc).line(root))
                continue
            self.written.append(journal.md_path)
        if FAULT in self.config.stash:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for line, markup in self.said:
            terminalreporter.write_line(line, **markup)
        if not self.verdicts:
            return
        line = ", ".join(f"{self.verdicts[v.value]} {v.value}" for v in Verdict if self.verdicts[v.value])
        terminalreporter.write_sep("=", f"cellbench verdicts: {line}")
        terminalreporter.write_line(f"run {settings(self.config).run_id}; results under {results_root(self.config)}")
        html = html_path(self.config)
        for path in [*self.written, *([html] if html else [])]:
            terminalreporter.write_line(f"  {path}{os.sep if path.is_dir() else ''}")


def ignored_lines(split_dir: Path, ignored: list[IgnoredFile]) -> list[str]:
    """One line per file a split's reports left out, naming it and why; SiliconBench's own results
    (in its legacy tree, where cellbench files when asked) in one line, as they are not broken."""
    theirs = [i for i in ignored if SILICONBENCH_NAME.match(i["file"])]
    lines = [f"cellbench: ignored {split_dir / i['file']}: {i['reason']}" for i in ignored if i not in theirs]
    if theirs:
        lines.append(f"cellbench: left {len(theirs)} SiliconBench result file{'s' if len(theirs) != 1 else ''} in "
                     f"{split_dir} out of its reports ({theirs[0]['file']}, ...): `cellbench import siliconbench` "
                     "converts them")
    return lines


def name_killed_runs(directory: Path) -> list[str]:
    """For each run a killed session left in `directory`'s splits (results/<model>/<machine>) and no
    journal has recorded yet: one line naming it and what of it was kept, and its cell recorded
    as `interrupted` in the journal of the day it ran (bench.reports.journal)."""
    lines: list[str] = []
    splits = sorted(d for d in directory.iterdir() if d.is_dir()) if directory.is_dir() else []
    for found in (r for split_dir in splits for r in killed(split_dir)):
        block, data = found.data["unfinished"], found.data
        planned = data["run_config"]["levels"]
        of = "" if planned == ["sweep"] else f" of {len(planned) * data['run_config'].get('rounds', 1)}"
        noun = "level" if block["levels_done"] == 1 and not of else "levels"
        what = f"after {block['levels_done']}{of} {noun} (pid {block['pid']}, last written {block['updated_at']})"
        kept = kept_line(found)
        reason = f"killed {what}: {kept}"
        day = killed_cell_day(directory, data["started_at"])
        entry = CellEntry(found.framework, found.split, "interrupted", reason, str(found.path),
                          evidence={"interrupted": {"run_id": found.run_id, **block}}, finished_at=block["updated_at"])
        try:
            journal = Journal.open(directory, model=found.model, machine=found.machine, day=day,
                                   started_at=data["started_at"])
            if not journal.record_interrupted(entry):
                continue  # named by an earlier session already
        except OSError:
            pass  # the journal cannot be written: the line at least says it
        lines.append(f"cellbench: run {found.run_id} was killed in {found.framework}/{found.split} {what}: "
                     f"{kept}; its result: {found.path}")
    return lines


def imported_comparison(result_path: str | None) -> dict[str, str]:
    """`{IMPORTED_COMPARISON: line}` when the cell's previous result was imported from another
    benchmark: the journal compares the two even when nothing is suspicious. {} otherwise."""
    if not result_path:
        return {}
    try:
        current = LoadedResult(Path(result_path), read_result(Path(result_path)))
    except (OSError, NotAResult):
        return {}
    previous = previous_of(current)
    line = comparison_line(current.data, previous.data) if previous else None
    return {IMPORTED_COMPARISON: line} if line else {}


def telemetry(cell: CellRecord) -> dict[str, str]:
    """`{TELEMETRY: line}` for a failed or OOM cell with a result: what its OOM evidence, exits and
    resource samples say (bench.reports.journal.telemetry), the reading that tells a crash from
    memory pressure from throttling. {} otherwise."""
    verdict = Verdict(cell.verdict)
    if not (verdict.is_failure or verdict.listed_as_failure):
        return {}
    line = failure_reading(cell.result_path, with_oom=verdict is not Verdict.OOM)
    return {TELEMETRY: line} if line else {}


def numbers_line(cell: CellRecord) -> str | None:
    """`llamacpp-chat ok: c=1 41.2 tok/s (TTFT p50 35 ms) | c=8 180.3 tok/s (...)`, from the cell's
    result file; None for a cell without one (skipped, or no server ever started)."""
    if not cell.result_path:
        return None
    try:
        levels = read_result(Path(cell.result_path))["levels"]
    except (OSError, ValueError, NotAResult):
        return None
    figures = " | ".join(_level_figures(lv) for lv in levels)
    return f"{cell.framework}-{cell.split} {cell.verdict}: {figures or 'no level ran'}"


def _level_figures(level: Level) -> str:
    tps, ttft = level["output_throughput_tps"], level["ttft_ms"]["p50"]
    at = level_label(level)
    if not level["successful"] or tps is None:
        return f"{at} no successful request"
    return f"{at} {tps:.1f} tok/s" + (f" (TTFT p50 {ttft:.0f} ms)" if ttft is not None else "")
