"""Decisions in the merged report: one framework's output tok/s on each machine, judged by the 95%
interval of their ratio as REPORT.md's Between frameworks judges frameworks ("faster" only where
the interval says so), in MERGED.md, index.html and merged.json."""

from __future__ import annotations

import json
from pathlib import Path

from bench.reports.merged import gather, render
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
        path.write_text(json.dumps(result))
    return gather.collect([tmp_path / "m1", tmp_path / "m2"], ["m1", "m2"])


def test_a_machine_twice_as_fast_is_said_to_be_with_its_interval(tmp_path):
    merged = _merged(tmp_path, 0.5)
    md = render.render_markdown(merged, {})
    section = md.split("### Between machines — tiny chat\n", 1)[1].split("\n### ", 1)[0]
    assert "- llamacpp at c=1: m1 1000.0, m2 500.0" in section
    assert "  - m1 is faster than m2 by 100.0% [" in section
    assert "Basis: within-run intervals only" in section
    html = merge_html.render_html(merged, {})
    assert "<h3>Between machines — tiny chat</h3>" in html and "m1 is faster than m2 by 100.0% [" in html
    estimate = merged["tables"][0]["cells"]["llamacpp"]["m1"]["tps_estimates"]["4"]
    assert estimate["value"] == 1000.0 and estimate["basis"] == "within-run" and estimate["df"] is None


def test_machines_within_each_others_noise_are_no_detectable_difference(tmp_path):
    md = render.render_markdown(_merged(tmp_path, 0.97), {})
    section = md.split("### Between machines — tiny chat\n", 1)[1].split("\n### ", 1)[0]
    assert "  - m1 and m2: no detectable difference (could detect " in section
    assert "faster than" not in section
