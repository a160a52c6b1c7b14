"""The site's one page: HTML with its own CSS and a few lines of its own JavaScript (sorting), every
chart inline SVG, so it opens from a folder or any static host with no network at view time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from html import escape

from bench.cli.site.gather import TREND_FIGURES, Z95, SiteRow, SplitView, Trend, Week

MARKS = {"regression": ("▼", "#c62828"), "improvement": ("▲", "#2e7d32"), "no detectable change": ("=", "#777"),
         "cannot tell": ("?", "#777")}

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1em}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:.25em .6em;border-bottom:1px solid #eee;text-align:left}
th[data-sort]{cursor:pointer;user-select:none}th[data-sort]:after{content:" \\2195";color:#aaa}
td.num{text-align:right;font-variant-numeric:tabular-nums}tbody.sunk td{background:#fafafa;color:#777}
.verdict-ok{color:#2e7d32}.verdict-bad{color:#c62828;font-weight:600}.note{color:#666;font-size:.9em}
.trends{display:flex;flex-wrap:wrap;gap:1em}.trend{border:1px solid #eee;padding:.4em}
nav a{margin-right:1em}
"""

SCRIPT = """
document.querySelectorAll("table.cells").forEach((table) => {
  table.querySelectorAll("th[data-sort]").forEach((th, column) => {
    th.addEventListener("click", () => {
      const down = th.dataset.dir !== "down";
      th.dataset.dir = down ? "down" : "up";
      const key = (tr) => tr.children[th.cellIndex].dataset.value ?? tr.children[th.cellIndex].textContent;
      const number = th.dataset.sort === "num";
      table.querySelectorAll("tbody").forEach((body) => {  // each part apart: what is not ok stays below
        const rows = [...body.rows].sort((a, b) => {
          const x = key(a), y = key(b);
          const c = number ? (parseFloat(x) || 0) - (parseFloat(y) || 0) : String(x).localeCompare(String(y));
          return down ? -c : c;
        });
        rows.forEach((tr) => body.appendChild(tr));
      });
    });
  });
});
"""


def _num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def sparkline(row: SiteRow) -> str:
    """Output tok/s over the row's levels as a small inline SVG, each level in its tooltip."""
    points = [(label, tps) for label, tps, _ in row.levels if tps is not None]
    if not points:
        return ""
    high = max(tps for _, tps in points) or 1.0
    step = 110 / max(len(points) - 1, 1)
    xy = [(5 + k * step, 25 - 20 * tps / high) for k, (_, tps) in enumerate(points)]
    tip = ", ".join(f"{label}: {tps:.1f} tok/s" for label, tps in points)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2"/>' for x, y in xy)
    return (f'<svg class="spark" width="120" height="30" role="img" aria-label="{escape(tip)}"><title>{escape(tip)}'
            f'</title><polyline fill="none" stroke="#3a78c2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in xy)}"/>'
            f'<g fill="#3a78c2">{dots}</g></svg>')


def _row(row: SiteRow) -> str:
    label, tps, ttft = row.top or ("—", None, None)
    tip = "\n".join(f"{k}: {v}" for k, v in row.provenance.items())
    verdict = ("verdict-ok", "✔ ok") if row.ok else ("verdict-bad", f"✖ {row.standing}")
    return (f'<tr class="cell" data-framework="{escape(row.framework)}" data-ok="{str(row.ok).lower()}" '
            f'title="{escape(tip)}"><td>{escape(row.framework)}</td>'
            f'<td class="{verdict[0]}">{escape(verdict[1])}</td><td>{escape(label)}</td>'
            f'<td class="num" data-value="{"" if tps is None else tps}">{_num(tps)}</td><td>{sparkline(row)}</td>'
            f'<td class="num" data-value="{"" if ttft is None else ttft}">{_num(ttft)}</td>'
            f'<td>{escape(row.provenance.get("framework version", ""))}</td>'
            f"<td>{escape(row.finished_at[:10])}</td></tr>")


def _table(view: SplitView) -> str:
    head = ('<thead><tr><th data-sort="text">framework</th><th data-sort="text">verdict</th><th>level</th>'
            '<th data-sort="num">output tok/s</th><th>tok/s over levels</th><th data-sort="num">TTFT p50 (ms)</th>'
            '<th data-sort="text">version</th><th data-sort="text">finished</th></tr></thead>')
    ok = "".join(_row(r) for r in view.rows if r.ok)
    sunk = "".join(_row(r) for r in view.rows if not r.ok)
    return (f'<table class="cells">{head}<tbody class="ok">{ok}</tbody><tbody class="sunk">{sunk}</tbody></table>'
            '<p class="note">Each framework\'s newest result, at its highest level. No default ranking: click a '
            "column to sort. A result that does not stand ok stays below, marked ✖ with why. Hover a row for its "
            "provenance (framework version, run id, adapter and profile hashes, harness commit).</p>")


def _chart(trend: Trend, key: str, name: str) -> str:
    """One figure of a trend across weeks: the line through the weeks that stand ok, the noise band
    around each, and the decision of `compare` against the week before above each point."""
    weeks = list(trend.weeks)
    values = [w.figures.get(key) for w in weeks]
    sd = trend.band.get(key)
    spread = math.exp(Z95 * sd) if sd else 1.0
    high = max((v * spread for v in values if v is not None), default=1.0) * 1.15 or 1.0
    width, height, left, top = 420, 120, 44, 14
    step = (width - left - 20) / max(len(weeks) - 1, 1)

    def x(k: int) -> float:
        return left + k * step

    def y(v: float) -> float:
        return top + (height - top - 22) * (1 - v / high)

    parts = [f'<line x1="{left}" y1="{y(0):.1f}" x2="{width - 10}" y2="{y(0):.1f}" stroke="#999"/>',
             f'<text x="4" y="{y(high / 1.15):.1f}" font-size="10">{high / 1.15:.0f}</text>']
    ok = [(k, v) for k, (w, v) in enumerate(zip(weeks, values, strict=True)) if w.ok and v is not None]
    if sd and ok:
        upper = " ".join(f"{x(k):.1f},{y(v * spread):.1f}" for k, v in ok)
        lower = " ".join(f"{x(k):.1f},{y(v / spread):.1f}" for k, v in reversed(ok))
        parts.append(f'<polygon class="band" points="{upper} {lower}" fill="#3a78c2" opacity="0.15"/>')
    if len(ok) > 1:
        line = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in ok)
        parts.append(f'<polyline fill="none" stroke="#3a78c2" points="{line}"/>')
    days = [w.finished_at[5:10] for w in weeks]
    for k, (w, v) in enumerate(zip(weeks, values, strict=True)):
        day = days[k] if days.count(days[k]) == 1 else w.finished_at[5:16].replace("T", " ")  # a day's runs: times
        parts.append(f'<text x="{x(k):.1f}" y="{height - 4}" font-size="9" text-anchor="middle">{escape(day)}</text>')
        if v is None:
            continue
        parts.append(_point(w, k, x(k), y(v), v, key, name))
    label = f"{name} at {trend.level}"
    return (f'<svg class="trend-chart" data-figure="{escape(key)}" width="{width}" height="{height}" role="img" '
            f'aria-label="{escape(label)}"><text x="{left}" y="10" font-size="10">{escape(label)}</text>'
            f'{"".join(parts)}</svg>')


def _point(week: Week, k: int, px: float, py: float, value: float, key: str, name: str) -> str:
    tip = [f"{week.run_id} ({week.finished_at[:10]}): {name} {value:.1f}", f"standing: {week.standing}"]
    decision = week.decisions.get(key)
    if decision:
        tip.append(f"against the week before: {decision}")
    elif k and week.not_judged:
        tip.append(f"not judged: {week.not_judged}")
    dot = (f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="#3a78c2"/>' if week.ok else
           f'<text x="{px:.1f}" y="{py + 4:.1f}" font-size="12" text-anchor="middle" fill="#888">×</text>')
    mark = ""
    if decision:
        glyph, colour = MARKS.get(decision, ("?", "#777"))
        mark = (f'<text class="decision" data-decision="{escape(decision)}" x="{px:.1f}" y="{py - 7:.1f}" '
                f'font-size="11" text-anchor="middle" fill="{colour}">{glyph}</text>')
    return f'<g class="week" data-run="{escape(week.run_id)}"><title>{escape(chr(10).join(tip))}</title>{dot}{mark}</g>'


def _trends(view: SplitView) -> str:
    blocks = [f'<div class="trend" data-framework="{escape(t.framework)}"><h3>{escape(t.framework)}</h3>'
              + "".join(_chart(t, key, name) for key, name in TREND_FIGURES)
              + f'<p class="note">Band: {escape(t.floor)}, ±1.96 sd around each week. ▼ regression, ▲ improvement, '
              "= no detectable change, ? cannot tell: <code>cellbench compare</code> of each run against the one "
              "before; × a run that does not stand ok (not judged).</p></div>" for t in view.trends]
    return f'<div class="trends">{"".join(blocks)}</div>'


def anchor(view: SplitView) -> str:
    return escape(f"{view.model}-{view.machine}-{view.split}")


def render(views: Sequence[SplitView], source: str) -> str:
    """The whole page."""
    made = datetime.now(timezone.utc).isoformat(timespec="seconds")
    nav = "".join(f'<a href="#{anchor(v)}">{escape(v.model)} · {escape(v.machine)} · {escape(v.split)}</a>'
                  for v in views)
    sections = "".join(
        f'<section id="{anchor(v)}" data-model="{escape(v.model)}" data-machine="{escape(v.machine)}" '
        f'data-split="{escape(v.split)}"><h2>{escape(v.model)} · {escape(v.machine)} · {escape(v.split)}</h2>'
        f"{_table(v)}<h3>Across runs</h3>{_trends(v)}"
        + (f'<p class="note">Not results: {escape("; ".join(v.ignored))}</p>' if v.ignored else "") + "</section>"
        for v in views)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cellbench results</title>'
            f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>'
            f"<h1>cellbench results</h1><p class=\"note\">From {escape(source)}, made {made} by "
            f"<code>cellbench site</code>.</p><nav>{nav}</nav>{sections}<script>{SCRIPT}</script></body></html>")
