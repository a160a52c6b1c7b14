"""Trace and ramp levels in the reports: their plot file names and CSV level text are their own,
never a rate level's (REPORT.md, the HTML report and `cellbench compare` read them by
`level_label`; tests/cells/test_trace_cells.py checks REPORT.md on a real cell)."""

from __future__ import annotations

from bench.core.level_run import OpenLoop, Ramp, TraceSchedule
from bench.reports.csv_export import level_text
from bench.reports.plots import latency_png

TRACE = OpenLoop(2.0, max_concurrency=4, trace=TraceSchedule("my trace.jsonl", "0123abcd" * 8, "mooncake", (0.0, 1.0)))
RAMPED = OpenLoop(4.0, ramp=Ramp("linear", 0.4))


def test_a_trace_or_ramp_level_has_a_plot_of_its_own():
    assert latency_png(TRACE.key) == "latency_trace_my-trace_0123abcd_m4.png"
    assert latency_png(RAMPED.key) == "latency_r4_linear-ramp-from-0.4-req-s.png"
    assert latency_png(OpenLoop(4.0).key) == "latency_r4.png" and latency_png(8) == "latency_c8.png"


def test_the_csv_names_a_trace_or_ramp_level_by_its_label():
    assert level_text(TRACE.key) == "trace my trace.jsonl"
    assert level_text(RAMPED.key) == "rate=4, linear ramp from 0.4 req/s"
    assert level_text(OpenLoop(4.0).key) == "rate=4" and level_text(("concurrency", 8)) == "c=8"
