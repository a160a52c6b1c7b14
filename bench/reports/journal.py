"""The run's journal: what happened to every cell, as a markdown page and its JSON twin.

`results/<model>/<machine>/journal_<YYYY-MM-DD>.md`, rewritten atomically after every cell, so a
killed run still leaves a journal that says which cells finished. The cells themselves live in a
JSON twin (`journal_<date>.json`): a second session on the same day (chat, then agent) adds to
the same journal, and the next run reads the previous journal to say which skips still hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from html import escape
from pathlib import Path

from bench.base.clock import RUN_DAY_ENV, now_iso, run_day
from bench.base.files import atomic_write
from bench.core.verdicts import Verdict
from bench.reports import between

JOURNAL_VERSION = 1
IMPORTED_COMPARISON = "imported_comparison"  # evidence key: bench.core.imported.comparison_line of the cell
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
        day = day or run_day()
        date.fromisoformat(day)  # a bad day fails here, not as a journal named after it
        journal = cls(directory, day, model, machine, started_at or now_iso())
        if journal.state_path.is_file():
            state = json.loads(journal.state_path.read_text())
            journal.started_at = state["started_at"]
            journal.notes = state.get("notes", [])
            journal.session_failures = state.get("session_failures", [])
            journal.pages = state.get("pages", {})
            for raw in state["cells"]:
                entry = CellEntry(**raw)
                journal.cells[entry.key] = entry
            for raw in state.get("fixes", []):
                entry = CellEntry(**raw)
                journal.fixes[entry.key] = entry
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
        _compare_with_previous(entry)
        self.cells[entry.key] = entry
        if entry.verdict == Verdict.FIXED.value:
            self.fixes[entry.key] = entry
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
            "pages": self.pages,
            "cells": [vars(c) for c in sorted(self.cells.values(), key=lambda c: (c.split, c.framework))],
            "fixes": [vars(c) for c in sorted(self.fixes.values(), key=lambda c: (c.split, c.framework))],
        }
        atomic_write(self.state_path, json.dumps(state, indent=1) + "\n")
        atomic_write(self.md_path, render(self))


def _compare_with_previous(entry: CellEntry) -> None:
    """The cell's result against the previous result of its cell, judged figure by figure
    (bench.reports.between.against_previous), kept in its evidence: the journal's JSON twin holds
    it, and the page is rendered from that alone."""
    if between.PREVIOUS not in entry.evidence and entry.result_path:
        found = between.against_previous(entry.result_path)
        if found is not None:
            entry.evidence[between.PREVIOUS] = found


def _previous_run_section(cells: list[CellEntry]) -> list[str]:
    """Each cell against its previous run: the counts of the decisions, the regressions one line each."""
    lines = ["## Compared With The Previous Run", ""]
    for c in sorted(cells, key=lambda c: c.key):
        found = c.evidence.get(between.PREVIOUS)
        if found:
            lines.append(f"- {c.framework} / {c.split} {between.previous_line(found)}")
            lines += [f"  - {line}" for line in found["regressions"]]
    return ["", *lines, "", "Decisions from the 95% interval of each figure's ratio (docs/results.md)."] \
        if len(lines) > 2 else []  # no cell has a previous result: no section, as for imported ones


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
    if Verdict.FIXED.value in verdicts:
        return "completed_with_fixes"
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


def write_index(j: Journal, split_pages: dict[str, str]) -> Path:
    """`weekly_<day>.html` beside the journal: the run's status, and per split its cells' verdicts
    with links to that split's pytest-html page and REPORT.md; the pages go in the journal too."""
    name = f"weekly_{j.day}.html"
    sections = []
    for split in sorted({c.split for c in j.cells.values()} | set(split_pages), key=lambda s: (s != "chat", s)):
        rows = "".join(f"<tr><td>{escape(c.framework)}</td><td>{escape(c.verdict)}</td><td>{escape(c.reason)}</td></tr>"
                       for c in sorted(j.cells.values(), key=lambda c: c.framework) if c.split == split)
        page = split_pages.get(split)
        links = [f'<a href="{escape(page)}">pytest-html report</a>'] if page else []
        links.append(f'<a href="{escape(split)}/REPORT.md">REPORT.md</a>')
        sections.append(f"<h2>{escape(split)}</h2><p>{' · '.join(links)}</p>"
                        f"<table><tr><th>framework</th><th>verdict</th><th>reason</th></tr>{rows}</table>")
    html = (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>cellbench run {j.day}</title></head><body>"
            f"<h1>cellbench run {j.day}</h1><p>{escape(j.model)} on {escape(j.machine)}: {escape(j.status)}. "
            f'Journal: <a href="{j.md_path.name}">{j.md_path.name}</a></p>{"".join(sections)}</body></html>\n')
    atomic_write(j.directory / name, html)
    j.pages = {**split_pages, "index": name}
    j.save()
    return j.directory / name


def _auto_fixes(j: Journal) -> list[str]:
    """One block per cell an adapter edit repaired during the run: what, why, the verifying run."""
    lines = ["## Auto-Fixes", ""]
    for c in sorted(j.fixes.values(), key=lambda c: c.key):
        fix = c.evidence.get("fix", {})
        lines.append(f"### {c.framework} / {c.split}")
        lines.append(f"- What: {fix.get('what') or 'edited ' + fix.get('adapter', 'its adapter')}")
        lines.append(f"- Why: it was {fix.get('from_verdict')} in run {fix.get('from_run_id')} "
                     f"({fix.get('from_result')}): {fix.get('from_reason')}")
        lines.append(f"- Verified: run {fix.get('run_id')}, {c.result_path or 'no result file'}: {c.reason}")
        now = j.cells.get(c.key)
        if now is not None and now.verdict != c.verdict:
            lines.append(f"- Since then: a later run of the cell ended {now.verdict} ({now.reason})")
        if fix.get("commit"):
            lines.append(f"- Commit: {fix['commit']}")
        lines.append("")
    return lines if j.fixes else [*lines, "None.", ""]


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
        *([f"- HTML: {', '.join(f'[{label}]({name})' for label, name in j.pages.items())}"] if j.pages else []),
        "",
    ]
    for split in splits:
        lines += [f"## {split.capitalize()}", "", "| Framework | Status | Notes |", "|-----------|--------|-------|"]
        lines += [_cell_line(c) for c in sorted(j.cells.values(), key=lambda c: c.framework) if c.split == split]
        lines.append("")
    lines += _auto_fixes(j)
    failing = {v.value for v in Verdict if v.listed_as_failure}
    failures = [c for c in j.cells.values() if c.verdict in failing]
    lines += ["## Failures", ""]
    for failure in j.session_failures:
        lines += ["### the run itself failed", f"- Reason: {failure}", ""]  # a session, or an edit it refused
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
        if ev.get("since_last_pass"):
            lines.append("- Since the last pass:")
            lines += [f"  {line}" for line in ev["since_last_pass"].splitlines()]
        lines.append("")
    if not failures and not j.session_failures:
        lines += ["None.", ""]
    ooms = [c for c in j.cells.values() if c.verdict == "oom"]
    lines += ["## OOM Cells", ""] + ([f"- {c.framework} / {c.split}: {c.reason}" for c in ooms] or ["None."]) + [""]
    audited = [f"- {c.framework} / {c.split}: {line}" for c in sorted(j.cells.values(), key=lambda c: c.key)
               for line in c.evidence.get("audits", ())]  # bench.core.metrics.audits.audit_lines of the cell
    lines += ["## Audits", "", *(audited or ["None."]), ""]
    suspicious = [c for c in j.cells.values() if "suspicious" in c.evidence]
    lines += ["## Suspicious Results", ""]
    lines += [f"- {c.framework} / {c.split}: {c.evidence['suspicious']}" for c in suspicious] or ["None."]
    lines += _previous_run_section(list(j.cells.values()))
    # a cell whose previous result was imported from another benchmark: always compared, labelled
    compared = [c.evidence[IMPORTED_COMPARISON] for c in sorted(j.cells.values(), key=lambda c: c.key)
                if IMPORTED_COMPARISON in c.evidence]
    lines += ["", "## Compared With Imported Results", "", *[f"- {line}" for line in compared]] if compared else []
    lines += ["", "## Notes", ""] + ([f"- {n}" for n in j.notes] or ["None."]) + [""]
    return "\n".join(lines)
