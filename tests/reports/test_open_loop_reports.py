"""Open-loop results in the result file and every report: levels are labelled by request rate,
and a rate level and a concurrency level never share an axis, a table or a comparison as if they
were one kind (REPORT.md, comparison.json, the HTML report, the plots, the suspicious check, the
journal's comparison with an imported result, the verdict's reason).

The open-loop cells are synthetic, as tests/support/results.py builds closed-loop ones: request
records on a seeded schedule, summarized by bench.core.metrics and judged by bench.core.verdicts.
"""

from __future__ import annotations

import json

import pytest

from bench.core.level_run import ClientHealth, LevelConfig, LevelRun, OpenLoop, level_label, rate_json
from bench.core.metrics import summarize_level, wall_span
from bench.core.open_loop import Load, Sweep, goodput, parse_slos
from bench.core.records import RequestRecord
from bench.core.result.files import cell_paths, result_schema, validate, write_result
from bench.core.result.model import Goodput, Level, OpenLoopBlock, Result
from bench.core.result.store import suspicious
from bench.core.verdicts import Evidence, Identity, classify
from bench.load.arrivals import arrival_offsets
from bench.reports import plots
from bench.reports.comparison import build_comparison
from bench.reports.markdown import write_report
from bench.reports.review import columns
from bench.reports.review import summary as html_summary
from tests.core import test_result_model
from tests.support.results import MACHINE, Spec, synthetic_result, write_cell

SLO = "ttft_p99=300ms,tpot_p99=20ms"


def _records(rate: float, n: int = 12, service: float = 0.2) -> list[RequestRecord]:
    """n requests on the seeded schedule of `rate`; TTFT grows with the rate (the server saturates):
    20 ms x rate², so 2 and 3 req/s meet a TTFT p99 of 300 ms and 4 req/s (320 ms) does not."""
    out = []
    for i, t in enumerate(arrival_offsets(rate, 1.0, n, seed=0)):
        ttft = 0.02 * rate**2 if rate != float("inf") else 1.0
        chunks = [t + ttft + 0.01 * k for k in range(int(service / 0.01))]
        out.append(RequestRecord(index=i, prompt_name=f"chat-{i:03d}", t_sched=t, t_admitted=t, t_send=t + 0.0003,
                                 t_first_byte=chunks[0], t_first_token=chunks[0], t_first_answer=chunks[0],
                                 t_end=chunks[-1], chunk_times=chunks, usage_completion_tokens=len(chunks),
                                 usage_prompt_tokens=40, finish_reason="length", served_model="tiny",
                                 http_status=200, done_marker=True))
    return out


def open_level(rate: float, *, slo: str | None = SLO, max_concurrency: int | None = None) -> Level:
    records = _records(rate)
    cfg = LevelConfig("http://127.0.0.1:8001", "tiny", 0, len(records), 0,
                      open_loop=OpenLoop(rate, max_concurrency=max_concurrency))
    span = wall_span(records)
    assert span is not None
    run = LevelRun(cfg, records, [], span[0], span[1], 1_796_000_000.0, False, None, ClientHealth(0.1, 1.0, 0.5),
                   schedule=arrival_offsets(rate, 1.0, len(records), seed=0), peak_in_flight=3)
    level = summarize_level(run)
    if slo:
        level["goodput"] = goodput(run, parse_slos(slo))
    return level


def open_result(framework: str = "vllm", rates: tuple[float, ...] = (2.0, 4.0), *, sweep: bool = False,
                run_id: str = "20261130T110000Z-bbbb") -> Result:
    """A closed-loop synthetic result made open-loop: its levels at `rates`, its run_config.load."""
    result = synthetic_result(framework=framework, run_id=run_id, levels=(1,))
    levels = [open_level(r) for r in rates]
    result["levels"] = levels
    result["run_config"]["levels"] = ["sweep"] if sweep else [level_label(lv) for lv in levels]
    result["run_config"]["load"] = {"mode": "open", "burstiness": 1.0, "max_concurrency": None, "seed": 0,
                                    "slo": {"ttft_p99": 300.0, "tpot_p99": 20.0},
                                    "sweep": {"start_rps": 2.0, "tolerance": 0.1, "max_levels": 4} if sweep else None}
    if not sweep:
        result["run_config"]["load"]["request_rates"] = [rate_json(r) for r in rates]
    result["servers"] = [{**result["servers"][0], "levels": [level_label(lv)]} for lv in levels]
    if sweep:
        passed = [lv["goodput"]["slo_met"] for lv in levels]
        best = max((r for r, ok in zip(rates, passed, strict=True) if ok), default=None)
        result["sweep"] = {"slo": {"ttft_p99": 300.0, "tpot_p99": 20.0}, "start_rps": rates[0], "tolerance": 0.1,
                           "max_levels": 4, "rates": list(rates), "passed": passed, "best_rps": best,
                           "failing_rps": min((r for r, ok in zip(rates, passed, strict=True) if not ok), default=None),
                           "goodput_rps": 1.5, "stopped": "the level cap: 4 levels run",
                           "decisions": [lv["goodput"]["slo_decision"] for lv in levels], "best_met_rps": None,
                           "lowest_missed_rps": 4.0, "undecided_rps": sorted(
                               r for r, lv in zip(rates, levels, strict=True)
                               if lv["goodput"]["slo_decision"] == "cannot tell")}
    verdict = classify(Evidence(levels=tuple(levels), identity=Identity("tiny", ("tiny",), ("tiny",))))
    result["verdict"] = verdict.to_json()
    validate(result)
    return result


def write_open_cell(results_root, result: Result):
    paths = cell_paths(results_root, "tiny", MACHINE["slug"], result["split"], result["framework"]["name"],
                       result["run_id"])
    paths.split_dir.mkdir(parents=True, exist_ok=True)
    with paths.requests.open("w") as sidecar:
        for lv in result["levels"]:
            key = {"request_rate": lv["request_rate"], "burstiness": 1.0, "max_concurrency": None}
            for record in _records(float(lv["request_rate"])):
                sidecar.write(json.dumps({**key, **record.to_json()}) + "\n")
    result["requests_file"] = paths.requests.name
    write_result(paths.result, result)
    return paths


# ---------------------------------------------------------------- the result file


def test_an_open_loop_level_is_labelled_by_its_rate_and_documented_by_the_schema():
    result = open_result(rates=(2.0, 4.0, float("inf")))
    assert test_result_model.undocumented(result, result_schema()) == []
    levels = result["levels"]
    assert [lv["request_rate"] for lv in levels] == [2.0, 4.0, "inf"] and all("concurrency" not in lv for lv in levels)
    assert [level_label(lv) for lv in levels] == ["2 req/s", "4 req/s", "inf req/s"]
    assert levels[0]["open_loop"]["arrivals"] == "poisson" and levels[2]["open_loop"]["arrivals"] == "all at once"
    assert levels[0]["goodput"]["slo_met"] and not levels[1]["goodput"]["slo_met"]
    assert result["verdict"]["reason"].endswith("2 req/s: " + result["verdict"]["reason"].split("2 req/s: ")[1])
    assert "c=" not in result["verdict"]["reason"]


@pytest.mark.parametrize("typed, pointer", [
    (OpenLoopBlock, "#/$defs/level/properties/open_loop"), (Goodput, "#/$defs/level/properties/goodput"),
    (Load, "#/properties/run_config/properties/load"), (Sweep, "#/properties/sweep"),
], ids=lambda v: getattr(v, "__name__", v))
def test_the_open_loop_typed_blocks_name_the_schemas_keys(typed, pointer):
    test_result_model.test_typed_dicts_name_the_schemas_keys(typed, pointer)


def test_the_schema_refuses_a_level_of_both_kinds_or_of_none():
    result = open_result()
    both = json.loads(json.dumps(result))
    both["levels"][0]["concurrency"] = 4
    with pytest.raises(Exception, match="valid"):
        validate(both)
    neither = json.loads(json.dumps(result))
    del neither["levels"][0]["request_rate"]
    with pytest.raises(Exception, match="valid"):
        validate(neither)


def test_a_rate_level_is_never_compared_with_a_concurrency_level_of_the_same_number():
    closed = synthetic_result(framework="vllm", levels=(2, 4))
    now = open_result(rates=(2.0, 4.0))
    for lv in now["levels"]:
        lv["output_throughput_tps"] = (lv["output_throughput_tps"] or 0) * 100  # 100x: suspicious if compared
    assert suspicious(now, closed) is None
    again = open_result(rates=(2.0, 4.0), run_id="20261130T120000Z-cccc")
    for lv in again["levels"]:
        lv["output_throughput_tps"] = (lv["output_throughput_tps"] or 0) * 100
    assert suspicious(again, open_result(rates=(2.0, 4.0))).startswith("output throughput against")
    assert "2 req/s: " in suspicious(again, open_result(rates=(2.0, 4.0)))


# ---------------------------------------------------------------- REPORT.md, comparison.json, plots


def test_report_keeps_rate_and_concurrency_levels_in_tables_of_their_own(tmp_path):
    write_cell(tmp_path, framework="llamacpp", levels=(1, 2))  # closed loop, c=1 and c=2
    paths = write_open_cell(tmp_path, open_result(framework="vllm", rates=(2.0, 4.0), run_id=Spec().run_id))
    split_dir = paths.split_dir
    comparison = build_comparison(split_dir, machine=MACHINE["slug"])
    warnings = comparison["methodology_warnings"]
    assert any(w.startswith('load.mode: llamacpp="closed", vllm="open"') for w in warnings), warnings
    report = write_report(split_dir, comparison).read_text()
    sections = {s.split("\n", 1)[0]: s for s in report.split("\n## ")[1:]}
    assert {"Concurrency 1", "Concurrency 2", "Request rate 2 req/s", "Request rate 4 req/s"} <= set(sections)
    rate2 = sections["Request rate 2 req/s"]
    assert "| Metric | llamacpp | vllm |" in rate2
    assert "| Successful / Failed | — | 12 / 0 |" in rate2, "the closed-loop framework has no rate level"
    for row in ("Offered rate (req/s)", "Achieved rate (req/s)", "Queueing delay p99 (ms)", "Goodput (req/s)"):
        assert f"| {row} |" in rate2, row
    assert "| Successful / Failed | 8 / 0 | — |" in sections["Concurrency 2"], "and the open-loop one no c=2"
    assert "Offered rate" not in sections["Concurrency 2"] and "Goodput" not in sections["Concurrency 2"]
    names = sorted(p.name for p in (split_dir / plots.PLOTS_DIR).iterdir())
    assert {"throughput.png", "throughput_rate.png", "latency_c1.png", "latency_r2.png", "latency_r4.png"} <= set(names)
    assert "![Output throughput against request rate (open loop)](plots/throughput_rate.png)" in report
    assert "![TTFT and TPOT at request rate 4 req/s](plots/latency_r4.png)" in report
    # the latency plot of a rate level drew its requests from the sidecar lines of that rate
    samples = plots.request_samples(split_dir, comparison["results"]["vllm"], ("rate", 4.0, 1.0, 0))
    assert samples is not None and len(samples["ttft_ms"]) == 12
    assert samples["ttft_ms"][0] == pytest.approx(320.0, abs=1.0)


def test_report_gives_each_frameworks_slo_sweep(tmp_path):
    paths = write_open_cell(tmp_path, open_result(framework="vllm", rates=(2.0, 4.0, 3.0), sweep=True))
    comparison = build_comparison(paths.split_dir, machine=MACHINE["slug"])
    report = write_report(paths.split_dir, comparison).read_text()
    section = report.split("## SLO sweep\n", 1)[1].split("\n## ", 1)[0]
    assert ("| vllm | ttft_p99=300ms, tpot_p99=20ms | 3 req/s | 1.50 | 4 req/s | none met, missed from 4 req/s, "
            "undecided: 2 req/s, 3 req/s | 2 req/s met, 4 req/s missed, 3 req/s met | "
            "the level cap: 4 levels run |") in section
    assert "| Goodput (req/s) | " in report
    # with 95% confidence: 12 of 12 within cannot show a p99 (that takes 299), 0 of 12 shows a miss
    decided = {s.split("\n", 1)[0]: next(line for line in s.splitlines() if line.startswith("| SLO at 95% "))
               for s in report.split("\n## ")[1:] if s.startswith("Request rate")}
    assert decided["Request rate 2 req/s"] == ("| SLO at 95% confidence | cannot tell (299 requests would decide "
                                               "ttft_p99; 299 requests would decide tpot_p99) |")
    assert decided["Request rate 4 req/s"] == "| SLO at 95% confidence | missed |"


def test_a_closed_loop_report_is_as_it_was(tmp_path):
    path = write_cell(tmp_path, framework="llamacpp", levels=(1, 2))
    comparison = build_comparison(path.parent, machine=MACHINE["slug"])
    report = write_report(path.parent, comparison).read_text()
    assert "Request rate" not in report and "Goodput" not in report and "SLO sweep" not in report
    assert not (path.parent / plots.PLOTS_DIR / plots.THROUGHPUT_RATE_PNG).exists()
    assert not any(w.startswith("load.") for w in comparison["methodology_warnings"])


# ---------------------------------------------------------------- the HTML report


def test_html_rows_name_the_rate_and_sort_rates_apart_from_concurrency_levels():
    row = columns.row_data(open_result(rates=(2.0, 8.0)))
    assert row["level"] is None and row["rate"] == "8" and row["level_label"] == "8 req/s"
    assert row["tps_by_rate"].keys() == {"2", "8"} and row["tps_by_level"] == {}
    cells = columns.row_cells({"verdict": "ok", "row": row})
    assert '<span data-sort="r' in cells[1] and ">8 req/s</span>" in cells[1]
    closed = columns.row_cells({"verdict": "ok", "row": columns.row_data(synthetic_result(levels=(1, 16)))})
    assert ">c=16</span>" in closed[1] and '<span data-sort="0' in closed[1]
    summary = html_summary.session_summary_html([
        {"framework": "vllm", "split": "chat", "verdict": "ok", "row": row},
        {"framework": "llamacpp", "split": "chat", "verdict": "ok",
         "row": columns.row_data(synthetic_result(levels=(1, 8)))}])
    assert "<th>c=1</th><th>c=8</th>" in summary and "<th>2 req/s</th><th>8 req/s</th>" in summary
    assert "Output tok/s at each concurrency level." in summary and "Output tok/s at each request rate." in summary
    assert summary.count('class="cellbench-throughput-plot"') == 2  # one per kind of level, never one axis
    assert 'alt="output tok/s against request rate, chat"' in summary
    table = columns.summary_html({"verdict": "ok", "reason": "fine"}, open_result(rates=(2.0,)), [])
    assert "<th>request rate</th>" in table and "<td>2 req/s</td>" in table and "goodput " in table
