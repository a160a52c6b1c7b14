"""The summary above the pytest-html report's rows (on the controller): the verdict counts, each a
checkbox that shows or hides that verdict's rows; output tok/s per cell and level (and each cell's
fidelity where it ran: bench.core.lenses.fidelity.in_words), as a table and as one plot per split,
each cell that does not stand ok (bench.reports.standing: its verdict, an earlier run's result kept
by --skip-existing, ...) after the ok ones and marked at every figure; skipped cells on one line.
Its script also writes each non-ok verdict into pytest's Result column (DEGRADED, CAPPED,
WRONG-MODEL ...), where pytest-html would say "Passed" or "Failed".
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from bench.core.level_run import rate_value
from bench.reports.review.columns import MISSING, VERDICT_RANK, cell_standing, verdict_css
from bench.reports.review.marks import unlike_marks
from bench.reports.standing import Standing, shown


def session_summary_html(cells: list[dict[str, Any]], this_run: str | None = None) -> str:
    """What a reviewer reads first (the module docstring); `cells` are the cells' records
    (`CellRecord.to_json()`), `this_run` the session's run id."""
    if not cells:
        return ""
    counts = {v: sum(c["verdict"] == v for c in cells) for v in VERDICT_RANK}
    filters = " ".join(
        f'<label class="cellbench-verdict-{v}"><input type="checkbox" class="cellbench-filter" data-verdict="{v}" '
        f"checked> {n} {escape(v)}</label>" for v, n in counts.items() if n)
    tables, plots, unlike = [], [], unlike_marks(cells)
    marks = {id(c): cell_standing(c, this_run) for c in cells}
    for by, head, what in (("tps_by_level", "c={}", "concurrency level"), ("tps_by_rate", "{} req/s", "request rate")):
        measured = sorted((c for c in cells if (c.get("row") or {}).get(by)),
                          key=lambda c: (str(c.get("split")), not marks[id(c)].ok, str(c.get("framework"))))
        levels = sorted({k for c in measured for k in c["row"][by]}, key=rate_value)
        answered = any("fidelity" in c["row"] for c in measured)  # a column of its own: the cell's, not a level's
        heads = "".join(f"<th>{escape(head.format(level))}</th>" for level in levels) + (
            "<th>fidelity</th>" if answered else "")
        body = "".join(
            f"<tr><td>{escape(shown.label(_name(c), marks[id(c)]))}"
            f'{escape(unlike.get((c.get("framework"), c.get("split")), ""))}</td>'
            f'<td class="cellbench-verdict-{escape(c["verdict"])}">{escape(c["verdict"])}</td>'
            + "".join(f"<td>{_figure(c['row'][by].get(level), marks[id(c)])}</td>" for level in levels)
            + (f"<td>{escape(shown.at_number(c['row'].get('fidelity', MISSING), marks[id(c)]))}</td>"
               if answered else "") + "</tr>"
            for c in measured)
        legend = shown.legend({_name(c): marks[id(c)] for c in measured})
        tables.append(f'<table class="cellbench-throughput"><tr><th>cell</th><th>verdict</th>{heads}</tr>{body}</table>'
                      f"<p>Output tok/s at each {what}.{_legend_html(legend)}</p>" if measured else "")
        plots.append(_throughput_plots(measured, by, [marks[id(c)] for c in measured]))
    plots[0] += _frontier_plots([c for c in cells if marks[id(c)].ok]) + _latency_plots(cells, marks)
    skipped = sorted(f"{c.get('framework')} {c.get('split')}" for c in cells if c["verdict"] == "skipped")
    skipped_line = f"<p>Skipped: {escape(', '.join(skipped))}.</p>" if skipped else ""
    return (f'<div class="cellbench-summary">{verdict_css()}<h2>cellbench</h2>'
            f"<p>Verdicts (untick to hide those rows): {filters}</p>{tables[0]}{plots[0]}{tables[1]}{plots[1]}"
            f"{skipped_line}{FILTER_SCRIPT}</div>")


def _name(cell: dict[str, Any]) -> str:
    return f"{cell.get('framework')} {cell.get('split')}"


def _figure(value: float | None, standing: Standing) -> str:
    """A figure of the table, with its marks where its cell does not stand ok."""
    return escape(MISSING if value is None else shown.at_number(format(value, ".1f"), standing))


def _legend_html(lines: list[str]) -> str:
    return (" Marked figures stand in no order: " + escape("; ".join(lines)) + ".") if lines else ""


def _throughput_plots(measured: list[dict[str, Any]], by: str, marks: list[Standing]) -> str:
    """One output tok/s plot per split, framework lines, against concurrency (`tps_by_level`) or
    request rate (`tps_by_rate`): splits, and the two kinds of level, are never drawn on one axis.
    A cell that does not stand ok is labelled with its marks."""
    from bench.reports.drawing import CONCURRENCY_AXIS, RATE_AXIS
    from bench.reports.plots import throughput_png  # matplotlib: only for a report

    rates = by == "tps_by_rate"
    images = []
    for split in sorted({str(c.get("split")) for c in measured}, key=lambda s: (s != "chat", s)):
        series = {shown.label(str(c.get("framework")), mark): {rate_value(k): v for k, v in c["row"][by].items()
                                                               if k != "inf"}
                  for c, mark in zip(measured, marks, strict=True) if str(c.get("split")) == split}
        title = f"Output throughput{' against request rate' if rates else ''} ({split})"
        png = base64.b64encode(throughput_png(series, title, RATE_AXIS if rates else CONCURRENCY_AXIS)).decode()
        alt = f"output tok/s against {'request rate' if rates else 'concurrency'}, {split}"
        images.append(f'<img class="cellbench-throughput-plot" alt="{escape(alt)}" '
                      f'src="data:image/png;base64,{png}" width="560">')
    return "".join(images)


def _frontier_plots(ok: list[dict[str, Any]]) -> str:
    """Per split, output tok/s against server peak memory at each concurrency, the frontier marked
    (bench.reports.lenses), over the cells that stand ok and have both figures; "" without two."""
    from bench.reports.drawing import png
    from bench.reports.lenses import Point, draw  # matplotlib: only for a report

    images = []
    for split in sorted({str(c.get("split")) for c in ok}, key=lambda s: (s != "chat", s)):
        cells = [c for c in ok if str(c.get("split")) == split]
        levels = sorted({int(k) for c in cells for k in (c.get("row") or {}).get("memory_by_level", {})})
        panels = [(f"c={level}", [Point(str(c.get("framework")), float(memory), float(tps), {}) for c in cells
                                  if (memory := c["row"].get("memory_by_level", {}).get(str(level))) is not None
                                  and (tps := c["row"].get("tps_by_level", {}).get(str(level))) is not None])
                  for level in levels]
        fig = draw(panels, split)
        if fig is not None:
            data = base64.b64encode(png(fig)).decode()
            images.append(f'<img class="cellbench-frontier-plot" alt="output tok/s against server peak memory, '
                          f'{escape(split)}" src="data:image/png;base64,{data}" width="720">')
    return "".join(images)


def _latency_plots(cells: list[dict[str, Any]], marks: dict[int, Any]) -> str:
    """Per split, latency against output tok/s across levels, each framework's frontier and the overall
    one (bench.reports.lenses.latency); a cell that does not stand ok drawn, on no frontier."""
    from bench.reports.drawing import png
    from bench.reports.lenses.latency import LATENCIES, draw  # matplotlib: only for a report
    from bench.reports.lenses.latency import LatencyPoint as At

    images = []
    for split in sorted({str(c.get("split")) for c in cells if c.get("row")}, key=lambda s: (s != "chat", s)):
        mine = [c for c in cells if str(c.get("split")) == split and c.get("row")]
        panels = [(name, [At(str(c.get("framework")), f"c={level}", float(tps), float(figures[k]), marks[id(c)].ok)
                          for c in mine for level, figures in c["row"].get("latency_by_level", {}).items()
                          if figures[k] is not None and (tps := c["row"]["tps_by_level"].get(level)) is not None])
                  for k, (_, _, name) in enumerate(LATENCIES)]
        fig = draw(panels, sorted({str(c.get("framework")) for c in mine}), split)
        if fig is not None:
            data = base64.b64encode(png(fig)).decode()
            images.append(f'<img class="cellbench-latency-frontier-plot" alt="latency against output tok/s, '
                          f'{escape(split)}" src="data:image/png;base64,{data}" width="900">')
    return "".join(images)


# pytest-html renders its rows with JavaScript and renders them again on every sort and on its own
# outcome filters, so the verdict filter hides rows by class and re-applies after each render. The
# Result column's text is pytest's outcome, which pytest-html also filters and sorts on (its data,
# not the cell): only the shown text is replaced by the verdict, where the verdict is not ok.
FILTER_SCRIPT = """<style>.cellbench-filtered {display: none}</style><script>
document.addEventListener("DOMContentLoaded", () => {
  const hidden = new Set();
  const apply = () => document.querySelectorAll("#results-table tbody.results-table-row").forEach((row) => {
    const key = row.querySelector(".col-verdict span[data-sort]")?.dataset.sort || "";
    const verdict = key.replace(/^[0-9]+-/, "");
    row.classList.toggle("cellbench-filtered", hidden.has(verdict));
    const result = row.querySelector(".col-result");
    if (result && verdict && !["ok", "skipped"].includes(verdict) && !result.dataset.outcome) {
      result.dataset.outcome = result.textContent;
      result.title = "pytest's outcome: " + result.textContent;
      result.textContent = verdict.toUpperCase();
    }
  });
  document.querySelectorAll("input.cellbench-filter").forEach((box) => box.addEventListener("change", () => {
    box.checked ? hidden.delete(box.dataset.verdict) : hidden.add(box.dataset.verdict);
    apply();
  }));
  const table = document.getElementById("results-table");
  if (table) new MutationObserver(apply).observe(table, {childList: true});
  apply();
});
</script>"""
