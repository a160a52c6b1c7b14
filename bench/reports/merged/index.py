"""The merged report's index.html, and the writing of MERGED.md, its plots and index.html.

index.html is one self-contained page (plots inline as base64 PNG), drawn from the `Merged`
document alone (bench.reports.merged.render declares it and renders MERGED.md and the plots), so
the views cannot disagree with merged.json. Every text in it is escaped.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from bench.base.files import atomic_write
from bench.core.verdicts import GREEN_VERDICTS
from bench.reports import drawing
from bench.reports.merged.machines import machines_lines
from bench.reports.merged.render import (
    BY_MACHINE,
    INDEX_HTML,
    MERGED_MD,
    NO_RESULT,
    PLOTS_DIR,
    VS_CONCURRENCY,
    Merged,
    MergedCell,
    MergedTable,
    _configs,
    _marked_text,
    _plots_of,
    _provenance_rows,
    _sent_nothing,
    _unlike_row,
    plot_images,
    render_markdown,
    unlike_note,
)

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f4f4}
td.missing{background:#e4e4e4;color:#555;font-style:italic;font-weight:bold}td.not-run{color:#888;font-style:italic}
td.failure{background:#fde2e2}td.skipped{color:#666}
img{max-width:100%;display:block;margin:1em 0}"""


def _html_table(header: list[str], rows: list[list[tuple[str, str]]]) -> str:
    """A table of (css class, text) cells; every text is escaped."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="{cls}">{escape(text)}</td>' if cls else f"<td>{escape(text)}</td>"
                                    for cls, text in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _css(cell: MergedCell) -> str:
    if cell["source"] == "missing":
        return "missing" if cell["verdict"] == NO_RESULT else "not-run"
    return {"fixed": "ok"}.get(cell["verdict"], cell["verdict"]) if cell["verdict"] in GREEN_VERDICTS else "failure"


def _html_section(table: MergedTable, images: dict[str, bytes]) -> str:
    cells = table["cells"]
    found = drawing.unlike(_configs(table))
    rows = [[("", fw), *((_css(cells[fw][m]), _marked_text(table, found, fw, m)) for m in table["machines"])]
            for fw in table["frameworks"]]
    if unlike := _unlike_row(table):
        rows.insert(0, [("", text) for text in unlike])
    provenance = [[("", text) for text in row] for row in _provenance_rows(table)]
    figures = "".join(f'<img alt="{escape(name)}" src="{_data_url(images[name])}">'
                      for name in _plots_of(table, images))
    ignored = "".join(f"<li>ignored on {escape(i['machine'])}: {escape(i['file'])}: {escape(i['reason'])}</li>"
                      for i in table["ignored"])
    return (f"<h2>{escape(table['model'])} — {escape(table['split'])}</h2>"
            + _html_table(["Framework", *table["machines"]], rows)
            + (f"<p>{escape(unlike_note(found))}</p>" if found.note else "") + machines_html(table)
            + "<h3>Provenance</h3>"
            + _html_table(["Machine", "Framework", "Run id", "Harness commit", "Framework version", "File"], provenance)
            + (f"<ul>{ignored}</ul>" if ignored else "") + figures)


def render_html(merged: Merged, images: dict[str, bytes]) -> str:
    """index.html: one self-contained page (plots inline as base64 PNG, no external assets)."""
    sources = _html_table(["Folder", "Machines"], [[("", s["dir"]), ("", ", ".join(s["machines"]))]
                                                   for s in merged["sources"]])
    failures = "".join(f"<li>{escape(f['model'])} {escape(f['split'])} on {escape(f['machine'])}: "
                       f"{escape(f['framework'])} <b>{escape(f['verdict'])}</b>: {escape(f['reason'])}</li>"
                       for f in merged["failures"]) or "<li>None: every cell is ok or skipped.</li>"
    missing = "".join(f"<li>{escape(m['model'])} {escape(m['split'])}: no result from {escape(m['machine'])} "
                      f"({escape(m['reason'])})</li>" for m in merged["missing"]) or "<li>None.</li>"
    return "\n".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>cellbench merged report</title><style>{STYLE}</style></head><body>",
        "<h1>cellbench merged report</h1>",
        f"<p>Generated {escape(merged['generated_at'])}. Each cell is that machine's own newest result.</p>",
        f"<h2>Sources</h2>{sources}",
        f"<p>Expected machines: {escape(', '.join(merged['expected']) or 'none given (--expect)')}. "
        f"Sent nothing: {escape(', '.join(_sent_nothing(merged)) or 'none')}.</p>",
        f"<h2>Failures</h2><ul>{failures}</ul>",
        f"<h2>Missing</h2><ul>{missing}</ul>",
        *[_html_section(t, images) for t in merged["tables"]],
        "</body></html>", ""])


def write_report(merged: Merged, out: Path) -> list[Path]:
    """Write MERGED.md, `plots/*.png` and index.html under `out`; returns the files written.

    Figures of an earlier merge into the same folder that this one does not draw are removed,
    so a stale plot never sits beside the new report."""
    out = Path(out)
    images = plot_images(merged)
    written = []
    for name, png in images.items():
        atomic_write(out / PLOTS_DIR / name, png)
        written.append(out / PLOTS_DIR / name)
    for old in (out / PLOTS_DIR).glob("*.png"):
        if old.name.endswith((BY_MACHINE, VS_CONCURRENCY)) and old.name not in images:
            old.unlink()
    for name, text in ((MERGED_MD, render_markdown(merged, images)), (INDEX_HTML, render_html(merged, images))):
        atomic_write(out / name, text)
        written.append(out / name)
    return written


def machines_html(table: Mapping[str, Any]) -> str:
    """`machines_lines` for index.html: the heading, the basis and the decisions as a list (all text escaped)."""
    lines = machines_lines(table)
    items = "".join(f"<li>{escape(line.strip()[2:])}</li>" for line in lines if line.strip().startswith("- "))
    return f"<h3>{escape(lines[0][4:])}</h3><p>{escape(lines[2])}</p><ul>{items}</ul>" if lines else ""
