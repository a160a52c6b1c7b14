"""RAPL's energy counters read from a powercap tree laid out as Linux lays it out, and the idle
power baseline (`idle_power`) with stand-in sources: there is no GPU and no readable RAPL on the
machine these tests were written on."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from bench.host import gpu, power
from bench.host.power import Rapl, readings

RANGE_UJ = 262143328850  # max_energy_range_uj of an Intel package domain


def domain(root: Path, name: str, label: str, energy_uj: int) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(f"{label}\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")
    return d


@pytest.fixture
def powercap(tmp_path) -> Path:
    """Two packages, each with a core sub-domain (counted within its package, so not again), and
    the control-type folder, which has no counter."""
    root = tmp_path / "powercap"
    (root / "intel-rapl").mkdir(parents=True)
    (root / "intel-rapl" / "enabled").write_text("1\n")
    domain(root, "intel-rapl:0", "package-0", 1_000_000)
    domain(root, "intel-rapl:0:0", "core", 900_000)
    domain(root, "intel-rapl:1", "package-1", 2_000_000)
    return root


def test_the_packages_counters_are_summed_and_unwrapped(powercap):
    rapl = Rapl(powercap)
    assert rapl and rapl.joules() == pytest.approx(3.0)  # 1 J + 2 J; the core domain is inside package 0
    (powercap / "intel-rapl:0" / "energy_uj").write_text("4000000\n")
    assert rapl.joules() == pytest.approx(6.0)
    (powercap / "intel-rapl:1" / "energy_uj").write_text("500000\n")  # wrapped at its range since the last read
    assert rapl.joules() == pytest.approx(4.0 + (500_000 + RANGE_UJ) / 1e6)
    read = rapl.read()
    assert read["joules"] == pytest.approx(4.0 + (500_000 + RANGE_UJ) / 1e6) and read["wall"] > 0


def test_no_powercap_tree_is_no_source(tmp_path):
    assert not Rapl(tmp_path / "absent")
    assert not Rapl(tmp_path)


def test_a_sample_gives_its_gpus_summed_watts_and_the_cpu_counters_at_their_own_read():
    sample = {"t": 1.0, "wall": 100.0, "gpu": [{"index": 0, "power_w": 250.0}, {"index": 1, "power_w": None},
                                              {"index": 2, "power_w": 50.5}],
              "cpu_energy": {"joules": 7.5, "wall": 100.004}}
    gpu, cpu = readings(sample)
    assert (gpu.device, gpu.wall, gpu.value) == ("gpu", 100.0, 300.5)
    assert (cpu.device, cpu.wall, cpu.value) == ("cpu", 100.004, 7.5)
    assert readings({"t": 0.0, "wall": 1.0, "gpu": [{"index": 0, "power_w": None}]}) == []


# ---------------------------------------------------------------- the idle baseline


@pytest.fixture
def no_sources(tmp_path, monkeypatch):
    """This machine as a CPU VM: no powercap tree, no NVML, no nvidia-smi, not macOS."""
    monkeypatch.setattr(power, "POWERCAP", tmp_path / "no-powercap")
    monkeypatch.setattr(gpu, "PLATFORM", "linux")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_idle_power_without_a_source_returns_nothing_at_once(no_sources):
    t0 = time.monotonic()
    assert power.idle_power(seconds=3.0) == []
    assert time.monotonic() - t0 < 0.5, "a machine with no power source must not wait"


class FakeGpu:
    """Gpu's interface, reading an H200's idle power (81 W, the figure of a real run, varying a
    little) and a second GPU that has no power reading."""

    WATTS = [80.0, 81.0, 82.0, 81.0, 81.0, 80.5, 81.5]

    def __init__(self) -> None:
        self.kind = "nvidia-smi"
        self.reads = 0
        self.closed = False

    def read(self) -> list[dict]:
        watts = self.WATTS[self.reads % len(self.WATTS)]
        self.reads += 1
        return [{"index": 0, "power_w": watts}, {"index": 1, "power_w": None}]

    def close(self) -> None:
        self.closed = True


class FakeRapl:
    """Package counters drawing a steady 40 W."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def __bool__(self) -> bool:
        return True

    def joules(self) -> float:
        return 1000.0 + 40.0 * (time.monotonic() - self.t0)


def test_idle_power_is_each_sources_mean_over_the_span(no_sources, monkeypatch):
    made: list[FakeGpu] = []
    monkeypatch.setattr(power, "Gpu", lambda: made.append(FakeGpu()) or made[-1])
    monkeypatch.setattr(power, "Rapl", FakeRapl)
    t0 = time.monotonic()
    gpu_idle, cpu_idle = power.idle_power(seconds=1.5, interval_s=0.25)
    took = time.monotonic() - t0
    assert 1.5 <= took < 10.0
    assert gpu_idle["device"] == "gpu" and gpu_idle["source"] == "nvidia-smi" and gpu_idle["samples"] == 7
    assert gpu_idle["watts"] == pytest.approx(sum(FakeGpu.WATTS) / 7), "the mean of the readings"
    assert 1.4 <= gpu_idle["seconds"] <= took + 0.001  # rounded to the millisecond
    assert cpu_idle["device"] == "cpu" and cpu_idle["source"] == "rapl" and cpu_idle["samples"] == 7
    # A reading's time and its counter are taken a moment apart, and on a busy host that moment can
    # be milliseconds (the scheduler's time slice) of the 1.5 s span: 5% holds a 75 ms preemption.
    assert cpu_idle["watts"] == pytest.approx(40.0, rel=0.05), "the counters' joules over their span"
    assert made[0].closed, "the GPU reader (metalstat's process on a Mac) is closed"


def test_a_source_that_fails_is_dropped_without_raising(no_sources, monkeypatch):
    class Broken(FakeGpu):
        def read(self) -> list[dict]:
            raise RuntimeError("nvidia-smi exit code 9: NVIDIA-SMI has failed")

    monkeypatch.setattr(power, "Gpu", Broken)
    t0 = time.monotonic()
    assert power.idle_power(seconds=3.0) == []
    assert time.monotonic() - t0 < 0.5, "no source left: no reason to wait out the span"
