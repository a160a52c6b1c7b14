"""No number without its standing (issue 38): a result that is not ok from this run (degraded,
capped, wrong-model, interrupted, imported, of an earlier run) keeps its figures in every report,
each carrying its mark, sorts after the ok results and never enters an order or a "faster than".

Synthetic cells (tests.support.results) in a real split folder, rendered by each surface:
REPORT.md, comparison.json and .csv, the HTML review's cells and summary, `cellbench compare`,
the merged report and the journal's comparison with the previous run. An unfinished result (the
`safety` branch's `unfinished` block) is not a schema-valid file on this branch: its standing is
tested on the document, and the reports on a comparison that holds it in memory.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from bench.base.clock import now_iso
from bench.cli.main import main as cellbench
from bench.core.result.files import read_result
from bench.core.result.model import Result
from bench.reports.between import against_previous, previous_line
from bench.reports.comparison import Comparison, build_comparison
from bench.reports.csv_export import comparison_csv
from bench.reports.journal import CellEntry, Journal
from bench.reports.markdown import render_report
from bench.reports.merged import gather, render
from bench.reports.review import columns
from bench.reports.review import summary as html_summary
from bench.reports.standing import INTERRUPTED, NOT_THIS_RUN, ChosenRun, standing_of, this_run_of
from tests.reports.test_merge import machine
from tests.support.results import MACHINE, Spec, put, synthetic_result, write_cell

RUN, EARLIER = "20261130T100000Z-aaaa", "20261129T100000Z-0000"
SLUG = MACHINE["slug"]


def section(report: str, heading: str) -> str:
    return report.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def wrong_model(result: Result, served: str = "other-model") -> Result:
    """`result` as a cell whose server answered with another model."""
    found = copy.deepcopy(result)
    found["model"]["served"] = {"listed": [served], "responses": [served]}
    found["verdict"] = {"verdict": "wrong-model", "reason": f"/v1/models lists {served}, not tiny", "annotations": []}
    return found


def unfinished(result: Result, pid: int, host: str | None = None) -> dict[str, Any]:
    """`result` as the safety branch writes it while its cell runs (the contract's `unfinished` block)."""
    found: dict[str, Any] = copy.deepcopy(dict(result))
    found["unfinished"] = {"pid": pid, "host": host or socket.gethostname(), "updated_at": now_iso(), "levels_done": 1}
    found["verdict"] = {"verdict": "capped", "reason": "unfinished: 1 of 2 levels done", "annotations": []}
    return found


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


@pytest.fixture
def split(tmp_path) -> Path:
    """A split folder of one run: llamacpp ok, vllm degraded (3 of 8 requests failed at each level)."""
    write_cell(tmp_path / "results", Spec(requests=8))
    return write_cell(tmp_path / "results", Spec(framework="vllm", requests=8, failed=3)).parent


# ---------------------------------------------------------------- the rule


def test_the_standing_of_each_kind_of_result():
    ok = synthetic_result(Spec())
    assert standing_of(ok, RUN).ok and standing_of(ok, RUN).word == "ok" and standing_of(ok).short() == "ok"
    degraded = standing_of(synthetic_result(Spec(failed=3)), RUN)
    assert degraded.word == "degraded" and degraded.tags == "degraded"
    assert degraded.text().startswith("degraded: 6/16 requests failed")
    earlier = standing_of(ok, "20261201T000000Z-bbbb")
    assert earlier.word == NOT_THIS_RUN and earlier.tags == "not this run"
    assert earlier.short() == f"not from this run (run {RUN} of 2026-11-30)"
    assert earlier.text() == f"not from this run: run {RUN} of 2026-11-30; this run is 20261201T000000Z-bbbb"
    assert standing_of(ok, None).ok, "without a run to be about (compare), no result is of another one"
    both = standing_of(synthetic_result(Spec(failed=3)), "20261201T000000Z-bbbb")
    assert [m.kind for m in both.marks] == ["degraded", NOT_THIS_RUN]
    served = standing_of(wrong_model(ok), RUN)
    assert served.served_model == "other-model" and served.short() == "wrong-model (served other-model)"
    assert served.text().endswith("its figures are other-model's, not tiny's")
    fixed = copy.deepcopy(ok)
    fixed["verdict"]["verdict"] = "fixed"
    assert standing_of(fixed, RUN).ok


def test_an_unfinished_result_is_interrupted_once_its_writer_is_gone():
    ok = synthetic_result(Spec())
    killed = standing_of(unfinished(ok, gone_pid()), RUN)
    assert killed.word == INTERRUPTED and len(killed.marks) == 1, "interrupted replaces its capped verdict"
    assert killed.text().startswith("interrupted: unfinished and its writer, pid ") and "1 level kept" in killed.text()
    running = standing_of(unfinished(ok, os.getpid()), RUN)  # this process: its writer still runs
    assert running.word == "capped" and "unfinished: 1 of 2 levels done" in running.text()
    elsewhere = standing_of(unfinished(ok, os.getpid(), host="another-host"), RUN)
    assert elsewhere.word == INTERRUPTED and "written on another-host, not here" in elsewhere.text()


def test_this_run_is_the_run_of_the_newest_measured_result():
    older, newer = synthetic_result(Spec(run_id=EARLIER)), synthetic_result(Spec())
    assert this_run_of([older, newer]) == RUN == this_run_of([newer, older])
    assert this_run_of([]) is None


# ---------------------------------------------------------------- REPORT.md and comparison.json


def test_a_degraded_cell_is_marked_at_every_figure_and_left_out_of_every_order(split):
    comparison = build_comparison(split, machine=SLUG)
    assert comparison["frameworks"] == ["llamacpp", "vllm"] and comparison["this_run"]["run_id"] == RUN
    assert comparison["standing"]["llamacpp"]["standing"] == "ok"
    flag = comparison["standing"]["vllm"]
    assert (flag["standing"], flag["ok"], flag["short"]) == ("degraded", False, "degraded")
    report = render_report(comparison, [])
    c1 = section(report, "Concurrency 1")
    assert "| Metric | llamacpp | vllm (degraded) |" in c1
    throughput = next(line for line in c1.splitlines() if line.startswith("| Output throughput"))
    llamacpp, vllm = (cell.strip() for cell in throughput.strip("|").split(" | ")[1:])
    assert vllm.endswith(" (degraded)") and "degraded" not in llamacpp
    assert "Marked figures (docs/results.md, Standing): vllm (degraded): degraded: 6/16 requests failed" in c1
    between = section(report, "Between frameworks")
    assert ("| vllm (degraded) | " in between and "- Not judged: vllm (degraded).\n"
            "- Nothing judged: only one framework stands ok here." in between)
    assert "faster than" not in between and "neighbours judged" not in between


def test_a_degraded_cell_sorts_after_the_ok_ones_and_two_ok_ones_are_ordered(tmp_path):
    for fw, failed in (("ollama", 3), ("llamacpp", 0), ("vllm", 0)):
        d = write_cell(tmp_path, Spec(framework=fw, failed=failed, requests=8)).parent
    comparison = build_comparison(d, machine=SLUG)
    assert comparison["frameworks"] == ["llamacpp", "vllm", "ollama"]
    between = section(render_report(comparison, []), "Between frameworks")
    rows = [line.split(" | ")[0].strip("| ") for line in between.splitlines() if line.startswith("| ")][1:]
    assert rows[:3] == ["llamacpp", "vllm", "ollama (degraded)"]  # by name, the one not ok last
    judged = between.split("- output tok/s, neighbours judged\n", 1)[1].split("\n- ", 1)[0]
    assert "ollama" not in judged and "llamacpp" in judged and "vllm" in judged
    assert "- Not judged: ollama (degraded)." in between


def test_a_result_of_an_earlier_run_is_marked_with_its_run_or_left_out(tmp_path):
    write_cell(tmp_path, Spec(run_id=EARLIER, finished_at="2026-11-29T10:00:30+00:00"))
    d = write_cell(tmp_path, Spec(framework="vllm")).parent
    comparison = build_comparison(d, machine=SLUG)
    assert comparison["frameworks"] == ["vllm", "llamacpp"]
    assert comparison["standing"]["llamacpp"]["short"] == f"not from this run (run {EARLIER} of 2026-11-29)"
    report = render_report(comparison, [])
    assert (f"This run: {RUN} (the run of the newest result here). From other runs, marked `not this run` and in "
            f"no order: llamacpp: run {EARLIER} of 2026-11-29.") in report
    assert "| Metric | vllm | llamacpp (not this run) |" in section(report, "Concurrency 1")
    assert "- Not judged: llamacpp (not this run)." in section(report, "Between frameworks")

    left = build_comparison(d, machine=SLUG, other_runs="leave-out")
    assert left["frameworks"] == ["vllm"] and list(left["results"]) == ["vllm"]
    assert left["left_out"] == [{"framework": "llamacpp", "run_id": EARLIER, "file": f"llamacpp_{EARLIER}.json",
                                 "finished_at": "2026-11-29T10:00:30+00:00",
                                 "reason": f"run {EARLIER} of 2026-11-29; this run is {RUN}"}]
    report = render_report(left, [])
    assert ("Left out, not from this run (`cellbench report --other-runs mark` shows them): llamacpp: run "
            f"{EARLIER} of 2026-11-29; this run is {RUN} (file llamacpp_{EARLIER}.json).") in report
    assert "| llamacpp |" not in report and "| Metric | vllm |" in report
    given = build_comparison(d, machine=SLUG, this_run=EARLIER)  # a session's rebuild names its own run
    assert given["this_run"] == {"run_id": EARLIER, "chosen_by": "given"}
    assert f"This run: {EARLIER} (named by --run-id)." in render_report(given, [])
    assert given["frameworks"] == ["llamacpp", "vllm"] and given["standing"]["vllm"]["standing"] == NOT_THIS_RUN


def test_a_run_of_several_sessions_counts_each_sessions_results_as_its_own(tmp_path):
    """A weekly run's retry session has a run id of its own: its result is this run's all the same,
    and only a result of neither is marked."""
    retry, stale = "20261130T110000Z-bbbb", EARLIER
    write_cell(tmp_path, Spec(framework="vllm", run_id=retry, finished_at="2026-11-30T11:00:30+00:00"))
    write_cell(tmp_path, Spec(framework="ollama", run_id=stale, finished_at="2026-11-29T10:00:30+00:00"))
    d = write_cell(tmp_path, Spec()).parent
    comparison = build_comparison(d, machine=SLUG, this_run=ChosenRun((RUN, retry), "the weekly run's"))
    assert comparison["this_run"] == {"run_id": RUN, "chosen_by": "the weekly run's", "with_runs": [retry]}
    assert [fw for fw in comparison["frameworks"] if comparison["standing"][fw]["ok"]] == ["llamacpp", "vllm"]
    assert comparison["standing"]["ollama"]["text"] == (f"not from this run: run {stale} of 2026-11-29; this run is "
                                                        f"{RUN} (with {retry})")
    assert f"This run: {RUN} with {retry}, its other sessions (the weekly run's)." in render_report(comparison, [])


def test_cellbench_report_takes_the_run_and_what_to_do_with_other_runs(tmp_path, capsys):
    write_cell(tmp_path, Spec(run_id=EARLIER, finished_at="2026-11-29T10:00:30+00:00"))
    d = write_cell(tmp_path, Spec(framework="vllm")).parent
    assert cellbench(["report", "--results-dir", str(tmp_path), "--other-runs", "leave-out"]) == 0
    err = capsys.readouterr().err
    assert f"  left out llamacpp_{EARLIER}.json: run {EARLIER} of 2026-11-29; this run is {RUN} " \
           "(--other-runs mark shows it)" in err
    assert json.loads((d / "comparison.json").read_text())["frameworks"] == ["vllm"]
    assert cellbench(["report", "--results-dir", str(tmp_path), "--run-id", EARLIER]) == 0
    capsys.readouterr()
    assert "| Metric | llamacpp | vllm (not this run) |" in (d / "REPORT.md").read_text()


def test_a_wrong_model_cell_shows_its_figures_as_the_served_models(tmp_path):
    write_cell(tmp_path, Spec())
    d = put(tmp_path / "tiny" / SLUG / "chat", wrong_model(synthetic_result(Spec(framework="vllm")))).parent
    comparison = build_comparison(d, machine=SLUG)
    assert comparison["standing"]["vllm"]["served_model"] == "other-model"
    report = render_report(comparison, [])
    assert "| Metric | llamacpp | vllm (wrong-model: served other-model) |" in section(report, "Concurrency 1")
    rows = list(csv.DictReader(io.StringIO(comparison_csv([comparison]))))
    assert {r["model"] for r in rows if r["framework"] == "vllm"} == {"other-model"}
    assert {r["model"] for r in rows if r["framework"] == "llamacpp"} == {"tiny"}


def test_an_interrupted_result_is_marked_and_in_no_order(split):
    comparison = build_comparison(split, machine=SLUG)
    comparison["results"]["vllm"] = cast(Result, unfinished(comparison["results"]["vllm"], gone_pid()))
    comparison["standing"]["vllm"] = standing_of(comparison["results"]["vllm"], RUN).to_json()
    report = render_report(comparison, [])
    assert "| Metric | llamacpp | vllm (interrupted) |" in section(report, "Concurrency 1")
    assert "- Not judged: vllm (interrupted)." in section(report, "Between frameworks")


# ---------------------------------------------------------------- comparison.csv


def test_the_csv_flags_each_row_and_puts_the_ok_results_first(tmp_path):
    write_cell(tmp_path, Spec(framework="vllm", run_id=EARLIER, finished_at="2026-11-29T10:00:30+00:00"))
    write_cell(tmp_path, Spec(framework="ollama", failed=3))
    d = write_cell(tmp_path, Spec()).parent
    rows = list(csv.DictReader(io.StringIO(comparison_csv([build_comparison(d, machine=SLUG)]))))
    assert list(rows[0])[5:8] == ["verdict", "standing", "level"]
    flags = {r["framework"]: r["standing"] for r in rows}
    assert flags == {"llamacpp": "ok", "ollama": "degraded",
                     "vllm": f"not from this run (run {EARLIER} of 2026-11-29)"}
    assert list(dict.fromkeys(r["framework"] for r in rows)) == ["llamacpp", "ollama", "vllm"]


# ---------------------------------------------------------------- the HTML review


def test_html_figures_of_a_cell_not_from_this_run_carry_a_badge_and_sort_after_the_ok_ones():
    result = synthetic_result(Spec(failed=3))
    data = {"verdict": "degraded", "reason": result["verdict"]["reason"], "annotations": [],
            "row": columns.row_data(result)}
    cells = columns.row_cells(data, RUN)
    assert '<span class="cellbench-standing" title="degraded: 6/16 requests failed' in cells[2]
    assert '<span data-sort="0' in cells[2] and '<span data-sort="1' in cells[3]  # tok/s: best is high; TTFT low
    ok = synthetic_result(Spec())
    kept = columns.row_cells({"verdict": "ok", "reason": "", "annotations": ["resumed"],
                                  "row": columns.row_data(ok)}, "20261201T000000Z-bbbb")
    assert ">not this run</span>" in kept[2] and f"run {RUN} of 2026-11-30" in kept[2]
    fresh = columns.row_cells({"verdict": "ok", "reason": "", "annotations": [],
                                   "row": columns.row_data(ok)}, RUN)
    assert "cellbench-standing" not in "".join(fresh) and '<span data-sort="1' in fresh[2]


def test_the_html_summary_marks_and_orders_its_cells():
    cells = [{"verdict": v, "framework": fw, "split": "chat", "row": columns.row_data(synthetic_result(spec))}
             for v, fw, spec in (("degraded", "vllm", Spec(framework="vllm", failed=3)),
                                 ("ok", "llamacpp", Spec()))]
    html = html_summary.session_summary_html(cells, RUN)
    assert html.index("<tr><td>llamacpp chat</td>") < html.index("<tr><td>vllm chat (degraded)</td>")
    assert " (degraded)</td>" in html and "Marked figures stand in no order: vllm chat (degraded): degraded: " in html
    assert "<th>fidelity</th>" not in html  # no cell ran it


def test_the_html_summary_gives_each_cells_fidelity_beside_its_speed():
    runs = {"llamacpp": Spec(), "vllm": Spec(framework="vllm", failed=3)}
    cells = []
    for fw, spec in runs.items():
        result = synthetic_result(spec)
        agreed = {"prompts": 16, "agree_tokens": 16, "agree": 16, "agree_share": 1.0, "agree_ci95": [0.8, 1.0],
                  "identical": 16, "median_divergence": 32.0, "median_ci95": None, "divergences": [None] * 16}
        result["fidelity"] = {"prompts": 16, "max_tokens": 32, "unit": "tokens", "answers": f"{fw}.fidelity.jsonl",
                              "logprobs": True, "self": agreed, "reference_framework": "llamacpp"}
        if fw == "vllm":
            result["fidelity"].update(reference="llamacpp_x.json", vs_reference=agreed, flagged=False)
        cells.append({"verdict": "ok" if fw == "llamacpp" else "degraded", "framework": fw, "split": "chat",
                      "row": columns.row_data(result)})
    html = html_summary.session_summary_html(cells, RUN)
    assert "<th>fidelity</th>" in html
    assert "<td>the reference; itself: 16/16 alike to 16 tokens</td></tr>" in html
    # a cell that does not stand ok is marked at its fidelity as at every figure
    assert "<td>16/16 alike to 16 tokens vs llamacpp, median divergence 32 (degraded)</td></tr>" in html


# ---------------------------------------------------------------- cellbench compare


def test_compare_does_not_judge_a_pair_with_a_side_that_is_not_ok(tmp_path, capsys):
    old = write_cell(tmp_path / "old", Spec(requests=40))
    new = write_cell(tmp_path / "new", Spec(requests=40, failed=12, speed=0.5, run_id="20261201T100000Z-bbbb"))
    code = cellbench(["compare", str(old), str(new)])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "regression" not in out.split("not judged")[0] and "improvement (" not in out
    assert f"not judged (1): a side that is not ok is never faster or slower than another\n  tiny/{SLUG}/chat/" \
           "llamacpp: new: degraded: 24/80 requests failed" in out
    assert out.rstrip().splitlines()[-1].startswith("0 regressions, 0 improvements, 0 no detectable change, "
                                                    "0 cannot tell; 1 cell not judged")
    assert cellbench(["compare", str(old), str(new), "--json"]) == 3
    found = json.loads(capsys.readouterr().out)
    assert found["changes"] == [] and found["not_judged"][0]["why"].startswith("new: degraded: 24/80")


# ---------------------------------------------------------------- the merged report


def test_the_merged_report_marks_a_degraded_cell_and_leaves_it_out_between_machines(tmp_path):
    write_cell(tmp_path / "m1", Spec(levels=(1,), requests=40), machine=machine("m1"))
    write_cell(tmp_path / "m2", Spec(levels=(1,), requests=40, failed=12), machine=machine("m2"))
    write_cell(tmp_path / "m3", Spec(levels=(1,), requests=40, speed=0.9), machine=machine("m3"))
    merged = gather.collect([tmp_path / m for m in ("m1", "m2", "m3")], ["m1", "m2", "m3"])
    cells = merged["tables"][0]["cells"]["llamacpp"]
    assert cells["m2"]["standing"]["standing"] == "degraded" and cells["m1"]["standing"]["ok"]
    md = render.render_markdown(merged, {})
    assert render.cell_text(cells["m2"]).startswith("degraded · c=1 ")
    between = md.split("### Between machines — tiny chat\n", 1)[1].split("\n### ", 1)[0]
    assert "- llamacpp: not judged: m2 (degraded)" in between
    order = next(line for line in between.splitlines() if line.startswith("- llamacpp at c=1: "))
    assert "m2" not in order and "m1" in order and "m3" in order
    assert render.by_machine_png(merged["tables"][0]) is not None  # drawn, hatched and labelled


def test_a_merged_cell_of_an_earlier_run_says_so(tmp_path):
    root = tmp_path / "m1"
    write_cell(root, Spec(levels=(1,)), machine=machine("m1"))
    write_cell(root, Spec(framework="vllm", levels=(1,), run_id=EARLIER), machine=machine("m1"))
    merged = gather.collect([root], ["m1"])
    text = render.cell_text(merged["tables"][0]["cells"]["vllm"]["m1"])
    assert text.startswith(f"ok, not from this run (run {EARLIER} of 2026-11-30) · c=1 ")


# ---------------------------------------------------------------- the journal's comparison with the last run


def test_the_journal_does_not_judge_a_run_against_a_degraded_one(tmp_path):
    before = write_cell(tmp_path, Spec(requests=40, run_id=EARLIER, failed=12))
    now = write_cell(tmp_path, Spec(requests=40))
    found = against_previous(now)
    assert found is not None and found["regressions"] == [] and sum(found["counts"].values()) == 0
    assert previous_line(found) == (f"against run {EARLIER}: not judged: run {EARLIER}: degraded: "
                                    f"{read_result(before)['verdict']['reason']}")
    journal = Journal.open(tmp_path / "tiny" / SLUG, model="tiny", machine=SLUG, started_at=now_iso())
    journal.record(CellEntry("llamacpp", "chat", "ok", "fine", str(now), [], {}))
    page = journal.md_path.read_text()
    assert f"- llamacpp / chat against run {EARLIER}: not judged: run {EARLIER}: degraded: " in page
    assert "regression" not in page.split("## Compared With The Previous Run", 1)[1].split("\n## ", 1)[0]


def test_comparison_read_back_keeps_the_flags(split):
    from bench.reports.comparison import read_comparison, write_comparison

    comparison: Comparison = read_comparison(write_comparison(split, machine=SLUG))
    assert comparison["standing"]["vllm"]["marks"][0]["kind"] == "degraded" and comparison["left_out"] == []
