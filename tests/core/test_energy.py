"""Energy per output token: the integral of the sampled power over a level, by hand."""

from __future__ import annotations

import pytest

from bench.core.lenses.energy import NO_SOURCE, cell_text, combined, level_energy
from bench.host.power import PowerSample


def gpu(*points: tuple[float, float]) -> list[PowerSample]:
    return [PowerSample("gpu", t, w) for t, w in points]


def test_gpu_power_is_integrated_over_the_level_with_its_ends_interpolated():
    # 100 W rising to 300 W over samples 1 s apart; the level runs from 0.5 s to 2.5 s
    samples = gpu((0.0, 100.0), (1.0, 200.0), (2.0, 300.0), (3.0, 300.0))
    block = level_energy(samples, 0.5, 2.5, 400, gpu_source="nvidia-smi", interval_s=1.0)
    (entry,) = block["sources"]
    # by hand: 0.5-1.0 s averages 175 W, 1.0-2.0 s 250 W, 2.0-2.5 s 300 W
    joules = 0.5 * 175 + 1.0 * 250 + 0.5 * 300
    assert entry["joules"] == pytest.approx(joules) == 487.5
    assert entry["avg_w"] == pytest.approx(joules / 2.0)
    assert entry["j_per_output_token"] == pytest.approx(joules / 400)
    assert (entry["device"], entry["source"], entry["samples"], entry["interval_s"]) == ("gpu", "nvidia-smi", 2, 1.0)
    assert cell_text(block) == "1.219 (gpu nvidia-smi, 243.8 W)"


def test_the_cpu_counters_difference_is_the_levels_energy():
    # RAPL joules since the counters' origin, read 1 s apart at a steady 40 W, then 10 W
    samples = [PowerSample("cpu", 10.0, 5000.0), PowerSample("cpu", 11.0, 5040.0), PowerSample("cpu", 12.0, 5050.0)]
    (entry,) = level_energy(samples, 10.25, 11.5, 100, gpu_source=None, interval_s=1.0)["sources"]
    assert entry["joules"] == pytest.approx(0.75 * 40 + 0.5 * 10)
    assert (entry["device"], entry["source"]) == ("cpu", "rapl")


def test_no_source_says_so_and_a_level_past_the_last_sample_is_not_guessed():
    none = level_energy([], 0.0, 1.0, 10, gpu_source=None, interval_s=1.0)
    assert none == {"sources": [], "note": NO_SOURCE} and cell_text(none) == "none: no power source"
    late = level_energy(gpu((0.0, 50.0), (1.0, 50.0)), 0.5, 1.5, 10, gpu_source="nvml", interval_s=1.0)
    assert late["sources"] == [] and "after the level's end" in late["note"]


def test_rounds_sum_their_joules_and_tokens_rather_than_average_their_ratios():
    a = level_energy(gpu((0.0, 100.0), (2.0, 100.0)), 0.0, 2.0, 100, gpu_source="nvml", interval_s=1.0)
    b = level_energy(gpu((0.0, 300.0), (1.0, 300.0)), 0.0, 1.0, 300, gpu_source="nvml", interval_s=1.0)
    (entry,) = combined([a, b])["sources"]
    assert entry["joules"] == pytest.approx(500) and entry["output_tokens"] == 400 and entry["wall_s"] == 3.0
    assert entry["j_per_output_token"] == pytest.approx(500 / 400)  # not the mean of 2.0 and 1.0
    assert entry["avg_w"] == pytest.approx(500 / 3)
    assert combined([level_energy([], 0, 1, 1, gpu_source=None, interval_s=1.0)] * 2)["note"] == NO_SOURCE


def test_the_energy_above_idle_takes_the_idle_power_over_the_level_off():
    # The H200's figures: 81 W idle before the cell, 125 W while it served; a 10 s level, 2,000 tokens
    samples = gpu(*((float(t), 125.0) for t in range(0, 12)))
    idle = [{"device": "gpu", "source": "nvml", "watts": 81.0, "samples": 6, "seconds": 3.0}]
    block = level_energy(samples, 1.0, 11.0, 2000, gpu_source="nvml", interval_s=1.0, idle=idle)
    (entry,) = block["sources"]
    assert entry["joules"] == pytest.approx(1250.0)
    assert entry["idle_w"] == 81.0
    assert entry["joules_above_idle"] == pytest.approx(1250.0 - 810.0)
    assert entry["j_per_output_token_above_idle"] == pytest.approx(440.0 / 2000)
    assert entry["j_per_output_token_above_idle"] < entry["j_per_output_token"]
    assert cell_text(block) == "0.625 (gpu nvml, 125.0 W, 0.22 above 81.0 W idle)"
    # the CPU's idle reading is not the GPU's: a source without its own idle reading has no figure above it
    cpu_only = level_energy(samples, 1.0, 11.0, 2000, gpu_source="nvml", interval_s=1.0,
                            idle=[{"device": "cpu", "source": "rapl", "watts": 20.0, "samples": 6, "seconds": 3.0}])
    assert "joules_above_idle" not in cpu_only["sources"][0]


def test_rounds_add_what_each_round_added_above_its_own_idle():
    samples = gpu(*((float(t), 125.0) for t in range(0, 32)))
    first = level_energy(samples, 0.0, 10.0, 1000, gpu_source="nvml", interval_s=1.0,
                         idle=[{"device": "gpu", "source": "nvml", "watts": 80.0, "samples": 6, "seconds": 3.0}])
    second = level_energy(samples, 10.0, 30.0, 1000, gpu_source="nvml", interval_s=1.0,
                          idle=[{"device": "gpu", "source": "nvml", "watts": 90.0, "samples": 6, "seconds": 3.0}])
    (entry,) = combined([first, second])["sources"]
    above = (1250.0 - 800.0) + (2500.0 - 1800.0)
    assert entry["joules_above_idle"] == pytest.approx(above)
    assert entry["j_per_output_token_above_idle"] == pytest.approx(above / 2000)
    assert entry["idle_w"] == pytest.approx((800.0 + 1800.0) / 30.0)  # the rounds' idle, by their wall times
    # a round without an idle reading (a result of an earlier cellbench) leaves the pooled figure out
    bare = level_energy(samples, 0.0, 10.0, 1000, gpu_source="nvml", interval_s=1.0)
    assert "joules_above_idle" not in combined([first, bare])["sources"][0]
