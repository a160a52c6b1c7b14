"""`cellbench report --as TOOL`: REPORT.md under another tool's metric names, from real result files
(written as a cell writes them: tests/support/results.py), printed and never written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core import crosswalk
from bench.core.metrics.blocks import Goodput
from bench.core.result.files import read_result
from bench.reports import rebuild
from tests.support.results import put, variant, write_cell

GOODPUT: Goodput = {"slo": {"ttft_p99": 500.0}, "good_requests": 7, "goodput_rps": 3.21,
                    "attainment": {"ttft_p99": 0.875}, "slo_met": False, "missed": ["ttft_p99"]}


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    """A split with two frameworks' results, one level judged against an SLO, rebuilt once."""
    root = tmp_path_factory.mktemp("as") / "results"
    path = write_cell(root)
    other = variant(read_result(path), framework="vllm", run_id="20300102T000000Z-bbbb", scale=1.5)
    other["levels"][0]["goodput"] = GOODPUT
    put(path.parent, other)
    assert rebuild.main(["--results-dir", str(root)]) == 0
    return path.parent


def tables(report: str) -> dict[str, list[list[str]]]:
    """Each level section's table rows (cells stripped), by its heading."""
    out = {}
    for block in report.split("\n## ")[1:]:
        heading, _, body = block.partition("\n")
        if heading.startswith(("Concurrency", "Request rate")):
            out[heading] = [[c.strip() for c in line.strip("|").split(" | ")] for line in body.splitlines()
                            if line.startswith("| ")]
    return out


def report_as(split: Path, tool: str, capsys) -> str:
    capsys.readouterr()
    assert rebuild.main(["--results-dir", str(split.parents[2]), "--as", tool]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("tool", crosswalk.TOOLS)
def test_values_stay_and_every_crosswalk_row_is_renamed_with_cellbench_beside(split, tool, capsys):
    ours, theirs = tables((split / "REPORT.md").read_text()), tables(report_as(split, tool, capsys))
    assert list(ours) == list(theirs) and ours
    relabel = rebuild.peer_relabel(tool)
    renamed = 0
    for heading, rows in ours.items():
        assert len(rows) == len(theirs[heading])
        for mine, peer in zip(rows, theirs[heading], strict=True):
            assert mine[1:] == peer[1:], f"{heading}: the values of {mine[0]} changed"
            assert peer[0] == relabel(mine[0])
            if peer[0] != mine[0]:
                renamed += 1
                assert f"cellbench {re.sub(r'( (avg|p[0-9]+))? [(][^)]*[)]$', '', mine[0])}" in peer[0] \
                    or f"(no {crosswalk.tool_label(tool, version=False)} equivalent)" in peer[0]
    assert renamed >= 10


def test_the_confusable_names_read_as_the_peer_uses_them(split, capsys):
    aiperf = tables(report_as(split, "aiperf", capsys))["Concurrency 1"]
    labels = [row[0] for row in aiperf]
    assert "Inter Token Latency (AIPerf, close; cellbench TPOT) avg (ms)" in labels
    assert "Inter Chunk Latency (AIPerf; cellbench ITL) p50 (ms)" in labels
    assert "Successful / Failed" in labels and "Tokens per chunk" in labels  # no crosswalk figure: as they were
    vllm = [row[0] for row in tables(report_as(split, "vllm", capsys))["Concurrency 1"]]
    assert "TPOT (vLLM, close; cellbench TPOT) avg (ms)" in vllm
    assert "Decode rate (no vLLM equivalent) p50 (tok/s)" in vllm
    assert "Request goodput (vLLM, close; cellbench Goodput) (req/s)" in vllm
    guidellm = [row[0] for row in tables(report_as(split, "guidellm", capsys))["Concurrency 1"]]
    assert "ITL (guidellm, close; cellbench TPOT) avg (ms)" in guidellm
    assert "ITL (no guidellm equivalent) avg (ms)" in guidellm


def test_a_note_under_the_title_says_whose_names_and_where_the_crosswalk_is(split, capsys):
    lines = report_as(split, "guidellm", capsys).splitlines()
    assert lines[0].startswith("# cellbench results — ")
    assert lines[2].startswith("Metric names as guidellm 0.8.1 gives them (`cellbench report --as guidellm`)")
    assert "docs/metrics.md (Names in other tools)" in lines[2]
    assert "Metric names as" not in (split / "REPORT.md").read_text(), "the default report is unchanged"


@pytest.mark.session
def test_it_writes_nothing_and_the_cli_runs_it(split):
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in split.rglob("*") if p.is_file()}
    proc = subprocess.run([sys.executable, "-m", "bench.cli.main", "report", "--results-dir", str(split.parents[2]),
                           "--as", "siliconbench"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "ITL (SiliconBench, close; cellbench TPOT) avg (ms)" in proc.stdout
    assert "Inter Token Latency" not in proc.stdout
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in split.rglob("*") if p.is_file()}
    assert after == before, "--as changed the results tree"
    refused = subprocess.run([sys.executable, "-m", "bench.reports.rebuild", "--results-dir", str(split.parents[2]),
                              "--as", "genai-perf"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "invalid choice: 'genai-perf'" in refused.stderr
