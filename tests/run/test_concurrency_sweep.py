"""`--concurrency sweep`: closed-loop levels searched for the highest concurrency meeting --slo,
over whole numbers of slots (bench.run.levels.sweep.ConcurrencySweep): the search's steps, its
options, and its table in REPORT.md. The real llama-server run is in tests/cells/test_open_loop_cells.py."""

from __future__ import annotations

import json

import pytest

from bench.core.metrics.stats.attainment import Decision
from bench.core.open_loop import parse_slos
from bench.core.result.files import write_result
from bench.reports.comparison import build_comparison
from bench.reports.markdown import write_report
from bench.run.levels.sweep import ConcurrencySweep, SweepPlan
from bench.run.parsing import load_plan
from tests.support.results import MACHINE, write_cell

SLO = parse_slos("ttft_p90=500ms")


def _search(limit: int, plan: SweepPlan, decisions: dict[int, Decision] | None = None) -> ConcurrencySweep:
    """A search against a server that meets the SLO up to `limit` slots."""
    search = ConcurrencySweep(plan, SLO)
    while (c := search.next_rate()) is not None:
        assert c == int(c) and c >= 1, "a concurrency is a whole number of slots"
        search.record(c, c <= limit, 2.0 * c if c <= limit else None, (decisions or {}).get(int(c)))
    return search


def test_the_search_doubles_then_bisects_to_the_nearest_whole_number():
    search = _search(11, SweepPlan(start=1, tolerance=0.01, max_levels=12))
    assert [int(c) for c, _ in search.tried] == [1, 2, 4, 8, 16, 12, 10, 11]
    out = search.concurrency_outcome()
    assert (out["best_concurrency"], out["failing_concurrency"], out["goodput_rps"]) == (11, 12, 22.0)
    assert out["concurrencies"] == [1, 2, 4, 8, 16, 12, 10, 11] and out["stopped"].startswith("no level left between")
    assert "c=11" in out["stopped"] and "c=12" in out["stopped"]


def test_the_search_halves_from_a_failing_start_and_stops_when_one_slot_misses():
    search = _search(3, SweepPlan(start=16, tolerance=0.1, max_levels=8))
    assert [int(c) for c, _ in search.tried] == [16, 8, 4, 2, 3]
    assert search.concurrency_outcome()["best_concurrency"] == 3
    none = _search(0, SweepPlan(start=4, max_levels=8))
    assert [int(c) for c, _ in none.tried] == [4, 2, 1]
    out = none.concurrency_outcome()
    assert out["best_concurrency"] is None and out["stopped"] == "c=1 failed, and there is no level below it"


def test_the_search_answers_with_confidence():
    decided: dict[int, Decision] = {1: "met", 2: "met", 4: "cannot tell", 8: "missed", 6: "missed", 5: "cannot tell"}
    out = _search(5, SweepPlan(start=1, tolerance=0.1, max_levels=6), decided).concurrency_outcome()
    assert out["concurrencies"] == [1, 2, 4, 8, 6, 5]
    assert (out["best_met_concurrency"], out["lowest_missed_concurrency"]) == (2, 6)
    assert out["undecided_concurrencies"] == [4, 5] and out["decisions"] == [decided[c] for c in out["concurrencies"]]


def test_the_options_ask_for_an_slo_and_a_whole_start():
    plan = load_plan(None, concurrency="sweep:4", slo="ttft_p90=1s", sweep_levels=5, sweep_tolerance=0.2)
    assert plan is not None and plan.concurrency_sweep == SweepPlan(4, 0.2, 5) and not plan.open_loop
    default = load_plan(None, concurrency="sweep", slo="ttft_p90=1s")
    assert default is not None and default.concurrency_sweep == SweepPlan(1, 0.1, 8)
    with pytest.raises(ValueError, match="give --slo too"):
        load_plan(None, concurrency="sweep")
    with pytest.raises(ValueError, match="a whole start of 1 or more"):
        load_plan(None, concurrency="sweep:2.5", slo="ttft_p90=1s")
    with pytest.raises(ValueError, match="cannot repeat --concurrency sweep"):
        load_plan(None, concurrency="sweep", slo="ttft_p90=1s", rounds=3)
    with pytest.raises(ValueError, match="--sweep-levels and --sweep-tolerance bound --request-rate sweep"):
        load_plan("4", sweep_levels=3)


def test_report_gives_the_concurrency_sweep_beside_the_rate_sweeps(tmp_path):
    path = write_cell(tmp_path, framework="llamacpp", levels=(1, 2, 4))
    result = json.loads(path.read_text())
    result["run_config"]["levels"] = ["sweep"]
    search = _search(2, SweepPlan(start=1, tolerance=0.1, max_levels=3), {1: "met", 2: "cannot tell", 4: "missed"})
    result["concurrency_sweep"] = search.concurrency_outcome()
    result["run_config"]["load"] = {"mode": "closed", "slo": {"ttft_p90": 500.0},
                                    "concurrency_sweep": {"start": 1, "tolerance": 0.1, "max_levels": 3}}
    write_result(path, result)  # validated as it is written
    report = write_report(path.parent, build_comparison(path.parent, machine=MACHINE["slug"])).read_text()
    section = report.split("## SLO sweep\n", 1)[1].split("\n## ", 1)[0]
    assert ("| llamacpp | ttft_p90=500ms | c=2 | 4.00 | c=4 | met up to c=1, missed from c=4, undecided: c=2 | "
            "c=1 met, c=2 met, c=4 missed | the level cap: 3 levels run |") in section
