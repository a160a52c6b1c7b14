"""A nightly machine with `rounds`: its cells run --rounds K, and their budgets and the job's
timeout grow with K, since each round is a whole run of a cell's levels."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bench.nightly.machines import Inputs, MachinesError, load_machines, matrix

MACHINE = "machines:\n  - {name: a, labels: [x], platform: linux-x86_64, splits: [chat], cell_budget: {chat: 20m}"


def _entry(tmp_path: Path, extra: str) -> dict:
    path = tmp_path / "machines.yaml"
    path.write_text(MACHINE + extra + "}\n")
    (entry,) = matrix(load_machines(path), Inputs(frameworks="llamacpp"))
    return entry


def test_rounds_multiply_the_cell_budget_and_the_job_timeout(tmp_path: Path):
    once, twice = _entry(tmp_path, ""), _entry(tmp_path, ", rounds: 3")
    assert "--rounds" not in shlex.split(once["pytest_args"])
    args = shlex.split(twice["pytest_args"])
    assert args[args.index("--rounds") + 1] == "3" and args[args.index("--cell-budget") + 1] == "chat=60m"
    assert twice["timeout_minutes"] - 60 == 3 * (once["timeout_minutes"] - 60), "set-up once, cells three times"


@pytest.mark.parametrize("value", ["0", "two", "true"])
def test_rounds_is_a_count(tmp_path: Path, value: str):
    with pytest.raises(MachinesError, match="rounds is a count of 1 or more"):
        _entry(tmp_path, f", rounds: {value}")
