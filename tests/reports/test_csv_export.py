"""comparison.csv and the per-request CSV: what a spreadsheet or a guidellm/AIPerf CSV script reads."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from bench.core.metrics.table import METRICS
from bench.reports import rebuild
from bench.reports.csv_export import CSV_FILE, HEADER
from tests.support.results import Spec, write_cell


@pytest.fixture
def split(tmp_path) -> Path:
    """Two frameworks, two levels each, vLLM with 2 failed requests a level; rebuilt once."""
    root = tmp_path / "results"
    path = write_cell(root)
    write_cell(root, Spec(framework="vllm", run_id="20261130T110000Z-bbbb", failed=2))
    assert rebuild.main(["--results-dir", str(root), "--requests-csv"]) == 0
    return path.parent


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def number(cell: str) -> float | None:
    """A figure's cell as the JSON holds it: an empty cell is null."""
    return None if cell == "" else float(cell)


def test_every_figure_of_comparison_json_is_a_row_with_its_unit_and_interval(split):
    comparison = json.loads((split / "comparison.json").read_text())
    table = rows((split / CSV_FILE).read_text())
    assert tuple(table[0]) == HEADER
    emptied = bounded = False
    for framework, result in comparison["results"].items():
        for level in result["levels"]:
            mine = {(r["metric"], r["statistic"]): r for r in table
                    if r["framework"] == framework and r["level"] == f"c={level['concurrency']}"}
            tps = mine[("output_throughput_tps", "value")]
            assert float(tps["value"]) == level["output_throughput_tps"] and tps["unit"] == "tokens/s"
            ci = level["throughput_ci95"]["output_throughput_tps"]
            assert (number(tps["ci95_low"]), number(tps["ci95_high"])) == (ci["low"], ci["high"])
            bounded = bounded or ci["low"] is not None
            assert int(mine[("failed", "value")]["value"]) == level["failed"]
            for metric in METRICS:
                block = level.get(metric.key)
                if not block:
                    continue
                p50 = mine[(metric.key, "p50")]
                assert float(p50["value"]) == block["p50"] and p50["unit"] == metric.unit
                for stat, ci in block["ci95"].items():  # an interval the result lacks is an empty cell
                    assert number(mine[(metric.key, stat)]["ci95_low"]) == ci["low"], (metric.key, stat)
                emptied = emptied or block["ci95"]["p99"]["low"] is None
            assert {r["verdict"] for r in mine.values()} == {result["verdict"]["verdict"]}
    assert {r["framework"] for r in table} == {"llamacpp", "vllm"}
    assert emptied  # 8 requests a level: too few for a TTFT p99 interval, so some cells are empty
    assert bounded  # and llamacpp's 8 successful requests give a throughput interval, vLLM's 6 none


def test_report_csv_prints_the_same_rows_and_writes_nothing(split, capsys):
    written = (split / CSV_FILE).read_text()
    (split / CSV_FILE).unlink()
    capsys.readouterr()
    assert rebuild.main(["--results-dir", str(split.parents[2]), "--csv"]) == 0
    assert capsys.readouterr().out == written and not (split / CSV_FILE).exists()


def test_the_per_request_csv_has_every_request_and_the_tables_formulas(split):
    sidecar = next(split.glob("vllm_*.requests.jsonl"))
    raw = [json.loads(line) for line in sidecar.read_text().splitlines()]
    table = rows(sidecar.with_name(sidecar.name.replace(".jsonl", ".csv")).read_text())
    assert len(table) == len(raw)  # warm-ups included, marked
    assert sum(r["warmup"] == "True" for r in table) == sum(bool(r["warmup"]) for r in raw) > 0
    for line, row in zip(raw, table, strict=True):
        assert int(row["chunks"]) == len(line["chunk_times"])
        if line["error"] is None:
            ttft = (line["t_first_token"] - line["t_send"]) * 1000
            assert float(row["ttft_ms"]) == pytest.approx(ttft) and row["error"] == ""
        else:  # a failed request: its error as JSON, no TTFT or TPOT
            assert json.loads(row["error"])["type"] == line["error"]["type"]
            assert row["ttft_ms"] == "" and row["tpot_ms"] == ""
    assert sum(r["error"] != "" for r in table) == 4  # 2 failed a level, 2 levels


def test_energy_and_the_servers_own_metrics_are_rows_too(tmp_path):
    root = tmp_path / "results"
    path = write_cell(root)
    result = json.loads(path.read_text())
    level = result["levels"][0]
    level["energy"] = {"sources": [{"device": "gpu", "source": "nvml", "interval_s": 1.0, "samples": 4,
                                    "wall_s": 2.0, "joules": 300.0, "avg_w": 150.0, "output_tokens": 600,
                                    "j_per_output_token": 0.5}]}
    level["server_metrics"] = {"path": "/metrics", "interval_s": 2.0, "includes_warmup": True, "sidecar": "s.jsonl",
                               "errors": [], "scrapes": 3, "counters": {"generated_tokens": 612.0},
                               "gauges": {"waiting": {"mean": 2.5, "max": 4.0, "samples": 3}},
                               "histograms": {"ttft": {"count": 9.0, "mean_ms": 41.5}}}
    path.write_text(json.dumps(result))
    assert rebuild.main(["--results-dir", str(root)]) == 0
    table = rows((path.parent / CSV_FILE).read_text())
    got = {(r["metric"], r["statistic"]): (r["value"], r["unit"], r["ci95_low"]) for r in table
           if r["level"] == f"c={level['concurrency']}"}
    assert got[("energy.gpu", "joules")] == ("300.0", "J", "")
    assert got[("energy.gpu", "j_per_output_token")] == ("0.5", "J/token", "")
    assert got[("server.generated_tokens", "increase")] == ("612.0", "tokens", "")
    assert got[("server.waiting", "mean")] == ("2.5", "requests", "")
    assert got[("server.waiting", "max")] == ("4.0", "requests", "")
    assert got[("server.ttft", "mean")] == ("41.5", "ms", "") and got[("server.ttft", "count")][0] == "9.0"
