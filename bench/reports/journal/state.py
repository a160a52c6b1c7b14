"""The journal's state: every cell of the day, what the run itself did, and saving both files.

`results/<model>/<machine>/weekly_<YYYY-MM-DD>.journal.md` (bench.reports.journal.names),
rewritten atomically after every cell, so a killed run still leaves a journal that says which
cells finished. The cells themselves live in the JSON twin: a second session on the same day
(chat, then agent) adds to the same journal, and the next run reads the previous journal to say
which skips still hold.

A killed run's cell (a result left unfinished, its writer gone: bench.core.result.store.killed) never got
an entry from the session that ran it; the next session records it with `record_interrupted`, as
verdict `interrupted`, and closes a journal the killed session left `running` as `partial`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import adapters
from bench.base.clock import RUN_DAY_ENV, now_iso, run_day
from bench.base.files import atomic_write
from bench.core.verdicts import Verdict
from bench.reports import between
from bench.reports.journal.names import (
    DIAGNOSED_SKIP,
    OOM_BLOCK,
    journal_files,
    legacy_state_name,
    md_name,
    state_name,
)
from bench.reports.journal.prior import recent
from bench.reports.journal.render import render
from bench.reports.journal.telemetry import oom_block

JOURNAL_VERSION = 2  # 2: the Summary's branch and push, fix attempts, refusals, earlier fixes
JOURNAL_DAY_ENV = RUN_DAY_ENV  # the day a journal is named after, when a caller fixes it (bench.base.clock)


@dataclass
class CellEntry:
    framework: str
    split: str
    verdict: str
    reason: str
    result_path: str | None = None
    annotations: list[str] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)  # dominant error, HTTP status, server logs
    finished_at: str = field(default_factory=now_iso)
    carried_from: str | None = None  # the date of an earlier journal whose skip still holds

    @property
    def key(self) -> tuple[str, str]:
        return self.framework, self.split


@dataclass
class Journal:
    directory: Path  # results/<model>/<machine>
    day: str  # YYYY-MM-DD
    model: str
    machine: str
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    status: str = "running"
    cells: dict[tuple[str, str], CellEntry] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # what failed the run itself rather than a cell: a pytest session that ended without running its
    # cells (a usage error, an internal error...), an edit outside adapters/ the weekly run refused;
    # one line each, the reason first; they make the run `failed`
    session_failures: list[str] = field(default_factory=list)
    # the run's HTML pages beside the journal, label -> file name (one pytest-html page per split,
    # the index that links them); written by `cellbench weekly`
    pages: dict[str, str] = field(default_factory=dict)
    # every `fixed` cell of the day, kept when a later run of the cell replaces it in `cells`
    fixes: dict[tuple[str, str], CellEntry] = field(default_factory=dict)
    # the branch the run commits to, or why none ("none (--no-branch)"); None: not a weekly run
    branch: str | None = None
    push: str | None = None  # what pushing the branch did, in words; None: not tried yet
    # "<framework>/<split>" -> the day's one fix attempt of the cell (bench.run.fixes.FixAttempt.to_json)
    fix_attempts: dict[str, dict[str, Any]] = field(default_factory=dict)
    retries: dict[str, dict[str, Any]] = field(default_factory=dict)  # the day's one retry (nothing edited) per cell
    refused: list[str] = field(default_factory=list)  # re-runs the fix rules refused, one line each
    earlier_fixes: list[str] = field(default_factory=list)  # prior journals' auto-fixes, one line each
    # cells of killed runs a later session found (`record_interrupted`), kept when a later run replaces them in `cells`
    interrupted: list[CellEntry] = field(default_factory=list)

    @property
    def md_path(self) -> Path:
        return self.directory / md_name(self.day)

    @property
    def state_path(self) -> Path:
        return self.directory / state_name(self.day)

    @classmethod
    def open(
        cls, directory: Path, *, model: str, machine: str, day: str | None = None, started_at: str | None = None
    ) -> Journal:
        """Today's journal (or that of `day`, else of $CELLBENCH_JOURNAL_DAY), continuing one an
        earlier session of the same day started (under either name)."""
        day = day or run_day()
        date.fromisoformat(day)  # a bad day fails here, not as a journal named after it
        journal = cls(directory, day, model, machine, started_at or now_iso())
        found = next((p for p in (journal.state_path, directory / legacy_state_name(day)) if p.is_file()), None)
        if found is not None:
            journal._load(json.loads(found.read_text()))
        return journal

    def _load(self, state: dict[str, Any]) -> None:
        self.started_at = state["started_at"]
        for name in ("notes", "session_failures", "refused", "earlier_fixes"):
            setattr(self, name, state.get(name, []))
        self.pages = state.get("pages", {})
        self.fix_attempts = state.get("fix_attempts", {})
        self.retries = state.get("retries", {})
        self.branch, self.push = state.get("branch"), state.get("push")
        for raw in state["cells"]:
            entry = CellEntry(**raw)
            self.cells[entry.key] = entry
        for raw in state.get("fixes", []):
            entry = CellEntry(**raw)
            self.fixes[entry.key] = entry
        self.interrupted = [CellEntry(**raw) for raw in state.get("interrupted", [])]

    def previous(self) -> Journal | None:
        """The most recent journal of an earlier day in the same directory that has a JSON twin."""
        earlier = [f for f in journal_files(self.directory) if f.day < self.day and f.state is not None]
        if not earlier:
            return None
        return Journal.open(self.directory, model=self.model, machine=self.machine, day=earlier[0].day)

    def record(self, entry: CellEntry) -> None:
        prev = self.previous()
        if entry.verdict == Verdict.SKIPPED.value and prev is not None and DIAGNOSED_SKIP not in entry.evidence:
            old = prev.cells.get(entry.key)
            if old is not None and old.verdict == Verdict.SKIPPED.value and old.reason == entry.reason:
                entry.carried_from = old.carried_from or prev.day
        _compare_with_previous(entry)
        if entry.verdict == Verdict.OOM.value and OOM_BLOCK not in entry.evidence:
            entry.evidence[OOM_BLOCK] = {**oom_block(entry.result_path, entry.split), "prior": self._prior_ooms(entry)}
        self.cells[entry.key] = entry
        if entry.verdict == Verdict.FIXED.value:
            self.fixes[entry.key] = entry
        self.save()

    def _prior_ooms(self, entry: CellEntry) -> str:
        """The days the two prior journals (cellbench's, SiliconBench's) list the cell as oom."""
        priors = recent(self.directory, self.day)
        days = [f"{p.day} ({p.path.name})" for p in priors if entry.key in p.ooms]
        return ", ".join(days) if days else f"none in the {len(priors)} prior journal(s) of this folder" if priors \
            else "none on record: no earlier journal in this folder"

    def record_interrupted(self, entry: CellEntry) -> bool:
        """A killed run's cell (`entry.verdict` is `interrupted`, `entry.finished_at` when its result
        was last written), found by a later session: in `interrupted` for good, in `cells` unless a
        later run of the cell is there already, and a line in the notes. A journal its session left
        `running` is closed as `partial`, finished when the killed run last wrote. False, and nothing
        written, when the entry's result is already recorded."""
        if any(e.result_path == entry.result_path for e in self.interrupted):
            return False
        self.interrupted.append(entry)
        current = self.cells.get(entry.key)
        if current is None or current.finished_at <= entry.finished_at:
            self.cells[entry.key] = entry
        self.notes.append(f"{entry.framework} / {entry.split} interrupted: {entry.reason}")
        saved = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        if saved.get("status", "running") == "running":
            self.finished_at = entry.finished_at
            self.status = _status(self.cells.values(), interrupted=True, sessions_failed=bool(self.session_failures))
        else:  # a journal its session closed keeps its status and finish time
            self.status, self.finished_at = saved["status"], saved.get("finished_at")
        self.save()
        return True

    def finish(self, *, interrupted: bool) -> None:
        self.finished_at = now_iso()
        self.status = _status(self.cells.values(), interrupted=interrupted, sessions_failed=bool(self.session_failures))
        self.save()

    def save(self) -> None:
        state = {
            "journal_version": JOURNAL_VERSION,
            "day": self.day,
            "model": self.model,
            "machine": self.machine,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "status": self.status,
            "branch": self.branch,
            "push": self.push,
            "notes": self.notes,
            "session_failures": self.session_failures,
            "refused": self.refused,
            "earlier_fixes": self.earlier_fixes,
            "fix_attempts": self.fix_attempts,
            "retries": self.retries,
            "pages": self.pages,
            "cells": [vars(c) for c in sorted(self.cells.values(), key=lambda c: (c.split, c.framework))],
            "fixes": [vars(c) for c in sorted(self.fixes.values(), key=lambda c: (c.split, c.framework))],
            "interrupted": [vars(c) for c in self.interrupted],
        }
        atomic_write(self.state_path, json.dumps(state, indent=1) + "\n")
        atomic_write(self.md_path, render(self))


def killed_cell_day(directory: Path, started_at: str) -> str:
    """The day of the journal a killed cell (started at `started_at`) belonged to: the newest
    journal in `directory` its session left `running` that started no later than the cell (the
    day `cellbench weekly --date` chose included), else the cell's own local day."""
    started = _instant(started_at)
    for files in journal_files(directory):  # newest day first
        if files.state is None:
            continue
        try:
            state = json.loads(files.state.read_text())
            if state.get("status") == "running" and _instant(state["started_at"]) <= started:
                return files.day
        except (OSError, ValueError, KeyError):
            continue
    return started.astimezone().date().isoformat()


def _instant(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return moment if moment.tzinfo else moment.astimezone()


def _compare_with_previous(entry: CellEntry) -> None:
    """The cell's result against the previous result of its cell, judged figure by figure
    (bench.reports.between.against_previous), kept in its evidence: the journal's JSON twin holds
    it, and the page is rendered from that alone."""
    if between.PREVIOUS not in entry.evidence and entry.result_path:
        found = between.against_previous(entry.result_path)
        if found is not None:
            entry.evidence[between.PREVIOUS] = found


INTERRUPTED = "interrupted"  # a killed run's cell (the `interrupted` entries): the run was cut short


def _cannot_run_here(framework: str) -> bool:
    """A framework whose adapter does not run on this platform (its cell's skip is no gap of the run)."""
    adapter = adapters.registry().get(framework)
    return adapter is not None and not adapter.runs_here()


def _status(cells, *, interrupted: bool, sessions_failed: bool = False) -> str:
    """SiliconBench's run statuses, first match wins: `partial` when the run was interrupted (or a
    killed run's cell is in it), `failed` when a session could not run its cells, then
    `completed_with_oom`, cellbench's `completed_with_failures`, `completed_with_fixes`,
    `completed_with_skips`, else `completed`: every cell that can run here ran. A skip of a
    framework that does not run on this platform is not a gap; any other skip (not installed,
    not configured, diagnosed) is."""
    cells = list(cells)
    verdicts = {c.verdict for c in cells}
    if interrupted or INTERRUPTED in verdicts:
        return "partial"
    if sessions_failed:
        return "failed"
    if Verdict.OOM.value in verdicts:
        return "completed_with_oom"
    if verdicts & {Verdict.FAILED.value, Verdict.ALL_FAILED.value, Verdict.WRONG_MODEL.value, Verdict.CAPPED.value}:
        return "completed_with_failures"
    if Verdict.FIXED.value in verdicts:
        return "completed_with_fixes"
    if any(c.verdict == Verdict.SKIPPED.value and not _cannot_run_here(c.framework) for c in cells):
        return "completed_with_skips"
    return "completed"
