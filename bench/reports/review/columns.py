"""The pytest-html report: cellbench's columns, each cell's extras and the environment table.

`pytest -m chat --html=results/report.html --self-contained-html` (what `make bench` runs) gives
one file. pytest-html 4 renders the table rows with JavaScript from a JSON blob, so what is
decided here is (1) the cells of each row, (2) the extras shown when a row is expanded, and
(3) what goes in the environment table:

- Columns (all sortable): verdict, level, output tok/s, TTFT p50, TPOT p50, failure rate. The
  three metrics are those of the cell's **highest concurrency level** (of an open-loop cell, its
  highest request rate: "4 req/s"; rate levels sort apart from concurrency levels), named in the
  Level column: one level for all of them keeps a row internally consistent (TTFT and throughput
  under the same load), and the cells of one session share their levels, so a column compares like
  with like. The failure rate is over all measured requests of all levels, as the verdict counts it.
  Every level's numbers are in the row's extras.
- pytest-html sorts a column by comparing the cell's inner HTML as a string (its app.js). Each
  of our cells therefore starts with `<span data-sort="KEY">`: a zero-padded number (so 9.5 sorts
  below 12.0) or a severity rank for verdicts (failures first), missing values lowest. A cell that
  does not stand ok (bench.reports.standing: its verdict, an earlier run's result) has its figures
  badged with its marks, and their keys put them after the ok cells' whichever way a column sorts
  best first. The summary above the rows is bench.reports.review.summary's.
- Extras per cell: a summary (verdict, reason, annotations, the levels' audit lines, the per-level table, with TTFA p50
  beside TTFT p50 where a level's model reasoned, and the tail of every server log), the cell
  plot (PNG), the result JSON and each server log tail as text.
  Server output is untrusted: all of it is HTML-escaped here (pytest-html inserts with `innerHTML`).
- Environment: pytest-metadata's dict, rendered on every rewrite (after each test with
  `generate_report_on_test`, and at the end), with the run id, the machine, the model and, as cells
  finish, each framework's version; pytest-html inserts them with `innerHTML`: escaped too.

Everything a row needs is computed on the side that ran the cell (`row_data`, `extras_for`) and
travels as plain JSON-able data on the report, so the report is the same with or without xdist;
only its standing waits for the controller, which knows the session's run id.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping
from html import escape
from pathlib import Path
from typing import Any

import pytest

from bench.core.figures import block_of
from bench.core.lenses.fidelity import in_words
from bench.core.level_run import level_key, level_label, rate_text, rate_value
from bench.core.metrics import table as metric_table
from bench.core.metrics.audits import CACHED, SHORT_OUTPUT, TOKEN_ACCOUNTING
from bench.core.metrics.stats.intervals import bound_text
from bench.core.result.model import Level, MachineBlock, NoResult, Result
from bench.core.verdicts import Verdict
from bench.reports import between, standing
from bench.reports.comparison import settings_of
from bench.reports.lenses.latency import latencies
from bench.reports.markdown.rows import figure_rows, server_rows
from bench.reports.markdown.text import NULL
from bench.reports.review.marks import previous_badge, previous_html, row_basis_badge, row_interval
from bench.reports.standing import shown

LOG_TAIL_LINES = 60
MISSING = "—"

# (column type, header, tooltip). The type names the `col-<type>` class and pytest-html's
# `data-column-type`; pytest-html only accepts \w+ there, and result/duration/testId are its own.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("verdict", "Verdict", "cellbench's verdict; sorting puts failures first"),
    ("level", "Level", "the highest concurrency level (or open-loop request rate) measured: the next three columns "
                       "are its numbers"),
    ("output_tps", "Output tok/s", "output throughput at that level"),
    ("ttft_p50", "TTFT p50 (ms)", "median time to first token at that level"),
    ("tpot_p50", "TPOT p50 (ms)", "median time per output token at that level"),
    ("failure_rate", "Failure rate", "failed / measured requests over all levels"),
)
# Worst first when sorted ascending (bench.core.verdicts.VERDICT_LOOKS).
VERDICT_RANK = tuple(v.value for v in sorted(Verdict, key=lambda v: v.rank))


# ------------------------------------------------------------------ row data (on the runner)


def row_data(result: Result | NoResult) -> dict[str, Any]:
    """The numbers of a cell's table row, from its result (see the module docstring)."""
    levels = result["levels"] if "levels" in result else []
    done = sum(lv["successful"] + lv["failed"] for lv in levels)
    failed = sum(lv["failed"] for lv in levels)
    top = max(levels, key=level_key, default=None)  # a cell's levels are of one kind
    row: dict[str, Any] = {"level": None, "output_tps": None, "ttft_p50_ms": None, "tpot_p50_ms": None,
                           "failure_rate": failed / done if done else None}
    if top is not None:
        row.update(level=top.get("concurrency"), output_tps=top["output_throughput_tps"],
                   ttft_p50_ms=top["ttft_ms"]["p50"], tpot_p50_ms=top["tpot_ms"]["p50"])
        if (ci := between.rate_interval(top, "output_throughput_tps")) is not None:
            row.update(output_tps_ci95=ci, interval_basis=between.interval_basis(top))
        if "request_rate" in top:  # an open-loop cell: its Level cell names the rate
            row.update(rate=rate_text(top["request_rate"]), level_label=level_label(top))
    if "run_config" in result:  # what the summary compares across a split's cells (not like with like)
        row["settings"] = settings_of(result["run_config"])
    row["standing_facts"] = standing.facts(result)  # its standing is decided on the controller, by this run
    row["tps_by_level"] = {str(lv["concurrency"]): lv["output_throughput_tps"] for lv in levels if "concurrency" in lv}
    row["latency_by_level"] = {str(lv["concurrency"]): latencies(lv) for lv in levels if "concurrency" in lv}
    if memory := {str(lv["concurrency"]): peak for lv in levels  # the summary's memory frontier
                  if "concurrency" in lv and (peak := block_of(lv, "memory").get("peak_bytes"))}:
        row["memory_by_level"] = memory
    if "fidelity" in result:  # the summary's fidelity column, against the reference as the cell found it
        row["fidelity"] = in_words(b := result["fidelity"], result["framework"]["name"], b.get("vs_reference"),
                                   b.get("flagged", False))
    # flat rates only: a trace's offered rate or a ramp's end rate is not the same level at that rate
    flat = [lv for lv in levels if "request_rate" in lv and level_key(lv)[0] == "rate" and len(level_key(lv)) == 4]
    if by_rate := {rate_text(lv["request_rate"]): lv["output_throughput_tps"] for lv in flat}:
        row["tps_by_rate"] = by_rate
    return row


# ------------------------------------------------------------------ the summary above the rows (on the controller)

# A colour per verdict's tone (bench.core.verdicts.VERDICT_LOOKS): failures red, warnings (capped,
# degraded) amber, fixed blue, ok green, skipped grey.
TONE_COLOURS = {"failure": "#b42318", "warning": "#b54708", "fixed": "#175cd3", "ok": "#067647", "skipped": "#667085"}
VERDICT_COLOURS = {v.value: TONE_COLOURS[v.tone] for v in Verdict}


def verdict_css() -> str:
    """Each verdict's colour, in the Verdict column (by its sort key) and in the summary."""
    rules = [f'.col-verdict span[data-sort="{rank}-{v}"], .cellbench-verdict-{v} '
             f"{{color: {VERDICT_COLOURS[v]}; font-weight: 600}}" for rank, v in enumerate(VERDICT_RANK)]
    return "<style>" + "\n".join(rules) + "</style>"


# ------------------------------------------------------------------ table cells (on the controller)


def header_cells() -> list[str]:
    return [f'<th class="sortable" data-column-type="{kind}" title="{escape(tip)}">{escape(name)}</th>'
            for kind, name, tip in COLUMNS]


def number_key(value: float | None) -> str:
    """A string that sorts like the number: fixed width, zero-padded; missing sorts lowest."""
    if value is None:
        return ""
    return f"{max(0.0, float(value)):020.6f}"


def _td(kind: str, key: str, text: str, extra: str = "") -> str:
    return f'<td class="col-{kind}"><span data-sort="{escape(key)}">{escape(text)}</span>{extra}</td>'


def _fmt(value: float | None, spec: str) -> str:
    return MISSING if value is None else format(value, spec)


def cell_standing(data: Mapping[str, Any], this_run: str | None) -> standing.Standing:
    """The standing of a row's cell (its record, `CellRecord.to_json()`) in session `this_run`:
    from its result's facts (`row_data`), else from its verdict alone."""
    found = (data.get("row") or {}).get("standing_facts") or {"verdict": {"verdict": data.get("verdict"),
                                                                          "reason": data.get("reason", "")}}
    return standing.standing_of(found, this_run if "run_id" in found else None)


def row_cells(data: dict[str, Any] | None, this_run: str | None = None) -> list[str]:
    """The cells of one row, in COLUMNS order; empty ones for reports without cellbench data
    (a setup error, a collection error), so the columns stay aligned. A figure of a cell that does
    not stand ok in session `this_run` carries its marks and sorts after the ok ones."""
    if not data:
        return [f'<td class="col-{kind}"><span data-sort=""></span></td>' for kind, _, _ in COLUMNS]
    verdict, marks = data["verdict"], cell_standing(data, this_run)
    rank = VERDICT_RANK.index(verdict) if verdict in VERDICT_RANK else len(VERDICT_RANK)
    badges = "".join(
        f' <span class="cellbench-annotation" title="{escape(_annotation_note(data, note))}">{escape(note)}</span>'
        for note in data.get("annotations", ())
    ) + previous_badge(data)
    row = data.get("row") or {}
    level = row.get("level")
    if row.get("rate") is not None:  # an open-loop cell: "r" keeps rates apart from concurrency levels when sorted
        level_cell = _td("level", "r" + number_key(rate_value(row["rate"])), row.get("level_label") or row["rate"])
    else:
        level_cell = _td("level", number_key(level), MISSING if level is None else f"c={level}")
    return [
        _td("verdict", f"{rank}-{verdict}", verdict, badges),
        level_cell,
        _td("output_tps", shown.sort_key(number_key(row.get("output_tps")), marks, higher_is_better=True),
            _fmt(row.get("output_tps"), ".1f") + row_interval(row),
            row_basis_badge(row) + (shown.badge(marks) if row.get("output_tps") is not None else "")),
        *(_td(kind, shown.sort_key(number_key(row.get(key)), marks, higher_is_better=False), _fmt(row.get(key), spec),
              shown.badge(marks) if row.get(key) is not None else "")
          for kind, key, spec in (("ttft_p50", "ttft_p50_ms", ".1f"), ("tpot_p50", "tpot_p50_ms", ".2f"))),
        _td("failure_rate", number_key(row.get("failure_rate")),
            MISSING if row.get("failure_rate") is None else f"{row['failure_rate']:.1%}"),
    ]


AUDIT_NOTES = {TOKEN_ACCOUNTING: "token accounting diverges", SHORT_OUTPUT: "output length stopped short",
               CACHED: "cache audit cached"}


def _annotation_note(data: dict[str, Any], note: str) -> str:
    if note == "suspicious":
        return data.get("evidence", {}).get("suspicious") or note
    if note in AUDIT_NOTES:  # the lines of the audit that fired (bench.core.metrics.audits.audit_lines)
        lines = data.get("evidence", {}).get("audits", ())
        return "; ".join(line for line in lines if AUDIT_NOTES[note] in line) or note
    if note == "resumed":  # --skip-existing kept an earlier result: the row shows its numbers
        return f"kept from an earlier session: {data.get('result_path') or 'its result file'}"
    return note


# ------------------------------------------------------------------ extras (on the runner)


def tail_lines(path: Path, n: int = LOG_TAIL_LINES, *, max_bytes: int = 256 * 1024) -> str:
    """The last `n` lines of a text file (read from its end; undecodable bytes replaced)."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - max_bytes))
        data = f.read()
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])


def server_log_tails(result: Result | NoResult, n: int = LOG_TAIL_LINES) -> list[tuple[str, str, str]]:
    """(label, path, last n lines) of every server log the result names."""
    tails = []
    for server in result["servers"] if "servers" in result else ():
        log = server.get("log")
        if not log:
            continue
        levels = server.get("levels", [])
        label = server.get("purpose") or ("shared" if len(levels) > 1 else "c" + ",".join(map(str, levels))
                                          if all(isinstance(lv, int) for lv in levels) else str(levels[0]))
        try:
            text = tail_lines(Path(log), n)
        except OSError as exc:
            text = f"(cannot read the log: {exc})"
        tails.append((label, log, text))
    return tails


def _level_table(levels: Iterable[Level]) -> str:
    """Every level's row; its metric columns are the metric table's with a `review` format (a
    reasoning-only one, TTFA, where a level's model reasoned), each its p50, then the server's own
    figures and what limited the level where some level has them (REPORT.md's server rows)."""
    levels = sorted(levels, key=level_key)
    open_loop = any("request_rate" in lv for lv in levels)
    shown = [m for m in metric_table.METRICS if m.review is not None
             and (m.when != "reasoning" or any(m.key in lv for lv in levels)) and (m.when != "open_loop" or open_loop)]
    server = server_rows(levels)  # the server's own view, as REPORT.md's rows have it
    server += figure_rows(levels)  # the level figures' (bench.core.figures), as REPORT.md's rows have them
    head = ("request rate" if open_loop else "concurrency", "ok / failed", "output tok/s",
            *(f"{m.label} p50 ({m.unit})" for m in shown),
            *(label.lower().replace("server: ", "server ") for label, _ in server), "note")
    rows = []
    for lv in levels:
        note = lv["stop_reason"] if lv.get("partial") else (", ".join(lv.get("errors", {})) or "")
        if (goodput := lv.get("goodput")) is not None:
            note = f"goodput {_fmt(goodput['goodput_rps'], '.2f')} req/s" + (f"; {note}" if note else "")
        cells = (level_label(lv) if open_loop else lv.get("concurrency"), f"{lv['successful']} / {lv['failed']}",
                 between.rate_cell(lv, "output_throughput_tps", 1).replace("N/A", MISSING),
                 *(_p50_cell(lv, m.key, m.review or "") for m in shown),
                 *(render(lv).replace(NULL, MISSING) for _, render in server), note)
        rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
    return f'<table class="cellbench-levels">{header}{"".join(rows)}</table>'


def _p50_cell(level: Mapping[str, object], key: str, spec: str) -> str:
    """The p50 in `spec` with its 95% interval ("812.4 [790.1, 851.0]", "(n<6)" below 6 values),
    as REPORT.md shows it; the bare p50 where the level has no interval (an earlier result)."""
    value = _p50(level, key)
    return _fmt(value, spec) + ("" if value is None else bound_text(level.get(key), "p50", spec))


def _p50(level: Mapping[str, object], key: str) -> float | None:
    """The p50 of the level's stats block `key`; None where the level has none (an imported level's TPOT)."""
    block = level.get(key)
    value = block.get("p50") if isinstance(block, dict) else None
    return value if isinstance(value, (int, float)) else None


def summary_html(data: dict[str, Any], result: Result | NoResult, tails: list[tuple[str, str, str]]) -> str:
    """The expanded row's HTML: every string in it is escaped (server text is untrusted)."""
    parts = [f"<p><b>{escape(data['verdict'])}</b>: {escape(data['reason'])}</p>"]
    suspicious = data.get("evidence", {}).get("suspicious")
    if suspicious:
        parts.append(f"<p><b>suspicious</b> (not a verdict; please review): {escape(suspicious)}</p>")
    others = [a for a in data.get("annotations", ()) if a != "suspicious"]
    if others:
        parts.append(f"<p>annotations: {escape(', '.join(others))}</p>")
    if audits := data.get("evidence", {}).get("audits"):
        parts.append("<p>audits:</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in audits) + "</ul>")
    if data.get("result_path"):
        parts.append(f"<p>result: <code>{escape(data['result_path'])}</code></p>{previous_html(data)}")
    if "levels" in result and result["levels"]:
        parts.append(_level_table(result["levels"]))
    for label, path, text in tails:
        parts.append(f"<details><summary>server log {escape(label)}: <code>{escape(path)}</code> "
                     f"(last {LOG_TAIL_LINES} lines)</summary><pre>{escape(text)}</pre></details>")
    return '<div class="cellbench-cell">' + "".join(parts) + "</div>"


def extras_for(data: dict[str, Any], result: Result | NoResult) -> list[dict[str, Any]]:
    """pytest-html extras for one cell: summary, plot, result JSON, server log tails."""
    from pytest_html import extras  # only called when pytest-html is active

    tails = server_log_tails(result)
    out = [extras.html(summary_html(data, result, tails))]
    if "levels" in result and result["levels"]:
        from bench.reports.review.cell_plot import cell_plot  # matplotlib: imported only when a report is asked for

        png = base64.b64encode(cell_plot(result)).decode("ascii")
        out.append(extras.png(png, name="output tok/s and TTFT p50 per level"))
    if result:
        out.append(extras.json(result, name="result JSON"))
    out += [extras.text(text, name=escape(f"server log {label} (last {LOG_TAIL_LINES} lines)"))
            for label, _, text in tails]
    return out


# ------------------------------------------------------------------ environment table (controller)


def _metadata(config: pytest.Config) -> dict[str, Any] | None:
    try:
        from pytest_metadata.plugin import metadata_key
    except ImportError:
        return None
    return config.stash.get(metadata_key, None)


def add_session_facts(config: pytest.Config, *, run_id: str, machine: MachineBlock, model: str) -> None:
    """The run id, the machine and the model in pytest-metadata's dict (the environment table)."""
    metadata = _metadata(config)
    if metadata is None:
        return
    probe_error = machine.get("gpu_probe_error")
    gpus = ", ".join(machine["gpus"]) or (f"unknown ({probe_error})" if probe_error else "none")
    facts = {"slug": machine["slug"], "cpu": machine["cpu"], "cores": machine["cores"],
             "memory GiB": machine["memory_gib"], "gpus": gpus, "os": machine["os"]}
    if machine.get("chip"):
        facts["chip"] = machine["chip"]
    metadata["cellbench run"] = escape(run_id)
    metadata["machine"] = {escape(k): escape(str(v)) for k, v in facts.items()}
    metadata["model"] = escape(model)


def add_framework_version(config: pytest.Config, framework: str, version: str) -> None:
    """One framework's version, as its first cell of this session finishes."""
    metadata = _metadata(config)
    if metadata is None:
        return
    metadata.setdefault("frameworks", {})[escape(framework)] = escape(version)
