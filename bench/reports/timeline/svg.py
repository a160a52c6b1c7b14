"""The request timelines in an HTML review row's extras (bench.plugins.html): per level, every request of the cell as a
bar on its lane (bench.reports.timeline), drawn as inline SVG, so the page needs no script and no
network: queued in grey, to first token in amber, decoding in blue, slow gaps in red, a failed
request outlined in red and crossed; warm-up requests paler. Each bar's tooltip gives its index,
prompt and the milliseconds of each part."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from bench.reports.timeline import Bar, LevelTimeline, read_timelines

WIDTH = 760  # px of the time axis
LANE = 9  # px per lane
COLOURS = {"queued": "#b0b0b0", "to first token": "#f0a830", "decoding": "#3a78c2", "slow gap": "#d62728"}


def _seconds(t: float) -> str:
    return f"{t * 1e3:.0f} ms" if t < 1 else f"{t:.2f} s"


def _bar(bar: Bar, x: Any, y: int) -> str:
    tip = [f"{'warm-up ' if bar.warmup else ''}request {bar.index} ({bar.prompt})"]
    tip += [f"{p.name}: {(p.end - p.start) * 1e3:.1f} ms" for p in bar.parts]
    if bar.error:
        tip.append(f"failed: {bar.error}")
    shapes = [f'<rect x="{x(p.start):.1f}" y="{y + (2 if p.name == "slow gap" else 1)}" '
              f'width="{max(x(p.end) - x(p.start), 0.5):.1f}" '
              f'height="{LANE - (4 if p.name == "slow gap" else 2)}" fill="{COLOURS[p.name]}"/>' for p in bar.parts]
    if bar.error:
        x0, x1 = x(bar.start), max(x(bar.end), x(bar.start) + 3)
        shapes.append(f'<rect x="{x0:.1f}" y="{y}" width="{x1 - x0:.1f}" height="{LANE}" fill="none" stroke="#d62728"/>'
                      f'<line x1="{x0:.1f}" y1="{y}" x2="{x1:.1f}" y2="{y + LANE}" stroke="#d62728"/>')
    shapes.append(f'<line x1="{x(bar.start):.1f}" y1="{y}" x2="{x(bar.start):.1f}" y2="{y + LANE}" stroke="#fff"/>')
    opacity = ' opacity="0.45"' if bar.warmup else ""
    return f'<g class="request"{opacity}><title>{escape(chr(10).join(tip))}</title>{"".join(shapes)}</g>'


def level_svg(cell: str, level: LevelTimeline) -> str:
    """One level's timeline as an SVG element with a caption, a time axis and a legend."""
    start = min(b.start for b in level.bars)
    span = max(max(b.end for b in level.bars) - start, 1e-6)

    def x(t: float) -> float:
        return 40 + (t - start) / span * WIDTH

    height = level.lanes * LANE + 34
    bars = "".join(_bar(b, x, 4 + b.lane * LANE) for b in level.bars)
    axis_y = level.lanes * LANE + 8
    ticks = "".join(f'<text x="{x(start + span * k / 4):.0f}" y="{axis_y + 12}" font-size="10" text-anchor="middle">'
                    f'{_seconds(span * k / 4)}</text>' for k in range(5))
    legend = "".join(f'<tspan fill="{c}">■</tspan> {escape(n)} ' for n, c in COLOURS.items())
    gap = (f"slow gap: over {level.slow_gap_s * 1e3:.0f} ms" if level.slow_gap_s is not None else "no chunk gaps")
    failed = sum(1 for b in level.bars if b.error)
    caption = (f"{cell} {level.label}: {len(level.bars)} requests on {level.lanes} lane{'s' * (level.lanes != 1)}, "
               f"{failed} failed; {gap}")
    return (f'<figure class="timeline" data-level="{escape(level.label)}"><figcaption>{escape(caption)}</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH + 80}" height="{height + 14}" role="img" '
            f'aria-label="{escape(caption)}">{bars}'
            f'<line x1="40" y1="{axis_y}" x2="{40 + WIDTH}" y2="{axis_y}" stroke="#666"/>{ticks}'
            f'<text x="40" y="{axis_y + 26}" font-size="10">{legend}</text></svg></figure>')


def timelines_html(result_path: str | None, result: Any) -> str | None:
    """Every level's timeline of the cell whose result is at `result_path`, or None without a request log."""
    if not result_path or not result or not result.get("requests_file"):
        return None
    sidecar = Path(result_path).parent / str(result["requests_file"])
    if not sidecar.is_file():
        return None
    cell = f"{result['framework']['name']} {result['split']}"
    levels = [tl for tl in read_timelines(sidecar) if tl.bars]
    if not levels:
        return None
    drawn = "".join(level_svg(cell, tl) for tl in levels)
    return f'<div class="timelines"><p>Request timelines</p>{drawn}</div>'
