"""Latency against throughput (bench.reports.lenses.latency): the frontiers right by hand, REPORT.md
lists the overall one by latency and each framework's own, a result that does not stand ok is drawn
and named but never on a frontier, and the chart is written, embedded, and removed when it no
longer applies."""

from __future__ import annotations

import json
from pathlib import Path

from bench.core.result.files import write_result
from bench.reports import plots
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.lenses.latency import LATENCY_FRONTIER_PNG, LatencyPoint, frontier
from bench.reports.markdown import write_report
from tests.support.results import write_cell

# framework -> concurrency -> (output tok/s, TTFT p50, TTFT p90, E2E latency p50), in tok/s and ms
FIGURES = {
    "llamacpp": {1: (50, 10, 12, 500), 2: (90, 15, 20, 600), 4: (80, 30, 40, 1200)},
    "vllm": {1: (40, 8, 9, 700), 2: (120, 25, 30, 650), 4: (200, 60, 80, 900)},
    "ollama": {1: (500, 1, 1, 100), 2: (900, 2, 2, 110), 4: (990, 3, 3, 120)},  # fastest, but not ok
}


def _with_figures(path: Path, figures: dict[int, tuple[float, float, float, float]]) -> None:
    result = json.loads(path.read_text())
    for level in result["levels"]:
        tps, p50, p90, e2el = figures[level["concurrency"]]
        level["output_throughput_tps"] = tps
        level["ttft_ms"].update(p50=p50, p90=p90)
        level["e2el_ms"].update(p50=e2el)
    write_result(path, result)


def test_frontiers_by_hand():
    At = LatencyPoint
    p = [At("a", "c=1", 40, 8, True), At("a", "c=2", 120, 25, True), At("b", "c=1", 50, 10, True),
         At("b", "c=4", 80, 30, True), At("z", "c=1", 999, 1, False)]
    assert [(q.framework, q.level) for q in frontier(p)] == [("a", "c=1"), ("b", "c=1"), ("a", "c=2")]
    assert frontier([q for q in p if q.framework == "z"]) == [], "a result not ok is on no frontier, not even its own"
    tie = [At("x", "c=1", 10, 5, True), At("y", "c=1", 10, 5, True)]
    assert frontier(tie) == tie, "a tie on both is no beating"


def test_report_gives_the_overall_and_own_frontiers_and_names_what_is_not_ok(tmp_path):
    root = tmp_path / "results"
    for fw, figures in FIGURES.items():
        path = write_cell(root, framework=fw, levels=(1, 2, 4), failed=4 if fw == "ollama" else 0)
        _with_figures(path, figures)
    comparison = read_comparison(write_comparison(path.parent, machine="intelxeonprocessor"))
    assert comparison["standing"]["ollama"]["marks"], "the test needs ollama not to stand ok"
    report = write_report(path.parent, comparison).read_text()
    section = report.split("## Latency against throughput\n", 1)[1].split("\n## ", 1)[0]
    ttft = section.split("### TTFT p50\n", 1)[1].split("###", 1)[0]
    rows = [line.split(" | ")[0].strip("| ") for line in ttft.splitlines() if line.startswith("| ")][1:]
    assert rows == ["vllm c=1", "llamacpp c=1", "llamacpp c=2", "vllm c=2", "vllm c=4"]  # by latency
    assert "| llamacpp c=2 | 15.0 | 90.0 |" in ttft
    assert "Each framework's own frontier: llamacpp: c=1, c=2; vllm: c=1, c=2, c=4." in ttft  # c=4: c=2 beats it
    e2el = section.split("### E2E latency p50\n", 1)[1]
    assert [line.split(" | ")[0].strip("| ") for line in e2el.splitlines() if line.startswith("| ")][1:] == \
        ["llamacpp c=1", "llamacpp c=2", "vllm c=2", "vllm c=4"]  # vllm c=1: c=2 is faster and quicker
    assert "ollama" not in section.split("Drawn, on no frontier:")[0], "never on a frontier, however fast"
    assert "Drawn, on no frontier: ollama (degraded" in section
    png = path.parent / plots.PLOTS_DIR / LATENCY_FRONTIER_PNG
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"]({plots.PLOTS_DIR}/{LATENCY_FRONTIER_PNG})" in report
    assert "Latency against output throughput across levels" in report  # its caption

    # one framework left standing ok: one point per level, still a frontier of its own; none ok: none
    for fw in ("llamacpp", "vllm"):
        for stale in path.parent.glob(f"{fw}_*"):
            stale.unlink() if stale.is_file() else None
    comparison = read_comparison(write_comparison(path.parent, machine="intelxeonprocessor"))
    report = write_report(path.parent, comparison).read_text()
    assert "## Latency against throughput" not in report and not png.exists(), "a stale chart is never left"
