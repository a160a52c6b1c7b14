"""REPORT.md, plots and `python -m bench.reports.rebuild`, from a directory of synthetic results.

The directory holds a llamacpp result written as a cell writes one, with its per-request
sidecar (tests/support/results.py: no server), a second framework
("vllm", varied from it: more levels, a shared server, a bundling level, a null input count, a
reason with a pipe, no sidecar), the previous vllm run 10x slower, a file from another machine
and a broken file: every part of the report has something to show.
"""

from __future__ import annotations

import copy
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.files import read_result
from bench.core.result.model import Result
from bench.reports import markdown, plots
from bench.reports.comparison import Comparison, read_comparison, write_comparison
from bench.reports.markdown import ROWS, write_report
from bench.reports.rebuild import rebuild
from bench.reports.review.cell_plot import cell_plot
from tests.support.results import cell_dir, put, variant, write_cell

FOREIGN = "h200"

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BROKEN = "vllm_20300101T000000Z-dead.json"
PREVIOUS = "20261129T100000Z-aaaa"  # vllm's previous run


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE and len(data) > 1024
    return struct.unpack(">II", data[16:24])


def table(report: str, heading: str) -> dict[str, list[str]]:
    """The rows of the table under `## heading`, by first cell; the header row is under "header"."""
    block = report.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in block.splitlines() if line.startswith("| ")]
    return {"header": [c.strip() for c in rows[0]], **{r[0].strip(): [c.strip() for c in r[1:]] for r in rows[1:]}}


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> tuple[Path, Result]:
    """A llamacpp cell's files as a cell writes them, and its result read back."""
    path = write_cell(tmp_path_factory.mktemp("cell") / "results")
    return path, read_result(path)


@pytest.fixture(scope="module")
def built(tmp_path_factory, real) -> tuple[Path, Comparison, str]:
    """The split directory, its comparison (read back from comparison.json) and REPORT.md text."""
    real_path, template = real
    d = cell_dir(tmp_path_factory.mktemp("report") / "results", template)
    d.mkdir(parents=True)
    for name in (real_path.name, template["requests_file"]):
        shutil.copy(real_path.parent / name, d / name)
    # vllm ran in llamacpp's run, finishing after it; its previous run was 10x slower
    vllm = variant(template, framework="vllm", finished_at="2026-11-30T10:05:00+00:00", levels=[1, 2, 4],
                   share_server=True)
    vllm["verdict"] = {"verdict": "degraded", "reason": "2/12 failed: HTTP 500 | upstream",
                       "annotations": ["chunk-bundling"]}
    vllm["levels"][0]["itl_per_chunk"] = True
    c4 = vllm["levels"][2]
    c4["input_throughput_tps"] = c4["input_tokens_total"] = c4["total_token_throughput_tps"] = None
    put(d, vllm)
    put(d, variant(template, framework="vllm", run_id=PREVIOUS, levels=[1, 2, 4], share_server=True, scale=0.1))
    put(d, variant(template, run_id="20310101T000000Z-cccc", machine=FOREIGN))
    (d / BROKEN).write_text("{")
    comparison = read_comparison(write_comparison(d, machine=template["machine"]["slug"]))
    return d, comparison, write_report(d, comparison).read_text()


def test_a_comparison_file_without_a_comparisons_keys_is_refused_naming_them(built, tmp_path):
    d, comparison, _ = built
    written = (d / "comparison.json").read_text()
    broken = tmp_path / "comparison.json"
    broken.write_text(written.replace('"left_out":', '"dropped":', 1))
    with pytest.raises(ValueError, match=r"missing \['left_out'\], unknown \['dropped'\]"):
        read_comparison(broken)
    assert read_comparison(d / "comparison.json")["frameworks"] == comparison["frameworks"]


def test_title_runs_and_verdict_table(built, real):
    _, template = real
    d, comparison, report = built
    assert report.startswith(f"# cellbench results — tiny (chat) on {template['machine']['slug']}\n")
    assert f"Generated {comparison['generated_at']}" in report
    runs = table(report, "Runs")
    assert runs["llamacpp"][0] == runs["vllm"][0] == template["run_id"]
    assert runs["header"][-1] == "Standing" and runs["llamacpp"][-1] == "ok" and runs["vllm"][-1] == "degraded"
    assert f"This run: {template['run_id']} (the run of the newest result here)." in report
    verdicts = table(report, "Verdicts")
    assert verdicts["header"] == ["Framework", "Verdict", "Reason", "Framework version"]
    real_verdict = template["verdict"]  # ok, unless a busy host made the client the bottleneck
    notes = f" ({', '.join(real_verdict['annotations'])})" if real_verdict["annotations"] else ""
    assert verdicts["llamacpp"] == [real_verdict["verdict"] + notes, real_verdict["reason"].replace("|", r"\|"),
                                    template["framework"]["version"]]
    assert verdicts["vllm"][0] == "degraded (chunk-bundling, suspicious)"
    assert r"2/12 failed: HTTP 500 \| upstream" in report


def test_one_section_per_level_with_every_row(built):
    _, _, report = built
    assert re.findall(r"^## Concurrency (\d+)$", report, re.M) == ["1", "2", "4"]
    for level in (1, 2, 4):
        rows = table(report, f"Concurrency {level}")
        assert rows.pop("header") == ["Metric", "llamacpp", "vllm (degraded)"]
        # vllm ran other levels on one shared server: the table says so above its numbers (not at c=4,
        # where only vllm has a column)
        unlike = [markdown.UNLIKE_ROW] if level < 4 else []
        assert list(rows) == [*unlike, *(label for label, _ in ROWS)]
        assert all(len(cells) == 2 for cells in rows.values())
    c4 = table(report, "Concurrency 4")
    assert c4.pop("header")[1] == "llamacpp" and {cells[0] for cells in c4.values()} == {"—"}


def test_columns_measured_differently_say_how_where_the_numbers_are(built):
    _, _, report = built
    c1 = table(report, "Concurrency 1")
    assert c1[markdown.UNLIKE_ROW] == ["levels=[1, 2]; levels_share_server=false",
                                       "levels=[1, 2, 4]; levels_share_server=true"]
    section = report.split("## Concurrency 1\n", 1)[1].split("\n## ", 1)[0]
    assert ("Not like with like: these columns ran with different levels, levels_share_server; a difference "
            "between them may be the settings', not the frameworks'.") in section
    assert "Not like with like" not in report.split("## Concurrency 4\n", 1)[1].split("\n## ", 1)[0]


def test_columns_measured_alike_carry_no_settings_row(tmp_path, real):
    _, template = real
    d = cell_dir(tmp_path / "results", template)
    put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    put(d, variant(template, framework="vllm", run_id="20300101T000000Z-aaaa"))
    report = write_report(d, read_comparison(write_comparison(d, machine=template["machine"]["slug"]))).read_text()
    assert markdown.UNLIKE_ROW not in report and "Not like with like" not in report
    with_eos = variant(template, framework="vllm", run_id="20300101T000000Z-aaaa", finished_at="2026-11-30T10:01:00Z")
    with_eos["run_config"]["request_extras"] = {"ignore_eos": True}
    put(d, with_eos)
    report = write_report(d, read_comparison(write_comparison(d, machine=template["machine"]["slug"]))).read_text()
    row = table(report, "Concurrency 1")[markdown.UNLIKE_ROW]
    assert row[1] == 'request_extras={"ignore_eos": true}' and row[0].startswith("request_extras=")


def test_numbers_are_formatted_consistently(built, real):
    _, template = real
    _, _, report = built
    c1, c4 = table(report, "Concurrency 1"), table(report, "Concurrency 4")
    level = template["levels"][0]
    assert c1["TTFT avg (ms)"][0] == f"{level['ttft_ms']['mean']:.1f}"
    rate, bound = level["output_throughput_tps"], level["throughput_ci95"]["output_throughput_tps"]
    assert c1["Output throughput (tok/s)"][0] == f"{rate:.1f} [{bound['low']:.1f}, {bound['high']:.1f}]"
    # 8 requests cannot bound a p99: the cell says how many could (docs/metrics.md, How sure a percentile is)
    assert c1["Latency p99 (s)"][0] == f"{level['e2el_ms']['p99'] / 1000:.2f} (n<299)"
    assert c1["Wall time (s)"][0] == f"{level['wall_time_s']:.2f}"
    assert c1["Successful / Failed"][0] == f"{level['successful']} / {level['failed']}"
    assert c1["Client CPU share"][0] == f"{level['client']['cpu_share'] * 100:.1f}%"
    assert c1["ITL avg (ms)"][1].endswith(" (per chunk) (degraded)")  # a degraded result's figures say so
    figures = [row[1] for label, row in c1.items() if label not in ("header", markdown.UNLIKE_ROW) and row[1] != "N/A"]
    assert figures and all(f.endswith(" (degraded)") for f in figures)
    assert not any("(degraded)" in row[0] for row in c1.values())  # llamacpp stands ok
    assert c4["Input throughput (tok/s)"][1] == "N/A" and c4["Total throughput (tok/s)"][1] == "N/A"
    # at c=4 vllm stands alone: its column is headed with its mark, its figures beside nothing need none
    assert c4["header"][2] == "vllm (degraded)" and "(degraded)" not in c4["Output throughput (tok/s)"][1]


def test_warnings_suspicious_and_ignored_files_are_listed(built):
    _, _, report = built
    assert "- levels: llamacpp=[1, 2], vllm=[1, 2, 4]" in report
    assert "- levels_share_server: llamacpp=false, vllm=true" in report
    suspicious = rf"^- vllm: output throughput against run {PREVIOUS}: c=1: .*10\.0x higher"
    assert re.search(suspicious, report, re.M)
    assert f"- llamacpp_20310101T000000Z-cccc.json: machine {FOREIGN}, this is " in report
    assert f"- {BROKEN}: unreadable:" in report


def test_embedded_plots_exist_as_fixed_size_pngs(built):
    d, _, report = built
    links = re.findall(r"!\[[^]]+\]\((plots/[^)]+)\)", report)
    assert links == ["plots/throughput.png", "plots/latency_c1.png", "plots/latency_c2.png", "plots/latency_c4.png",
                     "plots/latency_frontier.png"]
    sizes = {link: png_size((d / link).read_bytes()) for link in links}
    assert sizes.pop("plots/throughput.png") == (700, 450)
    assert sizes.pop("plots/latency_frontier.png") == (1140, 340), "three panels: TTFT p50 and p90, E2E latency p50"
    assert set(sizes.values()) == {(900, 450)}


def test_latency_boxes_come_from_the_sidecar_when_present(built, tmp_path, real):
    d, comparison, _ = built
    _, template = real
    with_sidecar = plots.latency_distributions(comparison, 1, d).read_bytes()
    bare = tmp_path / "bare"
    shutil.copytree(d, bare, ignore=shutil.ignore_patterns("*.requests.jsonl", "plots"))
    from_stats = plots.latency_distributions(comparison, 1, bare).read_bytes()
    assert png_size(with_sidecar) == png_size(from_stats) and with_sidecar != from_stats


def test_request_samples_agree_with_the_results_stats(built, real):
    d, comparison, _ = built
    _, template = real
    for level in template["levels"]:
        samples = plots.request_samples(d, template, level["concurrency"])
        assert samples is not None
        for key in ("ttft_ms", "tpot_ms"):
            assert len(samples[key]) == level[key]["n"]
            assert float(np.percentile(samples[key], 50)) == pytest.approx(level[key]["p50"])
    assert plots.request_samples(d, comparison["results"]["vllm"], 1) is None  # no sidecar


def test_cell_plot_is_a_small_png(real):
    _, template = real
    assert png_size(cell_plot(template)) == (600, 260)


def test_a_plot_of_a_level_no_longer_compared_is_removed(built):
    d, comparison, _ = built
    stale = d / "plots" / "latency_c64.png"
    stale.write_bytes(PNG_SIGNATURE)
    write_report(d, comparison)
    assert not stale.exists() and (d / "plots" / "latency_c4.png").exists()


def run_report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.reports.rebuild", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.session
def test_python_m_bench_report_rebuilds_from_files_alone(built, tmp_path):
    d, _, report = built
    root = tmp_path / "results"
    source_root = d.parent.parent.parent
    shutil.copytree(source_root, root, ignore=shutil.ignore_patterns("comparison.json", "REPORT.md", "plots"))
    copy = root / d.relative_to(source_root)

    proc = run_report("--results-dir", str(root))
    assert proc.returncode == 0, proc.stderr
    written = [Path(line) for line in proc.stdout.splitlines()]
    assert written[:3] == [copy / "comparison.json", copy / "REPORT.md", copy / "comparison.csv"]
    assert sorted(p.name for p in written[3:]) == [*(f"latency_c{c}.png" for c in (1, 2, 4)), "latency_frontier.png",
                                                         "throughput.png"]
    assert all(p.is_file() for p in written)
    assert f"ignored {BROKEN}: unreadable:" in proc.stderr
    rebuilt = (copy / "REPORT.md").read_text()
    strip = re.compile(r"^Generated .*$", re.M)
    assert strip.sub("", rebuilt) == strip.sub("", report)

    missing = run_report("--results-dir", str(root), "--machine", "nosuchmachine")
    assert missing.returncode == 1 and "no result directories" in missing.stderr

    via_cli = subprocess.run([sys.executable, "-m", "bench.cli.main", "report", "--results-dir", str(root)],
                             cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert via_cli.returncode == 0 and via_cli.stdout == proc.stdout, "`cellbench report` is the same command"


def test_rebuild_filters_by_model_and_machine(tmp_path, real):
    _, template = real
    root = tmp_path / "results"
    here = cell_dir(root, template)
    put(here, variant(template, run_id="20300101T000000Z-aaaa"))
    there = root / "tiny" / FOREIGN / "chat"
    put(there, variant(template, run_id="20300101T000000Z-bbbb", machine=FOREIGN))
    misfiled = root / "other-model" / FOREIGN / "agent"
    put(misfiled, variant(template, run_id="20300101T000000Z-cccc", machine=FOREIGN))

    assert {p.parent for p in rebuild(root, machine=FOREIGN, model="tiny") if p.suffix != ".png"} == {there}
    assert {p.parent for p in rebuild(root, model="tiny") if p.suffix != ".png"} == {here, there}
    comparison, report, table = rebuild(root, model="other-model")
    assert table == misfiled / "comparison.csv"
    assert comparison == misfiled / "comparison.json"
    text = report.read_text()
    assert "No result of this machine" in text and "model tiny, this directory is for other-model" in text


def test_suite_overhead_sums_every_servers_parts_against_the_cell_wall_time(real):
    result = copy.deepcopy(real[1])
    result["duration_s"] = 40.0
    parts = ("spawn_s", "ready_detect_bound_s", "teardown_s")
    result["servers"] = [{"levels": [1], "overhead": dict(zip(parts, (0.01, 0.05, 0.14), strict=True))},
                         {"levels": [2], "overhead": dict(zip(parts, (0.02, 0.06, 0.12), strict=True))}]
    overhead = markdown.suite_overhead(result)
    assert overhead == pytest.approx({"spawn_s": 0.03, "ready_detect_bound_s": 0.11, "teardown_s": 0.26,
                                      "total_s": 0.4, "share": 0.01})
    del result["servers"][0]["overhead"], result["servers"][1]["overhead"]  # an endpoint, or an older file
    assert markdown.suite_overhead(result) is None
