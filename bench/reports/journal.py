"""The run's journal: what happened to every cell, as a markdown page and its JSON twin.

`results/<model>/<machine>/journal_<YYYY-MM-DD>.md`, rewritten atomically after every cell, so a
killed run still leaves a journal that says which cells finished. The cells themselves live in a
JSON twin (`journal_<date>.json`): a second session on the same day (chat, then agent) adds to
the same journal, and the next run reads the previous journal to say which skips still hold.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from bench.base.clock import now_iso
from bench.base.files import atomic_write
from bench.core.verdicts import Verdict

JOURNAL_VERSION = 1
IMPORTED_COMPARISON = "imported_comparison"  # evidence key: bench.core.imported.comparison_line of the cell
# The day a journal is named after, when a caller fixes it (YYYY-MM-DD): the weekly run sets it
# for its pytest sessions, so a run that crosses midnight keeps writing one journal.
JOURNAL_DAY_ENV = "CELLBENCH_JOURNAL_DAY"


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
    # pytest sessions that ended without running their cells (a usage error, an internal error...):
    # one line each, the reason first; they make the run `failed`
    session_failures: list[str] = field(default_factory=list)

    @property
    def md_path(self) -> Path:
        return self.directory / f"journal_{self.day}.md"

    @property
    def state_path(self) -> Path:
        return self.directory / f"journal_{self.day}.json"

    @classmethod
    def open(
        cls, directory: Path, *, model: str, machine: str, day: str | None = None, started_at: str | None = None
    ) -> Journal:
        """Today's journal (or that of `day`, else of $CELLBENCH_JOURNAL_DAY), continuing one an
        earlier session of the same day started."""
        day = day or os.environ.get(JOURNAL_DAY_ENV) or date.today().isoformat()
        date.fromisoformat(day)  # a bad day fails here, not as a journal named after it
        journal = cls(directory, day, model, machine, started_at or now_iso())
        if journal.state_path.is_file():
            state = json.loads(journal.state_path.read_text())
            journal.started_at = state["started_at"]
            journal.notes = state.get("notes", [])
            journal.session_failures = state.get("session_failures", [])
            for raw in state["cells"]:
                entry = CellEntry(**raw)
                journal.cells[entry.key] = entry
        return journal

    def previous(self) -> Journal | None:
        """The most recent journal of an earlier day in the same directory, if any."""
        days = sorted(p.stem.removeprefix("journal_") for p in self.directory.glob("journal_*.json"))
        earlier = [d for d in days if d < self.day]
        if not earlier:
            return None
        return Journal.open(self.directory, model=self.model, machine=self.machine, day=earlier[-1])

    def record(self, entry: CellEntry) -> None:
        prev = self.previous()
        if entry.verdict == Verdict.SKIPPED.value and prev is not None:
            old = prev.cells.get(entry.key)
            if old is not None and old.verdict == Verdict.SKIPPED.value and old.reason == entry.reason:
                entry.carried_from = old.carried_from or prev.day
        self.cells[entry.key] = entry
        self.save()

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
            "notes": self.notes,
            "session_failures": self.session_failures,
            "cells": [vars(c) for c in sorted(self.cells.values(), key=lambda c: (c.split, c.framework))],
        }
        atomic_write(self.state_path, json.dumps(state, indent=1) + "\n")
        atomic_write(self.md_path, render(self))


def _status(cells, *, interrupted: bool, sessions_failed: bool = False) -> str:
    verdicts = {c.verdict for c in cells}
    if sessions_failed:
        return "failed"
    if interrupted:
        return "partial"
    if Verdict.OOM.value in verdicts:
        return "completed_with_oom"
    if verdicts & {Verdict.FAILED.value, Verdict.ALL_FAILED.value, Verdict.WRONG_MODEL.value, Verdict.CAPPED.value}:
        return "completed_with_failures"
    if Verdict.SKIPPED.value in verdicts:
        return "completed_with_skips"
    return "completed"


def _cell_line(c: CellEntry) -> str:
    note = c.reason.replace("|", "\\|").replace("\n", " ")
    if c.carried_from:
        note = f"still skipped since {c.carried_from}: {note}"
    if c.annotations:
        note += f" ({', '.join(c.annotations)})"
    return f"| {c.framework} | {c.verdict} | {note} |"


def render(j: Journal) -> str:
    splits = sorted({c.split for c in j.cells.values()}, key=lambda s: (s != "chat", s))
    lines = [
        f"# cellbench run — {j.day}",
        "",
        "## Summary",
        f"- Started: {j.started_at}",
        f"- Finished: {j.finished_at or '(still running, or killed)'}",
        f"- Model: {j.model}",
        f"- Machine: {j.machine}",
        f"- Splits run: {', '.join(splits) or '(none yet)'}",
        f"- Status: {j.status}",
        f"- Reports: {', '.join(f'{s}/REPORT.md' for s in splits) or '(none yet)'}",
        "",
    ]
    for split in splits:
        lines += [f"## {split.capitalize()}", "", "| Framework | Status | Notes |", "|-----------|--------|-------|"]
        lines += [_cell_line(c) for c in sorted(j.cells.values(), key=lambda c: c.framework) if c.split == split]
        lines.append("")
    failing = ("failed", "all-failed", "wrong-model", "degraded", "capped")
    failures = [c for c in j.cells.values() if c.verdict in failing]
    lines += ["## Failures", ""]
    for failure in j.session_failures:
        lines += ["### a pytest session did not run its cells", f"- Reason: {failure}", ""]
    for c in sorted(failures, key=lambda c: c.key):
        ev = c.evidence
        lines.append(f"### {c.framework} / {c.split}: {c.verdict}")
        lines.append(f"- Reason: {c.reason}")
        if ev.get("dominant_error"):
            dom = ev["dominant_error"]
            status = f", HTTP {dom['http_status']}" if dom.get("http_status") else ""
            lines.append(f"- Dominant error: {dom['type']}{status} ({dom['count']}x)")
        for log in ev.get("server_logs", []):
            lines.append(f"- Server log: {log}")
        if c.result_path:
            lines.append(f"- Result: {c.result_path}")
        lines.append("")
    if not failures and not j.session_failures:
        lines += ["None.", ""]
    ooms = [c for c in j.cells.values() if c.verdict == "oom"]
    lines += ["## OOM Cells", ""] + ([f"- {c.framework} / {c.split}: {c.reason}" for c in ooms] or ["None."]) + [""]
    suspicious = [c for c in j.cells.values() if "suspicious" in c.evidence]
    lines += ["## Suspicious Results", ""]
    lines += [f"- {c.framework} / {c.split}: {c.evidence['suspicious']}" for c in suspicious] or ["None."]
    # a cell whose previous result was imported from another benchmark: always compared, labelled
    compared = [c.evidence[IMPORTED_COMPARISON] for c in sorted(j.cells.values(), key=lambda c: c.key)
                if IMPORTED_COMPARISON in c.evidence]
    lines += ["", "## Compared With Imported Results", "", *[f"- {line}" for line in compared]] if compared else []
    lines += ["", "## Notes", ""] + ([f"- {n}" for n in j.notes] or ["None."]) + [""]
    return "\n".join(lines)
