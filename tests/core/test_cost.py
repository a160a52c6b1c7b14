"""Cost per million output tokens (bench.core.figures.cost): the sums at known prices, which part
is unknown and why, and the nightly's machines.yaml prices reaching the cells' options."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from bench.core.figures import derived
from bench.core.figures.cost import derive
from bench.core.figures.declare import Prices
from bench.nightly.machines import Inputs, MachinesError, load_machines, matrix

# 1,000,000 output tokens in 3,600 s: a million tokens an hour
LEVEL: dict[str, Any] = {"output_tokens_total": 1_000_000, "wall_time_s": 3600.0}
GPU = {"device": "gpu", "joules": 7.2e6, "joules_above_idle": 3.6e6}  # 2 kWh drawn, 1 kWh above idle
CPU = {"device": "cpu", "joules": 3.6e6}  # 1 kWh, idle not read


def test_the_time_part_is_the_hourly_price_over_the_tokens_of_an_hour():
    cost = derive(LEVEL, Prices(hour=2.5))
    assert cost is not None and cost["time_per_mtok"] == pytest.approx(2.5) and cost["per_mtok"] == pytest.approx(2.5)
    half = derive({**LEVEL, "output_tokens_total": 500_000}, Prices(hour=2.5))
    assert half is not None and half["per_mtok"] == pytest.approx(5.0), "half the tokens in the hour: twice the cost"


def test_the_energy_part_is_above_idle_where_every_source_was_read_idle():
    above = derive({**LEVEL, "energy": {"sources": [GPU]}}, Prices(kwh=0.30, hour=2.5))
    assert above is not None and above["energy_basis"] == "above idle"
    assert above["energy_per_mtok"] == pytest.approx(0.30) and above["per_mtok"] == pytest.approx(2.80)
    total = derive({**LEVEL, "energy": {"sources": [GPU, CPU]}}, Prices(kwh=0.30))
    assert total is not None and total["energy_basis"] == "total", "the CPU's idle was not read: the whole draw"
    assert total["energy_per_mtok"] == pytest.approx(0.90) and total["unknown"] == []


def test_an_energy_price_on_a_machine_without_power_readings_is_unknown_saying_why():
    note = "no power source: no GPU power reading (NVML, nvidia-smi, metalstat) and no readable RAPL counter"
    cost = derive({**LEVEL, "energy": {"sources": [], "note": note}}, Prices(kwh=0.30, hour=2.5))
    assert cost is not None and cost["energy_per_mtok"] is None and cost["time_per_mtok"] == pytest.approx(2.5)
    assert cost["per_mtok"] is None, "a part asked for is unknown: so is the sum"
    assert cost["unknown"] == [f"energy: {note}"]


def test_no_price_no_block_and_no_tokens_no_cost():
    assert derived(LEVEL, Prices()) == {}, "no price given: the level has no cost key"
    none = derive({"output_tokens_total": 0, "wall_time_s": 5.0}, Prices(hour=1.0))
    assert none is not None and none["per_mtok"] is None and none["unknown"] == ["no output tokens: no cost per token"]


MACHINE = "machines:\n  - {name: a, labels: [x], platform: linux-x86_64, splits: [chat], cell_budget: {chat: 20m}"


def _entry(tmp_path: Path, extra: str) -> dict:
    path = tmp_path / "machines.yaml"
    path.write_text(MACHINE + extra + "}\n")
    (entry,) = matrix(load_machines(path), Inputs(frameworks="llamacpp"))
    return entry


def test_a_machines_prices_become_its_cells_options(tmp_path: Path):
    args = shlex.split(_entry(tmp_path, ", price_kwh: 0.3, price_hour: 12")["pytest_args"])
    assert args[args.index("--price-kwh") + 1] == "0.3" and args[args.index("--price-hour") + 1] == "12"
    assert "--price-kwh" not in _entry(tmp_path, "")["pytest_args"]
    with pytest.raises(MachinesError, match="price_hour is a price of 0 or more"):
        _entry(tmp_path, ", price_hour: -1")
