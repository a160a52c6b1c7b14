"""A cell reads its folder's results once: --skip-existing, the fix check and the suspicious check
consult that one reading (bench.run.cell_result.CellHistory), and the verdict they decide is the
one the result is written with.

Real cells of the generic `openai` adapter, whose server is the suite's fault server in its
well-behaved mode, started from a profile command (as tests/run/test_prompt_reuse.py runs them).
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bench.base import clock
from bench.core.result import store
from bench.core.result.files import new_run_id, validate
from bench.core.verdicts import Verdict
from bench.run.cell import CellConfig, CellOutcome, run_cell
from bench.run.config import BudgetSettings, LoadSettings, ServerSettings
from bench.run.fixes import FIX_REFERENCE_ENV
from bench.run.server.launch import launching
from bench.setup import profiles

pytestmark = pytest.mark.integration  # each cell starts the fault server for real, as test_faults does

PROFILE = """\
name: tiny-fault
results_name: tiny-fault
builtin: tiny
formats:
  gguf: {{served_id: tiny}}
openai:
  command: [{python}, -m, tests.support.faultserver, --port, '{{port}}', --mode, ok]
"""


@pytest.fixture
def reads(monkeypatch) -> list[Path]:
    """Every folder `load_results` reads from here on, under whichever name a module imported it."""
    real, seen = store.load_results, []

    def counting(split_dir):
        seen.append(Path(split_dir))
        return real(split_dir)

    for module in list(sys.modules.values()):
        if (module.__name__ or "").startswith("bench") and getattr(module, "load_results", None) is real:
            monkeypatch.setattr(module, "load_results", counting)
    return seen


def cell(tmp_path: Path, run_id: str, skip_existing_s: float | None = None) -> CellOutcome:
    path = tmp_path / "tiny-fault.yaml"
    path.write_text(PROFILE.format(python=sys.executable))
    cfg = CellConfig(framework="openai", split="chat", profile=profiles.load_profile(str(path)),
                     results_root=tmp_path / "results", run_id=run_id,
                     load=LoadSettings(concurrency=(1,), requests=2, warmup=0), server=ServerSettings(port=0),
                     budget=BudgetSettings(skip_existing_s=skip_existing_s))
    with launching() as launch:
        return run_cell(cfg, launch)


def test_a_cell_reads_its_folder_once_whether_it_measures_keeps_or_compares(tmp_path, reads):
    first = cell(tmp_path, new_run_id(), skip_existing_s=3600.0)  # nothing to keep: it measures
    assert first.verdict.verdict is Verdict.OK, first.verdict.reason
    assert first.result_path is not None
    validate(first.result)
    assert reads == [first.result_path.parent]

    kept = cell(tmp_path, first.result["run_id"], skip_existing_s=3600.0)  # --skip-existing keeps the first
    assert "resumed" in kept.verdict.annotations and kept.result_path == first.result_path
    assert len(reads) == 2

    again = cell(tmp_path, new_run_id())  # measured again: its fix and suspicious checks find the first
    assert again.verdict.verdict is Verdict.OK and again.result_path != first.result_path
    assert len(reads) == 3 and set(reads) == {first.result_path.parent}


def test_an_ok_cell_after_a_failed_one_and_an_adapter_edit_is_written_fixed(tmp_path, reads, monkeypatch):
    monkeypatch.setenv(FIX_REFERENCE_ENV, "https://github.com/ggml-org/llama.cpp/pull/11500")
    first = cell(tmp_path, new_run_id())
    assert first.result_path is not None
    earlier = json.loads(first.result_path.read_text())  # as if it had failed, before an edit of the adapter
    earlier["verdict"] = {"verdict": "failed", "reason": "server exited with code 1 while starting", "annotations": []}
    earlier["harness"]["adapter"]["sha256"] = "a" * 64
    first.result_path.write_text(json.dumps(earlier))

    # a run id of a later second than the first's: two runs that start in one second (a fast host runs
    # this whole cell in under one) have no order between them but their ids' random suffixes
    again = cell(tmp_path, new_run_id(clock.now() + timedelta(seconds=1)))
    assert again.verdict.verdict is Verdict.FIXED, again.verdict.reason
    assert again.result_path is not None
    written = json.loads(again.result_path.read_text())
    assert written == again.result, "the outcome is the result as written"
    validate(written)
    fix = written["verdict"]["fix"]
    assert (fix["from_verdict"], fix["from_result"]) == ("failed", first.result_path.name)
    assert fix["sha256_before"] == "a" * 64 and fix["sha256_after"] == written["harness"]["adapter"]["sha256"]
    assert len(reads) == 2
