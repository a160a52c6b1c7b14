"""Numbers a user can decide on (issue 25): REPORT.md's rates with their intervals and what those
rest on, its *Between frameworks* decisions, the journal's and the HTML review's comparison of a
cell with its previous run. The results are the synthetic cells of tests.support.results; the
keys a schema of this branch may not know yet (`throughput_ci95`, `uncertainty`, `rounds`) are
added to the comparison in memory, and the renderers called on it."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, cast

import pytest

from bench.core import noise
from bench.core.level_run import level_label
from bench.core.metrics.stats import change
from bench.core.result.files import read_result
from bench.core.result.model import Result
from bench.reports.between import WITHIN_RUN
from bench.reports.comparison import Comparison, build_comparison
from bench.reports.journal import CellEntry, Journal
from bench.reports.markdown import render_report
from bench.reports.review import columns
from bench.reports.review import summary as html_summary
from tests.core.test_intervals import without_intervals
from tests.plugins.test_plugin import cell_dir, stand_in_cells
from tests.support.results import Spec, put, synthetic_result, variant, write_cell

MACHINE = "intelxeonprocessor"
TPS = change.FIGURES[0]  # output tok/s


def section(report: str, heading: str) -> str:
    return report.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def with_rate_intervals(comparison: Comparison, fw: str, spread: float, rounds: int = 1) -> None:
    """Give `fw`'s levels a `throughput_ci95` of +-`spread` around each rate, as --rounds writes it."""
    for lv in comparison["results"][fw]["levels"]:
        extra = cast(dict[str, Any], lv)  # keys this branch's Level does not declare
        extra["throughput_ci95"] = {key: {"low": extra[key] * (1 - spread), "high": extra[key] * (1 + spread)}
                                    for key in ("output_throughput_tps", "request_throughput_rps")}
        extra["uncertainty"] = {"basis": "rounds" if rounds > 1 else "within-run", "rounds": rounds,
                                "windows": None if rounds > 1 else 8}
        if rounds > 1:
            extra["rounds"] = [_round(lv, k, 1 + spread * (k - 1) / 2) for k in range(rounds)]


def _round(level: Any, k: int, factor: float) -> dict[str, Any]:
    """Round k of a level: its rates and TTFT times `factor`."""
    found = dict(copy.deepcopy(level), round=k, output_throughput_tps=level["output_throughput_tps"] * factor)
    found["ttft_ms"]["p50"] *= factor
    return found


@pytest.fixture
def two(tmp_path) -> tuple[Path, Result]:
    """A llamacpp cell written as a cell writes it, and the split folder it lies in."""
    path = write_cell(tmp_path / "results", Spec(requests=40))
    return path.parent, read_result(path)


def report_of(split_dir: Path, shape=None) -> str:
    comparison = build_comparison(split_dir, machine=MACHINE)
    if shape:
        shape(comparison)
    return render_report(comparison, [])


def test_overlapping_intervals_are_no_detectable_difference_and_never_faster(two):
    template = two[1]
    report = render_report(vllm_beside(two, 1.05, 0.10), [])
    rows = [line for line in section(report, "Concurrency 1").splitlines() if line.startswith("| Output throughput")]
    level = template["levels"][0]
    tps = level["output_throughput_tps"]
    assert rows == [f"| Output throughput (tok/s) | {tps:.1f} [{tps * 0.9:.1f}, {tps * 1.1:.1f}] | "
                    f"{tps * 1.05:.1f} [{tps * 1.05 * 0.9:.1f}, {tps * 1.05 * 1.1:.1f}] |"]
    between = section(report, "Between frameworks")
    assert re.search(r"- vllm and llamacpp: no detectable difference \(could detect \d+\.\d%\)", between)
    assert "faster than" not in between  # the TTFT p50s of a copy are the same too
    assert "within-run intervals only (one round: a second run on this host can differ by more)" in between
    assert f"Intervals: {WITHIN_RUN}." in section(report, "Concurrency 1")


def vllm_beside(two: tuple[Path, Result], scale: float, spread: float) -> Comparison:
    """The comparison of the llamacpp cell and a vllm copy of it `scale` times as fast, both rates
    with intervals of +-`spread`."""
    d, template = two
    put(d, variant(template, framework="vllm", scale=scale))  # the same run: both stand ok
    comparison = build_comparison(d, machine=MACHINE)
    for fw in ("llamacpp", "vllm"):
        with_rate_intervals(comparison, fw, spread)
    return comparison


def test_clearly_separated_figures_say_which_is_faster_and_by_how_much(two):
    comparison = vllm_beside(two, 2.0, 0.05)
    report = render_report(comparison, [])
    old, new = (comparison["results"][fw]["levels"][0] for fw in ("llamacpp", "vllm"))
    judged = change.judge(TPS, change.estimate(old, TPS), change.estimate(new, TPS))
    assert judged.decision == "improvement"
    c1 = section(report, "Between frameworks").split("### Concurrency 1\n", 1)[1].split("###", 1)[0]
    # side by side by name, not by speed: llamacpp's row first though vllm is twice as fast
    rows = [line for line in c1.splitlines() if line.startswith("| ")]
    assert rows[1].startswith(f"| llamacpp | {old['output_throughput_tps']:.1f} [")
    assert rows[2].startswith(f"| vllm | {new['output_throughput_tps']:.1f} [")
    assert f"  - vllm is faster than llamacpp by {judged.change:.1%} [{judged.low:.1%}, {judged.high:.1%}]\n" in c1


def test_faster_ttft_is_said_only_where_its_intervals_say_so(tmp_path):
    first = write_cell(tmp_path / "results", Spec(requests=40))
    write_cell(tmp_path / "results", Spec(framework="vllm", requests=40))  # TTFT 50 ms against 35 at c=1
    comparison = build_comparison(first.parent, machine=MACHINE)
    a, b = (comparison["results"][fw]["levels"][0] for fw in ("llamacpp", "vllm"))
    ttft = next(f for f in change.FIGURES if f.key == "ttft_ms.p50")
    judged = change.judge(ttft, change.estimate(b, ttft), change.estimate(a, ttft))
    assert judged.decision == "improvement" and judged.change is not None and judged.low is not None
    report = render_report(comparison, [])
    assert (f"  - llamacpp is faster than vllm by {-judged.change:.1%} [{-(judged.high or 0):.1%}, "
            f"{-judged.low:.1%}]") in section(report, "Between frameworks")
    # the rates rest on their own runs' time windows: judged too, and never "faster" without a decision
    tps = change.judge(TPS, change.estimate(a, TPS), change.estimate(b, TPS))
    between = section(report, "Between frameworks").split("- output tok/s", 1)[1].split("- TTFT", 1)[0]
    assert ("is faster than" in between) == (tps.decision in ("improvement", "regression")), between


def test_a_result_written_before_intervals_renders_and_says_it_has_none(two):
    d, template = two
    (d / f"llamacpp_{template['run_id']}.json").unlink()
    put(d, without_intervals(template))
    put(d, without_intervals(variant(template, framework="vllm", scale=3.0)))
    report = report_of(d)
    assert "Intervals: no interval in this result (written before intervals)." in section(report, "Concurrency 1")
    between = section(report, "Between frameworks")
    assert "faster than" not in between
    assert "  - vllm and llamacpp: cannot tell: neither has an interval (written before intervals)" in between
    assert "Basis: none: no figure here has an interval." in between


def test_rounds_are_named_as_the_basis_of_the_intervals(two):
    d, template = two
    put(d, variant(template, framework="vllm"))

    def shape(c: Comparison) -> None:
        with_rate_intervals(c, "llamacpp", 0.04, rounds=3)
        with_rate_intervals(c, "vllm", 0.04)

    report = report_of(d, shape)
    assert (f"Intervals: llamacpp: median of 3 rounds; interval across rounds; vllm: {WITHIN_RUN}."
            in section(report, "Concurrency 1"))
    assert "medians of 3 rounds, intervals across rounds" in section(report, "Between frameworks")


def test_the_floors_beside_the_results_judge_and_are_named_with_their_dates(two):
    """A floor file of each framework beside the split (as `cellbench noise` writes it): their
    30% spread makes a 20% difference no detectable one, and the section names each floor."""
    d, template = two
    comparison = vllm_beside(two, 1.2, 0.01)
    label = level_label(template["levels"][0])
    for fw in ("llamacpp", "vllm"):
        floor = noise.Floor(model="tiny", machine=MACHINE, split="chat", framework=fw,
                            measured_at="2026-11-28T09:00:00Z", runs=5, settings={}, levels={label: {TPS.key: 0.3}})
        noise.write(floor, d.parent / noise.FOLDER / d.name / f"{fw}.json")
    between = section(render_report(comparison, [], noise.Floors(d)), "Between frameworks")
    assert "the machine's noise floor of 2026-11-28 (5 runs)" in between
    assert ("Noise floors: llamacpp: noise floor measured 2026-11-28T09:00:00Z (5 runs); "
            "vllm: noise floor measured 2026-11-28T09:00:00Z (5 runs).") in between
    assert "- vllm and llamacpp: no detectable difference" in between  # 20% is inside a 30% floor
    without = section(render_report(comparison, [], noise.Floors(d / "elsewhere")), "Between frameworks")
    assert "vllm: none (measure one: cellbench noise vllm)" in without and "vllm is faster than" in without


def test_frameworks_that_ran_other_settings_are_not_like_with_like(two):
    d, template = two
    put(d, variant(template, framework="vllm", share_server=True))
    between = section(report_of(d), "Between frameworks")
    assert "(not like with like: they ran with different levels_share_server)" in between


# ------------------------------------------------------------------ against the previous run


@pytest.fixture
def slower_again(tmp_path) -> tuple[Path, Result, Result]:
    """A cell's previous result and a later one of the same cell, every request 1.6x slower."""
    root = tmp_path / "results"
    old = write_cell(root, Spec(requests=40, run_id="20261129T100000Z-aaaa"))
    new = write_cell(root, Spec(requests=40, run_id="20261130T100000Z-bbbb", speed=0.6))
    return new, read_result(old), read_result(new)


def test_the_journal_lists_each_regression_against_the_previous_run(slower_again):
    path, old, new = slower_again
    j = Journal.open(path.parent.parent, model="tiny", machine=MACHINE, day="2026-11-30")
    j.record(CellEntry("llamacpp", "chat", "ok", "40/40 requests ok", str(path)))
    text = j.md_path.read_text()
    changes = [c for a, b in zip(old["levels"], new["levels"], strict=True) for c in change.compare_levels(a, b)]
    regressions = [c for c in changes if c.decision == "regression"]
    assert regressions, "1.6x slower requests are a regression a reader must see"
    block = section(text, "Compared With The Previous Run")
    head = (f"- llamacpp / chat against run 20261129T100000Z-aaaa: {len(regressions)} regressions, "
            f"{sum(c.decision == 'improvement' for c in changes)} improvements, "
            f"{sum(c.decision == 'no detectable change' for c in changes)} no detectable change, "
            f"{sum(c.decision == 'cannot tell' for c in changes)} cannot tell")
    assert head in block
    ttft = next(c for c in regressions if c.figure.key == "ttft_ms.p50")
    assert f"  - c=1: TTFT p50 (ms): {ttft.text()}" in block
    assert section(text, "Suspicious Results").strip() == "None."  # 1.6x is not the 10x flag
    again = Journal.open(path.parent.parent, model="tiny", machine=MACHINE, day="2026-11-30")
    assert again.md_path.read_text() == text  # kept in the JSON twin, the page rendered from it


def test_a_cell_without_a_previous_result_has_no_comparison(tmp_path):
    path = write_cell(tmp_path / "results")
    j = Journal.open(path.parent.parent, model="tiny", machine=MACHINE, day="2026-11-30")
    j.record(CellEntry("llamacpp", "chat", "ok", "fine", str(path)))
    j.record(CellEntry("vllm", "chat", "ok", "fine", str(tmp_path / "gone.json")))
    assert "Compared With The Previous Run" not in j.md_path.read_text()


def test_the_html_row_counts_regressions_against_the_previous_run(slower_again):
    path, _, new = slower_again
    data = {"verdict": "ok", "reason": "fine", "annotations": [], "result_path": str(path),
            "row": columns.row_data(new)}
    verdict = columns.row_cells(data)[0]
    badge = re.search(r'<span class="cellbench-annotation cellbench-previous" title="([^"]*)">(\d+) regressions '
                      r"vs previous</span>", verdict)
    assert badge and int(badge.group(2)) > 0
    assert "against run 20261129T100000Z-aaaa:" in badge.group(1) and "c=1: TTFT p50 (ms): +" in badge.group(1)
    summary = columns.summary_html(data, new, [])
    assert "<li>c=1: TTFT p50 (ms): +" in summary
    assert "regressions vs previous" not in columns.row_cells({**data, "result_path": None})[0]


def test_the_html_row_shows_the_throughput_interval_and_what_it_rests_on(two):
    _, template = two
    result = copy.deepcopy(template)
    top = result["levels"][-1]
    tps = top["output_throughput_tps"]
    top["throughput_ci95"] = {"output_throughput_tps": {"low": tps * 0.9, "high": tps * 1.1}}
    cell = columns.row_cells({"verdict": "ok", "reason": "", "annotations": [],
                                  "row": columns.row_data(result)})[2]
    assert f"{tps:.1f} [{tps * 0.9:.1f}, {tps * 1.1:.1f}]" in cell and f'title="{WITHIN_RUN}"' in cell
    assert f"<td>{tps:.1f} [{tps * 0.9:.1f}, {tps * 1.1:.1f}]</td>" in columns._level_table(result["levels"])
    assert "[" not in columns.row_cells({"verdict": "ok", "reason": "", "annotations": [],
                                             "row": columns.row_data(without_intervals(template))})[2]


def test_the_summary_marks_a_cell_whose_settings_differ_from_its_split(two):
    _, template = two
    cells = [{"verdict": "ok", "framework": fw, "split": "chat", "row": columns.row_data(r)}
             for fw, r in (("llamacpp", template), ("vllm", template),
                           ("sglang", variant(template, framework="sglang", share_server=True)))]
    html = html_summary.session_summary_html(cells)
    assert "sglang chat (not comparable: other levels_share_server than the rest of its split)" in html
    assert "llamacpp chat (not comparable" not in html and "vllm chat (not comparable" not in html


def test_rounds_that_agree_exactly_still_render(two):
    """Rounds whose TTFT p50s are equal have a standard error of ~0: the report still renders."""
    d, template = two
    put(d, variant(template, framework="vllm"))

    def shape(c: Comparison) -> None:
        for lv in c["results"]["llamacpp"]["levels"]:
            extra = cast(dict[str, Any], lv)
            extra["rounds"] = [dict(copy.deepcopy(lv), round=k) for k in range(3)]

    assert "### Concurrency 1" in section(report_of(d, shape), "Between frameworks")


def test_a_session_journals_and_shows_its_regression_against_the_previous_run(pytester: pytest.Pytester):
    """A real pytest session of one stand-in cell, its previous result already on disk: the
    journal's comparison section and the HTML row's badge name the regression."""
    split_dir = cell_dir(pytester.path / "results")
    put(split_dir, synthetic_result(Spec(requests=40, run_id="20261129T100000Z-aaaa")))
    slower = synthetic_result(Spec(requests=40, run_id="20261130T100000Z-bbbb", speed=0.6))
    stand_in_cells(pytester.path, {"llamacpp-chat": cast(dict, slower)})
    proc = pytester.runpytest("-k", "llamacpp-chat", "--results-dir", "results", "--html", "report.html",
                              "--self-contained-html")
    proc.assert_outcomes(passed=1)
    (journal,) = split_dir.parent.glob("weekly_*.journal.md")
    block = section(journal.read_text(), "Compared With The Previous Run")
    assert "- llamacpp / chat against run 20261129T100000Z-aaaa: " in block and "\n  - c=1: TTFT p50 (ms): +" in block
    html = (pytester.path / "report.html").read_text()
    assert re.search(r"[1-9]\d* regressions vs previous", html)


def test_each_basis_of_a_comparison_is_named_once():
    from bench.reports.between import basis_words

    words = basis_words(["old: within-run; new: 3 rounds", "within-run", "", "noise floor of 2026-12-01 (5 runs)"])
    assert words == ("medians of 3 rounds, intervals across rounds; the machine's noise floor of 2026-12-01 (5 runs); "
                     "within-run intervals only (one round: a second run on this host can differ by more)")
