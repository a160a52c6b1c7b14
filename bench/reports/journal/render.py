"""The journal's page, drawn from its state alone, in the shape of SiliconBench's weekly journal:
`# Weekly Bench Run — <day>`, its Summary lines in its order (cellbench's own lines after them),
a table per split, then the sections a person reads on Monday. Also the run's HTML index.

Takes a `bench.reports.journal.state.Journal` (typed loosely: the state module imports this one).
"""

from __future__ import annotations

from html import escape
from typing import Any

from bench.core.verdicts import Verdict
from bench.reports import between
from bench.reports.journal.blocks import oom_blocks, skip_blocks
from bench.reports.journal.names import DIAGNOSED_SKIP, FIX_REVERTED, IMPORTED_COMPARISON, RETRIED, TELEMETRY
from bench.reports.journal.triage import decision

NOT_WEEKLY = "none (a pytest session; `cellbench weekly` commits to weekly/<date>)"


def _splits(j: Any) -> list[str]:
    return sorted({c.split for c in j.cells.values()}, key=lambda s: (s != "chat", s))


def _cell_line(c: Any) -> str:
    note = c.reason.replace("|", "\\|").replace("\n", " ")
    if c.carried_from:
        note = f"still skipped since {c.carried_from}: {note}"
    if c.annotations:
        note += f" ({', '.join(c.annotations)})"
    if c.evidence.get(RETRIED):  # a transient failure's retry: the first attempt stays in view
        first = c.evidence[RETRIED]
        note += f"; the retry of a transient failure: first attempt {first['verdict']} ({first['result']})"
    if c.evidence.get(FIX_REVERTED):
        note += "; its fix attempt failed and was reverted: skipped (see Skipped Cells)"
    return f"| {c.framework} | {c.verdict} | {note} |"


def write_index(j: Any, split_pages: dict[str, str]):
    """`weekly_<day>.html` beside the journal: the run's status, and per split its cells' verdicts
    with links to that split's pytest-html page and REPORT.md; the pages go in the journal too."""
    from bench.base.files import atomic_write

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


def _summary(j: Any) -> list[str]:
    splits = _splits(j)
    reports = [f"{s}/REPORT.md" for s in splits if (j.directory / s / "REPORT.md").is_file()]
    return [
        f"# Weekly Bench Run — {j.day}",
        "",
        "## Summary",
        f"- Started: {j.started_at}",
        f"- Finished: {j.finished_at or '(still running, or killed)'}",
        f"- Model: {j.model}",
        f"- Splits run: {', '.join(splits) or '(none yet)'}",
        f"- Status: {j.status}",
        f"- Branch: {j.branch or NOT_WEEKLY}",
        f"- Reports: {', '.join(reports) or '(none yet)'}",  # built at a session's end
        f"- Machine: {j.machine}",
        *([f"- Push: {j.push}"] if j.push else []),
        *([f"- HTML: {', '.join(f'[{label}]({name})' for label, name in j.pages.items())}"] if j.pages else []),
        "",
    ]


def _auto_fixes(j: Any) -> list[str]:
    """One block per cell an adapter or profile edit repaired during the run: what, why, the
    upstream reference, the verifying run, the commit."""
    lines = ["## Auto-Fixes", ""]
    for c in sorted(j.fixes.values(), key=lambda c: c.key):
        fix = c.evidence.get("fix", {})
        lines.append(f"### {c.framework} / {c.split}")
        lines.append(f"- What: {fix.get('what') or 'edited ' + fix.get('adapter', 'its adapter')}")
        lines.append(f"- Why: it was {fix.get('from_verdict')} in run {fix.get('from_run_id')} "
                     f"({fix.get('from_result')}): {fix.get('from_reason')}")
        lines.append(f"- Reference: {fix.get('reference') or '(none recorded)'}")
        lines.append(f"- Verified: run {fix.get('run_id')}, {c.result_path or 'no result file'}: {c.reason}")
        now = j.cells.get(c.key)
        if now is not None and now.verdict != c.verdict:
            lines.append(f"- Since then: a later run of the cell ended {now.verdict} ({now.reason})")
        if fix.get("commit"):
            lines.append(f"- Commit: {fix['commit']}")
        lines.append("")
    lines += [] if j.fixes else ["None.", ""]
    attempts = [f"- {key}: {a['outcome_line']}" for key, a in sorted(j.fix_attempts.items()) if a.get("outcome_line")]
    attempts += [f"- {key}: {'' if r.get('kind') == 'transient' else 'retry, nothing edited: '}{r['outcome_line']}"
                 for key, r in sorted(j.retries.items()) if r.get("outcome_line")]
    attempts += [f"- refused: {r}" for r in j.refused]
    lines += ["## Fix Attempts", "", *(attempts or ["None."]), ""]
    lines += ["## Earlier Auto-Fixes", "", *([f"- {line}" for line in j.earlier_fixes] or ["None."]), ""]
    return lines


def _skipped(j: Any) -> list[str]:
    """A cell skipped on a diagnosis, one line each: since when, why, and why it still holds; then
    each failure of the run triaged skip, in the runbook's block (bench.reports.journal.blocks)."""
    lines = []
    for c in sorted(j.cells.values(), key=lambda c: c.key):
        skip = c.evidence.get(DIAGNOSED_SKIP)
        if c.verdict == Verdict.SKIPPED.value and skip:
            holds = f"; {skip['holds']}" if skip.get("holds") else ""
            lines.append(f"- {c.framework} / {c.split}: skipped since {skip.get('since')} ({skip.get('source')}): "
                         f"{skip.get('reason')}{holds}")
    body = [*lines, *([""] if lines else []), *skip_blocks(j)]  # the failures triaged skip: a block each
    return ["## Skipped Cells", "", *(body or ["None.", ""])]


def _failure(c: Any, j: Any) -> list[str]:
    ev, key = c.evidence, f"{c.framework}/{c.split}"
    lines = [f"### {c.framework} / {c.split}: {c.verdict}", f"- Reason: {c.reason}",
             f"- Decision: {decision(c, j.fix_attempts.get(key), j.retries.get(key))}"]
    if ev.get("dominant_error"):
        dom = ev["dominant_error"]
        status = f", HTTP {dom['http_status']}" if dom.get("http_status") else ""
        lines.append(f"- Dominant error: {dom['type']}{status} ({dom['count']}x)")
    if ev.get(TELEMETRY):
        lines.append(f"- Telemetry: {ev[TELEMETRY]}")
    lines += [f"- Server log: {log}" for log in ev.get("server_logs", [])]
    if c.result_path:
        lines.append(f"- Result: {c.result_path}")
    if ev.get("since_last_pass"):
        lines.append("- Since the last pass:")
        lines += [f"  {line}" for line in ev["since_last_pass"].splitlines()]
    return [*lines, ""]


def _previous_run_section(cells: list[Any]) -> list[str]:
    """Each cell against its previous run: the counts of the decisions, the regressions one line each;
    after them the cells not judged, where a side does not stand ok (bench.reports.standing)."""
    lines = ["## Compared With The Previous Run", ""]
    for c in sorted(cells, key=lambda c: ("not_judged" in (c.evidence.get(between.PREVIOUS) or {}), c.key)):
        found = c.evidence.get(between.PREVIOUS)
        if found:
            lines.append(f"- {c.framework} / {c.split} {between.previous_line(found)}")
            lines += [f"  - {line}" for line in found["regressions"]]
    return ["", *lines, "", "Decisions from the 95% interval of each figure's ratio; a run that is not ok (degraded, "
            "capped, interrupted, ...) is not judged against another (docs/results.md)."] \
        if len(lines) > 2 else []  # no cell has a previous result: no section, as for imported ones


def render(j: Any) -> str:
    lines = _summary(j)
    for split in _splits(j):
        lines += [f"## Frameworks — {split} split", "", "| Framework | Status | Notes |",
                  "|-----------|--------|-------|"]
        lines += [_cell_line(c) for c in sorted(j.cells.values(), key=lambda c: c.framework) if c.split == split]
        lines.append("")
    lines += _auto_fixes(j)
    lines += _skipped(j)
    failing = {v.value for v in Verdict if v.listed_as_failure}
    failures = [c for c in j.cells.values() if c.verdict in failing]
    lines += ["## Failures", ""]
    for failure in j.session_failures:
        lines += ["### the run itself failed", f"- Reason: {failure}", ""]  # a session, or an edit it refused
    for c in sorted(failures, key=lambda c: c.key):
        lines += _failure(c, j)
    if not failures and not j.session_failures:
        lines += ["None.", ""]
    lines += ["## OOM Cells", "", *oom_blocks(j)]
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
