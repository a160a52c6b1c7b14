"""The small plot in an HTML review row's extras: one cell's output tok/s and TTFT p50 per level."""

from __future__ import annotations

from collections.abc import Callable

from bench.core.level_run import level_key, rate_value
from bench.core.result.model import Level, Result
from bench.reports.drawing import CONCURRENCY_AXIS, RATE_AXIS, figure, log2_axis, png


def cell_plot(result: Result) -> bytes:
    """A small PNG of one cell: output tok/s and TTFT p50 per level (an HTML report extra), against
    concurrency or, for an open-loop cell, request rate (a rate of inf is left out)."""
    # A trace level stands at the rate its offsets offered, as its request_rate says.
    keyed = {level_key(lv): lv for lv in result["levels"]}
    by_level = {key[1] if key[0] != "trace" else rate_value(lv["request_rate"]): lv for key, lv in keyed.items()}
    by_level = {x: lv for x, lv in by_level.items() if x != float("inf")}
    open_loop = any(key[0] != "concurrency" for key in keyed)
    levels = sorted(by_level)
    fig = figure(6, 2.6)
    panels: tuple[tuple[str, Callable[[Level], float | None]], ...] = (
        ("output (tok/s)", lambda lv: lv["output_throughput_tps"]),
        ("TTFT p50 (ms)", lambda lv: lv["ttft_ms"]["p50"]),
    )
    for ax, (label, read) in zip(fig.subplots(1, 2), panels, strict=True):
        points = [(c, read(by_level[c])) for c in levels if by_level[c]["successful"]]
        ax.plot([c for c, _ in points], [v for _, v in points], marker="o")
        log2_axis(ax, levels, RATE_AXIS if open_loop else CONCURRENCY_AXIS)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    machine = result["machine"]["slug"]
    fig.suptitle(f"{result['framework']['name']} — {result['model']['results_name']} ({result['split']}) on {machine}",
                 fontsize=9)
    return png(fig)
