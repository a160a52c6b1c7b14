"""Decisions in the merged report: one framework's output tok/s on each machine, judged by the 95%
interval of their ratio as REPORT.md's Between frameworks judges frameworks ("faster" only where
the interval says so), in MERGED.md, index.html and merged.json."""

from __future__ import annotations

import json
from pathlib import Path

from bench.reports.merged import gather, machines, render
from bench.reports.merged import index as merge_html
from tests.reports.test_merge import machine
from tests.support.results import Spec, write_cell


def _merged(tmp_path: Path, m2_speed: float) -> render.Merged:
    """llamacpp on m1 and m2, m2's rates (and their intervals) `m2_speed` times m1's."""
    for slug in ("m1", "m2"):
        path = write_cell(tmp_path / slug, Spec(levels=(1, 4), requests=40, warmup=0), machine=machine(slug))
        result = json.loads(path.read_text())
        for level in result["levels"]:
            level["output_throughput_tps"] = 1000.0 * (m2_speed if slug == "m2" else 1.0)
            level["throughput_ci95"]["output_throughput_tps"] = {
                "low": level["output_throughput_tps"] * 0.95, "high": level["output_throughput_tps"] * 1.05}
            peak = (300 if slug == "m2" else 200) * 2**20
            level["memory"] = {"peak_bytes": peak, "peak_rss_bytes": peak, "peak_gpu_bytes": None,
                               "peak_gpu_device_bytes": None, "peak_system_used_bytes": None, "samples": 9,
                               "inside": True}
        path.write_text(json.dumps(result))
    return gather.collect([tmp_path / "m1", tmp_path / "m2"], ["m1", "m2"])


def test_a_machine_twice_as_fast_is_said_to_be_with_its_interval(tmp_path):
    merged = _merged(tmp_path, 2.0)
    md = render.render_markdown(merged, {})
    section = md.split("### Between machines — tiny chat\n", 1)[1].split("\n### ", 1)[0]
    # by machine name, not by speed; speed and memory side by side
    assert "- llamacpp at c=1: m1 1000.0 tok/s, peak 200 MiB; m2 2000.0 tok/s, peak 300 MiB" in section
    assert "  - m2 is faster than m1 by 100.0% [" in section
    assert "; memory: m2 300 MiB, m1 200 MiB (the faster holds 1.5x)" in section
    assert "Basis: within-run intervals only" in section
    html = merge_html.render_html(merged, {})
    assert "<h3>Between machines — tiny chat</h3>" in html and "m2 is faster than m1 by 100.0% [" in html
    estimate = merged["tables"][0]["cells"]["llamacpp"]["m1"]["tps_estimates"]["4"]
    assert estimate["value"] == 1000.0 and estimate["basis"] == "within-run" and estimate["df"] is None


def test_machines_within_each_others_noise_are_no_detectable_difference(tmp_path):
    md = render.render_markdown(_merged(tmp_path, 0.97), {})
    section = md.split("### Between machines — tiny chat\n", 1)[1].split("\n### ", 1)[0]
    assert "  - m1 and m2: no detectable difference (could detect " in section
    assert "faster than" not in section


def test_three_machines_are_listed_by_name_and_every_pair_judged(tmp_path):
    """No order by speed: m1, m2, m3 in that order whatever their speeds, each pair decided once."""
    for slug, speed in (("m1", 500.0), ("m2", 1000.0), ("m3", 2000.0)):
        path = write_cell(tmp_path / slug, Spec(levels=(1,), requests=40, warmup=0), machine=machine(slug))
        result = json.loads(path.read_text())
        level = result["levels"][0]
        level["output_throughput_tps"] = speed
        level["throughput_ci95"]["output_throughput_tps"] = {"low": speed * 0.95, "high": speed * 1.05}
        path.write_text(json.dumps(result))
    md = render.render_markdown(gather.collect([tmp_path / s for s in ("m1", "m2", "m3")], ["m1", "m2", "m3"]), {})
    section = md.split("### Between machines — tiny chat\n", 1)[1].split("\n### ", 1)[0]
    assert "- llamacpp at c=1: m1 500.0 tok/s; m2 1000.0 tok/s; m3 2000.0 tok/s" in section
    pairs = [line for line in section.splitlines() if line.startswith("  - ")]
    assert [p.split(" by ")[0] for p in pairs] == ["  - m2 is faster than m1", "  - m3 is faster than m1",
                                                   "  - m3 is faster than m2"]


def test_each_machines_fidelity_is_said_once_per_framework(tmp_path):
    merged = _merged(tmp_path, 1.0)
    table = merged["tables"][0]
    table["cells"]["llamacpp"]["m1"]["fidelity"] = "16/16 alike to 16 tokens vs hf_transformers"
    lines = machines.machines_lines(table)
    said = [line for line in lines if line.startswith("- llamacpp fidelity: ")]
    assert said == ["- llamacpp fidelity: m1 16/16 alike to 16 tokens vs hf_transformers; m2 not run"]
