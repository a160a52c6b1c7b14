"""RAPL's energy counters read from a powercap tree laid out as Linux lays it out."""

from __future__ import annotations

from pathlib import Path

import pytest

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
