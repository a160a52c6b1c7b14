"""`pytest -m eval` on copies of a real table's layout (see test_eval_row_landing.py): rows that would
meet one Config are refused before any server starts; rows beside a Thinking row and a long Local
section land on their own rows; and the run's folder and `run.log` are announced first, so the
seed's second terminal (`tail -f <run-dir>/run.log`) follows the whole run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT
from tests.eval.test_eval_real_tables import ARITH, ARITH_CELLS, HW, WORKLOAD, config_of, lines_with, mmsu_doc
from tests.eval.test_eval_row_landing import kept, without_text_rows

pytestmark = pytest.mark.integration
TAG = f"[{HW}, {WORKLOAD}]"


class EvalRun:
    """A benchmark file for the tiny model, a config of its rows, and `pytest -m eval` on them."""

    def __init__(self, tmp: Path, doc: str, substrings: dict[str, str]):
        self.tmp, self.doc = tmp, doc
        self.bench = tmp / "repo" / "benchmarks" / "eval" / "benchmark_omni_mmsu.py"
        self.bench.parent.mkdir(parents=True)
        self.bench.write_text(doc)
        self.config = tmp / "config.yaml"
        rows = [{"id": row_id, "file": str(self.bench), "client": ARITH, "max_samples": 4, "timeout_s": 300,
                 "result_json": "arith_results.json", "cells": ARITH_CELLS,
                 "locate": {"section_substring": "Accuracy (accuracy)", "config_substring": substring,
                            "source_workload": WORKLOAD}} for row_id, substring in substrings.items()]
        self.config.write_text(yaml.safe_dump({
            "name": "mmsu-demo", "hf_model_id": "tiny", "default_server_profile": "llama",
            "tables_root": str(self.bench.parent),
            "server_profiles": {"llama": {"framework": "llamacpp", "max_concurrency": 2}}, "rows": rows}))

    def _run(self, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *cmd], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                              check=False, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})

    def pytest(self, *extra: str) -> subprocess.CompletedProcess:
        return self._run("-m", "pytest", "-p", "no:cacheprovider", "-m", "eval", f"--eval-config={self.config}",
                         f"--results-dir={self.tmp / 'results'}", f"--hardware={HW}", f"--eval-root={PROJECT_ROOT}",
                         "--no-commit", *extra)

    def cellbench(self, *args: str) -> subprocess.CompletedProcess:
        return self._run("-m", "bench.cli", "eval", *args, "--config", str(self.config), "--eval-root",
                         str(PROJECT_ROOT))

    def run_dirs(self) -> list[Path]:
        return sorted((self.tmp / "results").glob("eval/mmsu-demo/*"))

    def rounds_run(self) -> list[Path]:
        return list((self.tmp / "results").glob("eval/*/*/*/round_*"))


def announced_first(out: str, run_dir: Path) -> None:
    """The run's folder and the command that follows its run.log come before the precheck."""
    follow = f"Follow:   tail -f {run_dir / 'run.log'}"
    assert f"Run dir:  {run_dir}\n" in out and follow in out, out[-3000:]
    assert out.index(follow) < out.index("cellbench eval precheck")


CLASH = ("✗ benchmark_omni_mmsu.py: rows mmsu-text and mmsu-text-audio both meet Config 'modalities=text+audio'"
         " (line 19) under 'Accuracy (accuracy)': mmsu-text's config_substring 'modalities=text', mmsu-text-audio's"
         " 'modalities=text+audio'; one row's result would be filed under the other's Config, or replace it")


def test_rows_that_would_meet_one_config_are_refused_before_any_server_starts(tmp_path: Path):
    run = EvalRun(tmp_path, without_text_rows("tiny"),
                  {"mmsu-text": "modalities=text", "mmsu-text-audio": "modalities=text+audio"})
    result = run.pytest()
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:]
    assert CLASH in result.stdout
    assert f"— fix: give rows mmsu-text and mmsu-text-audio in {run.config} each a config_substring that only its" \
           " own Config holds" in result.stdout
    assert "no server was started" in result.stdout + result.stderr
    assert run.rounds_run() == [] and run.bench.read_text() == run.doc
    (run_dir,) = run.run_dirs()
    announced_first(result.stdout, run_dir)
    assert CLASH in (run_dir / "run.log").read_text()  # the second terminal sees why it stopped

    precheck = run.cellbench("precheck")
    assert precheck.returncode == 1 and CLASH in precheck.stdout, precheck.stdout[-3000:]
    located = run.cellbench("locate", "--hardware", HW)
    assert located.returncode == 1, located.stdout
    assert [line.split("  ")[0] for line in located.stdout.splitlines()[1:]] == ["✗ mmsu-text", "✗ mmsu-text-audio"]
    assert all(CLASH[len("✗ benchmark_omni_mmsu.py: "):] in line for line in located.stdout.splitlines()[1:])

    skipped_precheck = run.pytest("--no-precheck")  # each row's own locator check still refuses it
    assert skipped_precheck.returncode == pytest.ExitCode.TESTS_FAILED, skipped_precheck.stdout[-3000:]
    for row_id in ("mmsu-text", "mmsu-text-audio"):
        assert f"{row_id}: locator in benchmark_omni_mmsu.py: rows mmsu-text and mmsu-text-audio both meet" \
            in skipped_precheck.stdout, skipped_precheck.stdout[-3000:]
    assert "2 failed" in skipped_precheck.stdout
    assert run.rounds_run() == [] and run.bench.read_text() == run.doc


THINKING = f"| tiny-Thinking | modalities=text | 74.40% | 4/4 | 0 | PR #420 {TAG} |"
LOCAL = """
Local v1 Pipeline Result (this workspace, 2026-05-01)

{notes}
Accuracy (accuracy)

| Model | Config          | overall_accuracy | parseable_samples | unparseable_samples | Source        |
| ----- | --------------- | ---------------- | ----------------- | ------------------- | ------------- |
| tiny  | modalities=text | 1.00%            | 4/4               | 0                   | local {tag} |
"""


def thinking_and_long_local_doc() -> str:
    """The tiny model's MMSU table with a Thinking row carrying this run's tag, and a Local block,
    100 lines long, holding a tiny text row with the same tag."""
    doc = mmsu_doc(model="tiny")
    first_text = next(line for line in doc.splitlines() if "| modalities=text       |" in line)
    doc = doc.replace(first_text + "\n", f"{first_text}\n{THINKING}\n", 1)
    notes = "".join(f"- sweep {k}: max_tokens={256 + k}\n" for k in range(100))
    end = doc.index('"""\n\nANSWER')
    return doc[:end] + LOCAL.format(notes=notes, tag=TAG) + doc[end:]


def test_rows_beside_a_thinking_row_and_a_long_local_section_land_on_their_own_rows(tmp_path: Path, llama_server):
    doc = thinking_and_long_local_doc()
    run = EvalRun(tmp_path, doc, {"mmsu-text": "modalities=text ", "mmsu-text-audio": "modalities=text+audio"})
    result = run.pytest()
    assert result.returncode == 0, result.stdout[-3000:]
    assert "edits appended: 2" in result.stdout
    new = run.bench.read_text()
    kept(doc, new)  # the Thinking row and the Local block's row are as they were
    official = new[: new.index("Local v1 Pipeline Result")]
    appended = [row for row in lines_with(official, TAG) if row != THINKING]
    assert sorted((row.split("|")[1].strip(), config_of(row)) for row in appended) == [
        ("tiny", "modalities=text"), ("tiny", "modalities=text+audio")]
    assert all("/4 " in row for row in appended), appended  # this run's 4 samples
    assert new[new.index("Local v1 Pipeline Result"):] == doc[doc.index("Local v1 Pipeline Result"):]
    (run_dir,) = run.run_dirs()
    announced_first(result.stdout, run_dir)
    log = (run_dir / "run.log").read_text()
    assert log.index("precheck:") < log.index("mmsu-text: START")
