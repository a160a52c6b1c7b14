"""--rounds in a cell's plan: the order the (level, round) pairs run in, the names of their files,
and the one combination refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

import adapters
from bench.core.result.files import cell_paths
from bench.run.config import CellConfig, LoadSettings
from bench.run.levels.cell_run import CellRun
from bench.run.levels.plan import step_text
from bench.run.parsing import load_plan
from bench.run.writes.names import file_label
from bench.setup import profiles
from bench.setup.prompt_files import load_split


def _run(tmp_path: Path, load: LoadSettings) -> CellRun:
    config = CellConfig("llamacpp", "chat", profiles.load_profile("tiny"), tmp_path, "20261201T000000Z-abcd", load=load)
    paths = cell_paths(tmp_path, "tiny", "host", "chat", "llamacpp", config.run_id)
    return CellRun(config, adapters.get("llamacpp"), None, None, load_split("chat"), paths, None,  # type: ignore[arg-type]
                   "linux-x86_64")


def test_rounds_run_round_major(tmp_path: Path):
    run = _run(tmp_path, LoadSettings(concurrency=(1, 8, 16), rounds=2))
    assert run.plan.steps() == [(1, 1), (8, 1), (16, 1), (1, 2), (8, 2), (16, 2)]
    one_round = _run(tmp_path, LoadSettings(concurrency=(1, 8)))
    assert one_round.plan.steps() == [(1, 1), (8, 1)], "one round without --rounds"


def test_each_round_has_its_own_files_and_words():
    assert file_label([(8, 2)], 3) == "c8.r2" and file_label([(8, 1)], 1) == "c8"
    assert file_label([(1, 1), (8, 1)], 2) == "shared"
    assert step_text((8, 2), 3) == "c=8 round 2 of 3" and step_text((8, 1), 1) == "c=8"


def test_rounds_cannot_repeat_a_sweep():
    with pytest.raises(ValueError, match="a sweep chooses each rate from the level before"):
        load_plan("sweep", slo="ttft_p99=500ms", rounds=2)
    assert load_plan("sweep", slo="ttft_p99=500ms", rounds=1) is not None
    assert load_plan("2,4", rounds=3) is not None, "fixed rates repeat"
