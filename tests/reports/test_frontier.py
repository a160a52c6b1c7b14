"""Throughput against memory (bench.reports.lenses): the frontier is right by hand, REPORT.md lists
the points by memory (not by speed) with who beats whom, a result that does not stand ok is named
and not plotted, and the chart is written and embedded."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from bench.core import figures
from bench.core.figures.declare import Sampled
from bench.core.figures.memory import MIB
from bench.core.result.files import write_result
from bench.core.rounds import combine_rounds
from bench.host.samples import MemorySample
from bench.reports import plots
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.csv_export import comparison_csv
from bench.reports.lenses import FRONTIER_PNG, Point, on_frontier
from bench.reports.markdown import write_report
from bench.reports.markdown.rows import figure_rows
from tests.support.results import synthetic_result, write_cell


def point(name: str, mib: float, tps: float) -> Point:
    return Point(name, mib * MIB, tps, {})


def test_the_frontier_by_hand():
    points = [point("a", 500, 100), point("b", 800, 300), point("c", 900, 250), point("d", 1200, 300),
              point("e", 1500, 400)]
    assert on_frontier(points) == {"a": None, "b": None, "c": "b", "d": "b", "e": None}
    # a tie on both is no beating; the same speed with less memory is
    assert on_frontier([point("x", 500, 100), point("y", 500, 100)]) == {"x": None, "y": None}
    assert on_frontier([point("x", 500, 100), point("y", 600, 100)]) == {"x": None, "y": "x"}


def _with_memory(path: Path, peaks_mib: dict[int, float], reserved_mib: int | None = None) -> None:
    """Give each level of the result at `path` a memory block read from one sample of that peak (and
    the memory its server stated it set aside)."""
    result = json.loads(path.read_text())
    for level in result["levels"]:
        seen = Sampled.over(0.0, 2.0, 1.0, [MemorySample(1.0, int(peaks_mib[level["concurrency"]] * MIB),
                                                         8 << 30, None, None)], [],
                            None if reserved_mib is None else reserved_mib * MIB)
        figures.attach(level, figures.watched(seen))
    write_result(path, result)


def test_report_lists_points_by_memory_names_who_beats_whom_and_sinks_what_is_not_ok(tmp_path):
    root = tmp_path / "results"
    cells = {"llamacpp": (1.0, {1: 300, 2: 320}), "vllm": (1.6, {1: 2400, 2: 2500}),
             "mlx_lm": (0.5, {1: 700, 2: 710}), "ollama": (3.0, {1: 100, 2: 100})}
    for fw, (speed, peaks) in cells.items():
        path = write_cell(root, framework=fw, speed=speed, failed=4 if fw == "ollama" else 0)
        _with_memory(path, peaks, 1024 if fw == "vllm" else None)
    comparison = read_comparison(write_comparison(path.parent, machine="intelxeonprocessor"))
    assert comparison["standing"]["ollama"]["marks"], "the test needs ollama not to stand ok"
    report = write_report(path.parent, comparison).read_text()
    section = report.split("## Memory against throughput\n", 1)[1].split("\n## ", 1)[0]
    c1 = section.split("### Concurrency 1\n", 1)[1].split("###", 1)[0]
    rows = [line.split(" | ")[0].strip("| ") for line in c1.splitlines() if line.startswith("| ")][1:]
    assert rows == ["llamacpp", "mlx_lm", "vllm"]  # by memory, least first; not by speed
    assert "| mlx_lm | 700 | " in c1 and "| off: llamacpp beats it on both |" in c1
    assert "| llamacpp | 300 | " in c1 and "| vllm | 2400 | " in c1 and c1.count("| on it |") == 2
    assert "Not a point: ollama: degraded" in c1  # faster and smaller, but not ok: named, not a point
    assert (path.parent / plots.PLOTS_DIR / FRONTIER_PNG).is_file()
    assert f"]({plots.PLOTS_DIR}/{FRONTIER_PNG})" in report
    # Between frameworks lists them by name with their memory, the one not ok last, marked at every figure
    between = report.split("## Between frameworks\n", 1)[1].split("\n## ", 1)[0]
    c1 = between.split("### Concurrency 1\n", 1)[1].split("###", 1)[0]
    table = [line.split(" | ") for line in c1.splitlines() if line.startswith("| ")][1:]
    assert [row[0].strip("| ") for row in table] == ["llamacpp", "mlx_lm", "vllm", "ollama (degraded)"]
    assert table[0][3].startswith("300") and all(cell.endswith("(degraded)") for cell in table[3][1:3])
    assert table[2][3].rstrip(" |") == "2400 (1024 set aside at start)"  # the pool vLLM stated, apart
    faster = [line for line in c1.splitlines() if " is faster than " in line]
    assert faster and all("; memory: " in line for line in faster)
    assert "  - vllm is faster than llamacpp by " in c1  # 1.6x the output tok/s, and 8x the memory
    assert "; memory: vllm 2400 MiB, llamacpp 300 MiB (the faster holds 8x)" in c1
    # the level table has the row, in MiB
    level_table = report.split("## Concurrency 1\n", 1)[1].split("\n## ", 1)[0]
    assert any(line.startswith("| Server peak memory (MiB) |") and "| 300 |" in line
               for line in level_table.splitlines())
    aside = next(line for line in level_table.splitlines() if line.startswith("| Of it, set aside at start (MiB) |"))
    assert "| 1024 |" in aside and aside.count("| 1024 |") == 1


def test_without_memory_readings_there_is_no_section_and_no_chart(tmp_path):
    root = tmp_path / "results"
    for fw in ("llamacpp", "vllm"):
        path = write_cell(root, framework=fw)
    report = write_report(path.parent, read_comparison(write_comparison(path.parent))).read_text()
    assert "## Memory against throughput" not in report
    assert "Server peak memory" not in report  # no row, no column where no framework has a reading
    assert not (path.parent / plots.PLOTS_DIR / FRONTIER_PNG).exists()


def test_rounds_show_the_memory_interval_in_the_report_row_and_the_csv(tmp_path):
    rounds = []
    for i, peak in enumerate((800, 820, 810)):
        level = synthetic_result()["levels"][0]
        reading = MemorySample(1.0, peak * MIB, None, None, None)
        figures.attach(level, figures.watched(Sampled.over(0.0, 2.0, 1.0, [reading], [])))
        rounds.append(dict(level, round=i + 1))
    combined = combine_rounds(rounds)
    (title, render), *_ = [r for r in figure_rows([combined]) if r[0] == "Server peak memory (MiB)"]
    block = figures.block_of(combined, "memory")["ci95"]["peak_bytes"]
    assert render(combined) == f"810 [{block['low'] / MIB:.0f}, {block['high'] / MIB:.0f}]"
    path = write_cell(tmp_path / "results")
    result = json.loads(path.read_text())
    result["levels"] = [dict(combined, concurrency=1)]
    write_result(path, result)
    comparison = read_comparison(write_comparison(path.parent))
    (row,) = [r for r in csv.DictReader(io.StringIO(comparison_csv([comparison])))
              if r["metric"] == "memory.peak_bytes"]
    assert (row["unit"], int(float(row["value"]))) == ("bytes", 810 * MIB)
    assert float(row["ci95_low"]) == block["low"] and float(row["ci95_high"]) == block["high"]
