"""A machine's noise floor (bench.core.noise): measured from a result of K rounds, stored per cell,
loaded back with a clear error for a broken file, and able to say where a result ran otherwise.

The results with rounds are built by hand to the rounds contract (a level keeps its K rounds in
`rounds`, each a level with its `round`), from a synthetic cell's levels."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.core import noise
from bench.core.metrics.stats.change import FloorSpread, compare_levels
from tests.support.results import synthetic_result

SCALES = (1.00, 1.10, 0.95)  # each round's output throughput against the first; TTFT p50 moves the other way


def with_rounds(result: dict[str, Any], scales: tuple[float, ...] = SCALES) -> dict[str, Any]:
    """`result` as a cell of len(scales) rounds would write it: each level's rounds are copies
    of it with output tok/s times the scale and TTFT p50 divided by it; the level keeps medians."""
    out = copy.deepcopy(result)
    for level in out["levels"]:
        rounds = []
        for k, scale in enumerate(scales, start=1):
            r = copy.deepcopy(level)
            r["round"] = k
            r["output_throughput_tps"] = level["output_throughput_tps"] * scale
            r["ttft_ms"]["p50"] = level["ttft_ms"]["p50"] / scale
            rounds.append(r)
        level["rounds"] = rounds
        level["uncertainty"] = {"basis": "rounds", "rounds": len(scales), "windows": None}
    return out


def log_sd(values: list[float]) -> float:
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


@pytest.fixture
def result() -> dict[str, Any]:
    return with_rounds(dict(synthetic_result(requests=12)))


def test_the_floor_is_each_figures_log_spread_across_the_rounds(result):
    floor = noise.measure(result, source="llamacpp_x.json")
    assert (floor.model, floor.split, floor.framework, floor.runs) == ("tiny", "chat", "llamacpp", 3)
    assert floor.measured_at == "2026-11-30T10:00:30Z", "UTC"
    assert set(floor.levels) == {"c=1", "c=2"}
    expected = log_sd(list(SCALES))  # the level's own value cancels out of a log spread
    assert floor.levels["c=1"]["output_throughput_tps"] == pytest.approx(expected)
    assert floor.levels["c=2"]["ttft_ms.p50"] == pytest.approx(expected)
    assert floor.levels["c=1"]["tpot_ms.p50"] == pytest.approx(0.0), "identical in every round"
    assert floor.settings["requests_per_level"] == 12 and floor.settings["framework_version"] == "1.0.0"
    assert floor.settings["prompts.source"] == "chat.json", "the prompts file, not the checkout it lies in"
    spread = floor.spreads("c=1")["output_throughput_tps"]
    assert spread == FloorSpread(spread.log_sd, 3, "2026-11-30") and spread.log_sd == pytest.approx(expected)
    assert floor.spreads("c=16") == {}


def test_a_figure_a_round_lacks_or_has_at_zero_is_left_out(result):
    result["levels"][0]["rounds"][1]["output_throughput_tps"] = 0.0
    result["levels"][0]["rounds"][2]["ttft_ms"]["p50"] = None
    floor = noise.measure(result)
    assert "output_throughput_tps" not in floor.levels["c=1"] and "ttft_ms.p50" not in floor.levels["c=1"]
    assert "output_throughput_tps" in floor.levels["c=2"]


def test_a_result_of_one_round_has_no_floor_and_says_what_it_needs():
    with pytest.raises(noise.FloorError, match=r"--rounds N, N >= 2"):
        noise.measure(dict(synthetic_result()), source="one.json")


def test_a_written_floor_loads_back_from_its_cells_place(tmp_path: Path, result):
    floor = noise.measure(result)
    path = noise.write(floor, noise.floor_path(tmp_path, "tiny", floor.machine, "chat", "llamacpp"))
    assert path == tmp_path / "tiny" / floor.machine / "noise" / "chat" / "llamacpp.json"
    back = noise.load(tmp_path, "tiny", floor.machine, "chat", "llamacpp")
    assert back == floor and back is not None and back.path == path
    assert noise.load(tmp_path, "tiny", floor.machine, "agent", "llamacpp") is None


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.pop("runs"), '"runs" must be an integer >= 2'),
    (lambda d: d.update(kind="something"), '"kind" must be'),
    (lambda d: d["levels"]["c=1"].update({"ttft_ms.p42": 0.1}), "'ttft_ms.p42' is not a compared figure"),
    (lambda d: d["levels"]["c=1"].update({"ttft_ms.p50": -1}), "must be a number >= 0"),
])
def test_a_broken_floor_file_is_refused_naming_the_file_and_the_field(tmp_path: Path, result, edit, message):
    floor = noise.measure(result)
    path = noise.write(floor, noise.floor_path(tmp_path, "tiny", floor.machine, "chat", "llamacpp"))
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(noise.FloorError, match="not a cellbench noise floor") as caught:
        noise.load(tmp_path, "tiny", floor.machine, "chat", "llamacpp")
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_a_floor_file_that_is_not_json_is_refused(tmp_path: Path):
    path = noise.floor_path(tmp_path, "tiny", "m", "chat", "llamacpp")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(noise.FloorError, match="cannot read a noise floor"):
        noise.load(tmp_path, "tiny", "m", "chat", "llamacpp")


def test_differs_from_names_each_setting_a_result_ran_otherwise(result):
    floor = noise.measure(result)
    assert floor.differs_from(result) == []
    other = dict(synthetic_result(requests=40))
    other["framework"]["version"] = "2.0.0"
    other["run_config"]["request_extras"]["ignore_eos"] = True
    assert floor.differs_from(other) == ["framework_version: floor \"1.0.0\", this \"2.0.0\"",
                                         "request_extras.ignore_eos: floor null, this true",
                                         "requests_per_level: floor 12, this 40"]


def test_a_floor_wider_than_a_levels_own_interval_widens_the_comparison(result):
    """The point of a floor: a within-run interval cannot see run-to-run noise; with the floor,
    a 5% difference in TTFT p50 that the run alone calls a regression is no detectable change."""
    floor = noise.measure(with_rounds(result, (1.0, 1.25, 0.8, 1.1, 0.9)))
    old = copy.deepcopy(result["levels"][0])
    del old["rounds"]
    old["ttft_ms"]["ci95"]["p50"] = {"low": old["ttft_ms"]["p50"] * 0.99, "high": old["ttft_ms"]["p50"] * 1.01}
    new = copy.deepcopy(old)
    new["ttft_ms"]["p50"] *= 1.05
    new["ttft_ms"]["ci95"]["p50"] = {"low": new["ttft_ms"]["p50"] * 0.99, "high": new["ttft_ms"]["p50"] * 1.01}

    def ttft(changes: list) -> Any:
        return next(c for c in changes if c.figure.key == "ttft_ms.p50")

    alone = ttft(compare_levels(old, new))
    floored = ttft(compare_levels(old, new, old_floor=floor.spreads("c=1"), new_floor=floor.spreads("c=1")))
    assert alone.decision == "regression" and alone.basis == "within-run"
    assert floored.decision == "no detectable change" and floored.basis.startswith("noise floor of 2026-11-30")
