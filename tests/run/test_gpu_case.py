"""A slower cell's GPU reading (bench.run.cell_result.gpu_case, the journal's and the suspicious
change's words): idle, throttling or busy, from NVIDIA's samples as from metalstat's."""

from __future__ import annotations

from bench.run.cell_result import gpu_case


def samples(util: float, clocks: list[float], key: str = "clock_mhz") -> list[dict]:
    return [{"gpu": [{"index": 0, "util_percent": util, key: clock}]} for clock in clocks]


def test_an_nvidia_clock_falling_while_busy_is_throttling():
    case = gpu_case(samples(97.0, [1980.0] * 3 + [1900.0] * 3 + [1410.0] * 3))
    assert case is not None and case.endswith("throttling") and "from 1980 to 1410 MHz" in case


def test_an_earlier_sidecar_s_metalstat_frequency_still_counts():
    case = gpu_case(samples(90.0, [1398.0] * 3 + [900.0] * 3, key="freq_mhz"))
    assert case is not None and case.endswith("throttling")


def test_idle_and_busy():
    idle = gpu_case(samples(10.0, [1980.0] * 6))
    assert idle is not None and idle.startswith("GPU mostly idle")
    busy = gpu_case(samples(95.0, [1980.0] * 6))
    assert busy is not None and busy.endswith("the slowdown looks real")
    assert gpu_case(samples(95.0, [1980.0] * 2)) is None  # too few readings to say
