"""The figures the server's watch measures (bench.core.figures.memory, .gpu): what the sampler's
readings over a level give, how rounds pool them, how comparisons judge memory, and the
annotations a GPU's readings lead to."""

from __future__ import annotations

import copy

import pytest

from bench.core import figures
from bench.core.annotations import annotations_for
from bench.core.figures.declare import Sampled
from bench.core.figures.gpu import throttled
from bench.core.figures.memory import MIB
from bench.core.metrics.stats.change import FIGURES, ONE_FIGURE, Change, FloorSpread, compare_levels
from bench.core.result.files import validate
from bench.core.result.model import Level
from bench.core.rounds import combine_rounds
from bench.host.samples import GpuSample, MemorySample
from tests.support.results import synthetic_result

GIB = 1024**3


def memory(wall: float, rss: int | None, tree_gpu: int | None = None, device: int | None = None,
           system: int | None = 8 * GIB) -> MemorySample:
    return MemorySample(wall, rss, system, device, tree_gpu)


def busy(wall: float, util: float | None, clock: float | None, reasons: tuple[str, ...] | None = None,
         index: int = 0) -> GpuSample:
    return GpuSample(wall, index, util, clock, 2619.0, reasons)


def test_the_peak_is_of_rss_and_gpu_memory_read_together_not_of_each_apart():
    # RSS peaks at one reading, the tree's GPU memory at another: the server never held both peaks at once
    readings = [memory(1.0, 3 * GIB, 10 * GIB, 70 * GIB), memory(2.0, 2 * GIB, 12 * GIB, 80 * GIB),
                memory(3.0, 1 * GIB, 11 * GIB, 75 * GIB)]
    block = figures.watched(Sampled.over(0.5, 3.5, 1.0, readings, []))["memory"]
    assert block["peak_bytes"] == 14 * GIB  # 2 + 12, not 3 + 12
    assert (block["peak_rss_bytes"], block["peak_gpu_bytes"], block["peak_gpu_device_bytes"]) == (
        3 * GIB, 12 * GIB, 80 * GIB)
    assert block["samples"] == 3 and block["inside"] is True
    assert "gpu" not in figures.watched(Sampled.over(0.5, 3.5, 1.0, readings, []))  # no GPU reading: no block


def test_a_cpu_server_s_peak_is_its_rss_and_readings_outside_the_level_do_not_count():
    readings = [memory(0.0, 900 * MIB), memory(1.0, 100 * MIB), memory(2.0, 120 * MIB), memory(3.0, 950 * MIB)]
    block = figures.watched(Sampled.over(0.9, 2.1, 1.0, readings, []))["memory"]
    assert block["peak_bytes"] == block["peak_rss_bytes"] == 120 * MIB
    assert block["peak_gpu_bytes"] is None and block["peak_gpu_device_bytes"] is None


def test_a_level_shorter_than_the_interval_takes_the_next_reading_and_says_so():
    readings = [memory(1.0, 100 * MIB), memory(2.0, 150 * MIB), memory(3.0, 400 * MIB)]
    block = figures.watched(Sampled.over(1.2, 1.7, 1.0, readings, []))["memory"]
    assert (block["peak_bytes"], block["samples"], block["inside"]) == (150 * MIB, 1, False)
    assert figures.watched(Sampled.over(5.0, 6.0, 1.0, readings, [])) == {}  # nothing read after it: no figure


def test_rounds_pool_memory_to_the_median_with_its_interval_and_validate():
    levels = []
    for i, peak in enumerate((800, 820, 810)):
        level = copy.deepcopy(synthetic_result()["levels"][0])
        figures.attach(level, figures.watched(Sampled.over(0.0, 2.0, 1.0, [memory(1.0, peak * MIB)], [])))
        levels.append(dict(level, round=i + 1))
    combined = combine_rounds(levels)
    block = figures.block_of(combined, "memory")
    assert block["peak_bytes"] == 810 * MIB and block["samples"] == 3
    low, high = block["ci95"]["peak_bytes"]["low"], block["ci95"]["peak_bytes"]["high"]
    assert low < 810 * MIB < high and high / low < 1.2  # three close rounds: a narrow interval
    result = synthetic_result()
    result["levels"] = [combined]
    validate(result)  # the pooled block, ci95 included, is what the schema declares


def test_compare_judges_memory_across_rounds_and_will_not_from_one_round_alone():
    figure = next(f for f in FIGURES if f.key == "memory.peak_bytes")
    assert not figure.higher_is_better

    def level(peaks: list[int]) -> Level:
        rounds: list[Level] = []
        for i, peak in enumerate(peaks):
            lv = copy.deepcopy(synthetic_result()["levels"][0])
            figures.attach(lv, figures.watched(Sampled.over(0.0, 2.0, 1.0, [memory(1.0, peak * MIB)], [])))
            lv["round"] = i + 1
            rounds.append(lv)
        return combine_rounds(rounds) if len(rounds) > 1 else rounds[0]

    def judged(old: Level, new: Level, **floors: dict[str, FloorSpread]) -> Change:
        return next(c for c in compare_levels(old, new, **floors) if c.figure.key == "memory.peak_bytes")

    # a KV cache twice as large: about 2x the server's memory, three rounds each
    doubled = judged(level([400, 404, 398]), level([800, 806, 797]))
    assert doubled.decision == "regression" and doubled.low > 0.9
    same = judged(level([400, 404, 398]), level([401, 399, 403]))
    assert same.decision == "no detectable change"
    smaller = judged(level([800, 806, 797]), level([400, 404, 398]))
    assert smaller.decision == "improvement"
    one = judged(level([400]), level([800]))
    assert one.decision == "cannot tell" and one.why == f"old: {ONE_FIGURE}"
    floor = {"memory.peak_bytes": FloorSpread(0.02, 5, "2026-12-05T00:00:00Z")}
    beside = judged(level([400]), level([800]), old_floor=floor, new_floor=floor)
    assert beside.decision == "regression" and "noise floor" in beside.basis


def test_throttling_is_a_heat_or_power_reason_or_without_reasons_a_clock_that_fell_under_load():
    assert throttled([(98.0, 1980.0, ()), (99.0, 1755.0, ("sw_power_cap",))])
    assert not throttled([(98.0, 1980.0, ()), (99.0, 1410.0, ("applications_clocks_setting",))])  # asked for, not heat
    assert not throttled([(98.0, 1980.0, ()), (5.0, 345.0, ())])  # idle clocks down: reasons say nothing of heat
    # metalstat gives no reasons: a clock 30% down while the GPU stayed busy is throttling
    assert throttled([(95.0, 1398.0, None), (96.0, 980.0, None)])
    assert not throttled([(95.0, 1398.0, None), (10.0, 389.0, None)])  # it fell as the GPU went idle
    assert not throttled([(95.0, 1398.0, None), (96.0, 1300.0, None)])  # 7%: DVFS, not throttling


def test_the_gpu_block_and_its_annotations():
    readings = [memory(float(t), 2 * GIB, 120 * GIB, 132 * GIB) for t in (1, 2, 3)]
    # an H200 7-14% busy the whole level, at 1,980 MHz: the GPU was not what bounded it
    gpus = [busy(1.0, 7.0, 1980.0, ()), busy(2.0, 14.0, 1980.0, ()), busy(3.0, 9.0, 1980.0, ("gpu_idle",))]
    found = figures.watched(Sampled.over(0.5, 3.5, 1.0, readings, gpus))
    assert found["gpu"] == {"util_mean_percent": pytest.approx(10.0), "util_max_percent": 14.0,
                            "clock_min_mhz": 1980.0, "clock_max_mhz": 1980.0, "throttle_reasons": [],
                            "throttled": False, "gpus": 1, "samples": 3}
    level = dict(copy.deepcopy(synthetic_result()["levels"][0]), **found)
    assert annotations_for([level]) == ("gpu-idle",)
    hot = [busy(1.0, 97.0, 1980.0, ()), busy(2.0, 98.0, 1650.0, ("hw_thermal_slowdown",)), busy(3.0, 99.0, 1650.0, ())]
    level = dict(copy.deepcopy(synthetic_result()["levels"][0]), **figures.watched(
        Sampled.over(0.5, 3.5, 1.0, readings, hot)))
    assert figures.block_of(level, "gpu")["throttle_reasons"] == ["hw_thermal_slowdown"]
    assert annotations_for([level]) == ("throttled",)
    # a server that holds no GPU memory (a CPU stack on a GPU machine) leaves an idle GPU unannotated
    cpu_stack = [memory(float(t), 2 * GIB, 0, 3 * GIB) for t in (1, 2, 3)]
    level = dict(copy.deepcopy(synthetic_result()["levels"][0]), **figures.watched(
        Sampled.over(0.5, 3.5, 1.0, cpu_stack, gpus)))
    assert annotations_for([level]) == ()
    result = synthetic_result()
    figures.attach(result["levels"][0], found)
    validate(result)


def test_two_gpus_are_read_as_one_machine():
    readings = [memory(1.0, GIB, 2 * GIB, 4 * GIB)]
    gpus = [busy(1.0, 90.0, 1900.0, (), index=0), busy(1.0, 30.0, 1700.0, ("sw_power_cap",), index=1)]
    block = figures.watched(Sampled.over(0.5, 1.5, 1.0, readings, gpus))["gpu"]
    assert (block["gpus"], block["samples"], block["util_mean_percent"], block["clock_min_mhz"]) == (2, 1, 60.0, 1700.0)
    assert block["throttled"] and block["throttle_reasons"] == ["sw_power_cap"]


def test_two_rounds_pool_a_peak_to_a_whole_byte_count_and_the_machine_s_peaks_have_no_interval():
    rounds = []
    for i, (peak, system) in enumerate(((801, 1000), (804, 9000))):
        level = copy.deepcopy(synthetic_result()["levels"][0])
        figures.attach(level, figures.watched(Sampled.over(0.0, 2.0, 1.0, [
            memory(1.0, peak * MIB + 1, system=system * MIB)], [])))
        level["round"] = i + 1
        rounds.append(level)
    block = figures.block_of(combine_rounds(rounds), "memory")
    assert block["peak_bytes"] == round(802.5 * MIB + 1) and isinstance(block["peak_bytes"], int)
    assert set(block["ci95"]) == {"peak_bytes", "peak_rss_bytes"}  # the GPU's peak: none read
    assert block["peak_system_used_bytes"] == 5000 * MIB  # what else ran: a median, and no interval
    result = synthetic_result()
    result["levels"] = [combine_rounds(rounds)]
    validate(result)
