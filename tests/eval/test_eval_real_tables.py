"""Locators on tables shaped like sglang-omni's real benchmark files: which Config, which table.

The docstring below has the layout of `benchmarks/eval/benchmark_omni_mmsu.py`: usage, the banner,
the disclaimer and metadata block, one section line per table, `| Model | Config | ... | Source |`
columns and `PR #316 [H200, full-set, c=8]` Source tags; the rows' locators are that runner's
config (`config_substring: "modalities=text "`, `source_workload: "router, 2-worker, full-set, c=8"`).
A run on H200 finds no `[H200, router, 2-worker, ...]` row yet, so its first edits append.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT
from bench.eval.tables import Locator, RowEdit, apply_edits, parse_tables, plan_edit

ACCURACY_COLUMNS = ("| Model      | Config                | overall_accuracy | parseable_samples | unparseable_samples"
                    " | Source                        |\n"
                    "| ---------- | --------------------- | ---------------- | ----------------- | -------------------"
                    " | ----------------------------- |")


def _acc(model: str, config: str, accuracy: str, parseable: str, unparseable: str, source: str) -> str:
    return f"| {model:<10} | {config:<21} | {accuracy:<16} | {parseable:<17} | {unparseable:<19} | {source:<29} |"


def mmsu_doc(model: str = "Qwen3-Omni") -> str:
    rows = "\n".join([
        _acc(model, "modalities=text", "70.88%", "5000/5000", "0", "PR #316 [H200, full-set, c=8]"),
        _acc(model, "modalities=text+audio", "71.22%", "5000/5000", "0", "PR #316 [H200, full-set, c=8]"),
        _acc(model, "modalities=text", "71.10%", "4999/5000", "1", "PR #351 [H100, full-set, c=8]"),
    ])
    return f'''"""MMSU (audio understanding, multiple choice) against an OpenAI-compatible omni server.

Usage:
    python benchmarks/eval/benchmark_omni_mmsu.py --model qwen3-omni --port 8000 --modalities text

H200 Full-Set Reference Results

Reproducibility references for the FULL eval set — NOT CI thresholds. CI runs on a subset and
has its own thresholds elsewhere (see tasks/*.py).

Benchmark: MMSU | Dataset: ddwang2000/MMSU
Hardware: 1 x H200 (default; non-H200 sources are tagged in Source column)
Last verified: 2026-04-25

Accuracy (accuracy)

{ACCURACY_COLUMNS}
{rows}

Speed (speed)

| Model      | Config                | latency_mean_s | latency_p95_s | throughput_qps | Source                                          |
| ---------- | --------------------- | -------------- | ------------- | -------------- | ----------------------------------------------- |
| {model:<10} | modalities=text       | 0.349          | 0.484         | 22.91          | PR #316 [H200, full-set, c=8]                   |
| {model:<10} | modalities=text+audio | 0.330          | 0.444         | 24.23          | PR #316 [H200, full-set, c=8, text-only server] |
"""

ANSWER = 42
'''  # noqa: E501 (table rows as the real files write them: one row per line)


WORKLOAD = "router, 2-worker, full-set, c=8"
TAG = f"[H200, {WORKLOAD}]"
CELLS = {"overall_accuracy": "72.00%", "parseable_samples": "5000/5000", "unparseable_samples": "0"}


def mmsu_edit(config: str, cells: dict[str, str] | None = None, section: str = "Accuracy (accuracy)",
              **kw) -> RowEdit:
    return RowEdit(kw.pop("row_id", config.strip()), Locator(section, config, WORKLOAD), "H200", "PR #400",
                   CELLS if cells is None else cells, model=kw.pop("model", "qwen3-omni"), **kw)


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def config_of(line: str) -> str:
    return line.split("|")[2].strip()


# --------------------------------------------------------------------------- a locator spanning two Configs


def test_a_substring_spanning_two_configs_is_refused_naming_both():
    doc = mmsu_doc()
    new, outcome = plan_edit(doc, mmsu_edit("modalities=text"))  # no trailing space: text+audio holds it too
    assert new == doc and outcome.status == "fail"
    assert ("config_substring 'modalities=text' matches rows of 2 different Configs under 'Accuracy (accuracy)': "
            "'modalities=text' (lines 19, 21), 'modalities=text+audio' (line 20)") in outcome.reason
    assert "trailing space" in outcome.reason


def test_the_runners_trailing_space_picks_one_config_and_appends_under_it():
    doc = mmsu_doc()
    new, outcome = plan_edit(doc, mmsu_edit("modalities=text "))
    assert outcome.status == "ok" and outcome.action == "appended" and outcome.line == 22
    (row,) = lines_with(new, TAG)
    assert config_of(row) == "modalities=text" and "| 72.00% " in row and f"PR #400 {TAG}" in row


def test_a_text_result_is_no_longer_filed_as_text_audio_and_then_overwritten(tmp_path: Path):
    """The run that lost a result: the text row appended under text+audio's label, and the text+audio
    row, finding that row with its own tag, replaced it. Now the text row fails; text+audio lands."""
    path = tmp_path / "benchmark_omni_mmsu.py"
    path.write_text(mmsu_doc())
    text_audio = {"overall_accuracy": "73.00%", "parseable_samples": "4998/5000", "unparseable_samples": "2"}
    outcomes = apply_edits(path, [mmsu_edit("modalities=text", row_id="mmsu-text"),
                                  mmsu_edit("modalities=text+audio", text_audio, row_id="mmsu-text-audio")],
                           tmp_path / "locks")
    assert [(o.row_id, o.status, o.action) for o in outcomes] == [
        ("mmsu-text", "fail", None), ("mmsu-text-audio", "ok", "appended")]
    assert "'modalities=text+audio'" in outcomes[0].reason
    (row,) = lines_with(path.read_text(), TAG)
    assert config_of(row) == "modalities=text+audio" and "| 73.00% " in row


def test_another_models_rows_do_not_make_a_locator_ambiguous():
    doc = mmsu_doc().replace("| Qwen3-Omni | modalities=text+audio | 71.22%",
                             "| Other-Omni | modalities=text+audio | 71.22%")
    _, outcome = plan_edit(doc, mmsu_edit("modalities=text"))
    assert outcome.status == "ok" and outcome.action == "appended"


# --------------------------------------------------------------------------- two tables under one section name

TEXT_AUDIO_TABLE = """Accuracy (accuracy)

Note (text+audio): the talker speaks each answer; its WER is in the Talker WER section.

| Model      | Config                | overall_accuracy | parseable_samples | unparseable_samples | Source                        |
| ---------- | --------------------- | ---------------- | ----------------- | ------------------- | ----------------------------- |
| Qwen3-Omni | modalities=text+audio | 71.22%           | 5000/5000         | 0                   | PR #316 [H200, full-set, c=8] |

Speed (speed)"""  # noqa: E501 (table rows, one per line)


def split_doc(second_table_config: str = "modalities=text+audio") -> str:
    """The accuracy rows in two tables, both under `Accuracy (accuracy)`: text, then text+audio."""
    doc = mmsu_doc().replace(
        "| Qwen3-Omni | modalities=text+audio | 71.22%           | 5000/5000         | 0                   "
        "| PR #316 [H200, full-set, c=8] |\n", "")
    doc = doc.replace("Speed (speed)", TEXT_AUDIO_TABLE.replace("modalities=text+audio", second_table_config), 1)
    assert [t.section_line for t in parse_tables(doc).official] == [
        "Accuracy (accuracy)", "Accuracy (accuracy)", "Speed (speed)"]
    return doc


@pytest.mark.parametrize(("config", "table"), [("modalities=text+audio", 1), ("modalities=text ", 0)])
def test_an_append_goes_to_the_one_same_named_table_that_holds_the_config(config, table):
    doc = split_doc()
    new, outcome = plan_edit(doc, mmsu_edit(config))
    assert outcome.status == "ok" and outcome.action == "appended", outcome.reason
    target = parse_tables(new).official[table]
    assert target.rows[-1].line == outcome.line and TAG in target.rows[-1].text
    assert config_of(target.rows[-1].text) == config.strip()
    other = parse_tables(new).official[1 - table]
    assert not any(TAG in r.text for r in other.rows)


def test_an_append_two_same_named_tables_could_take_is_refused_naming_them():
    doc = split_doc(second_table_config="modalities=text")
    new, outcome = plan_edit(doc, mmsu_edit("modalities=text "))
    assert new == doc and outcome.status == "fail"
    assert ("2 official tables have a section line containing 'Accuracy (accuracy)' and 2 of them hold rows containing"
            " 'modalities=text '") in outcome.reason
    headers = [t.header_line for t in parse_tables(doc).official[:2]]
    assert f"'line {headers[0]}: Accuracy (accuracy)', 'line {headers[1]}: Accuracy (accuracy)'" in outcome.reason


def test_an_append_neither_same_named_table_holds_is_refused_naming_them():
    doc = split_doc()
    edit = mmsu_edit("modalities=audio", new_row={"Model": "Qwen3-Omni", "Config": "modalities=audio"})
    new, outcome = plan_edit(doc, edit)
    assert new == doc and outcome.status == "fail"
    assert "and none of them holds a row containing 'modalities=audio'" in outcome.reason
    headers = [t.header_line for t in parse_tables(doc).official[:2]]
    assert f"'line {headers[0]}: Accuracy (accuracy)', 'line {headers[1]}: Accuracy (accuracy)'" in outcome.reason


# --------------------------------------------------------------------------- a run: refused before anything starts

HW = "Test CPU"
ARITH = ("{python} {repo_root}/benchmarks/eval/benchmark_arith.py --model {model} --port {port} "
         "--output-dir {output_dir} --max-samples {max_samples} --concurrency 2 --max-tokens 8")
ARITH_CELLS = {"overall_accuracy": {"path": "summary.accuracy", "format": "{v:.2%}"},
               "parseable_samples": {"paths": {"v": "summary.parseable_samples", "t": "summary.total_samples"},
                                     "format": "{v}/{t}"},
               "unparseable_samples": {"path": "summary.unparseable_samples"}}


class Run:
    """A benchmark file shaped like the real one for the tiny model, an eval config, and `pytest -m eval`."""

    def __init__(self, tmp: Path, text_substring: str):
        self.tmp = tmp
        self.bench = tmp / "repo" / "benchmarks" / "eval" / "benchmark_omni_mmsu.py"
        self.bench.parent.mkdir(parents=True)
        self.bench.write_text(mmsu_doc(model="tiny"))
        self.config = tmp / "config.yaml"
        rows = [self._row("mmsu-text", text_substring), self._row("mmsu-text-audio", "modalities=text+audio")]
        self.config.write_text(yaml.safe_dump({
            "name": "mmsu-demo", "hf_model_id": "tiny", "default_server_profile": "llama",
            "tables_root": str(self.bench.parent),  # the eval root is cellbench's checkout, for its client
            "server_profiles": {"llama": {"framework": "llamacpp", "max_concurrency": 2}}, "rows": rows}))

    def _row(self, row_id: str, config: str) -> dict:
        return {"id": row_id, "file": str(self.bench), "client": ARITH, "max_samples": 4, "timeout_s": 300,
                "result_json": "arith_results.json", "cells": ARITH_CELLS,
                "locate": {"section_substring": "Accuracy (accuracy)", "config_substring": config,
                           "source_workload": WORKLOAD}}

    def pytest(self) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "eval", f"--eval-config={self.config}",
               f"--results-dir={self.tmp / 'results'}", f"--hardware={HW}", f"--eval-root={PROJECT_ROOT}",
               "--no-commit"]  # the benchmark file is in no git repository
        return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, check=False,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})

    def rounds_run(self) -> list[Path]:
        return list((self.tmp / "results").glob("eval/*/*/*/round_*"))


AMBIGUOUS = ("✗ row mmsu-text in benchmark_omni_mmsu.py: config_substring 'modalities=text' matches rows of 2 different"
             " Configs under 'Accuracy (accuracy)': 'modalities=text' (lines 19, 21),"
             " 'modalities=text+audio' (line 20)")


@pytest.mark.integration
def test_a_run_with_an_ambiguous_row_is_refused_before_any_server_starts(tmp_path):
    run = Run(tmp_path, text_substring="modalities=text")
    result = run.pytest()
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout[-3000:]
    assert AMBIGUOUS in result.stdout
    assert f"— fix: give row mmsu-text in {run.config} a config_substring that matches one Config only" in result.stdout
    assert "no server was started" in result.stdout + result.stderr
    assert run.rounds_run() == [], "a row ran"
    assert run.bench.read_text() == mmsu_doc(model="tiny")
    cli = subprocess.run([sys.executable, "-m", "bench.cli", "eval", "precheck", "--config", str(run.config),
                          "--eval-root", str(PROJECT_ROOT)], capture_output=True, text=True, timeout=300,
                         cwd=PROJECT_ROOT, check=False)
    assert cli.returncode == 1 and AMBIGUOUS in cli.stdout


@pytest.mark.integration
def test_the_same_run_with_the_runners_trailing_space_refreshes_both_configs(tmp_path, llama_server):
    run = Run(tmp_path, text_substring="modalities=text ")
    result = run.pytest()
    assert result.returncode == 0, result.stdout[-3000:]
    assert ("✓ locators: each row's config_substring matches one Config, checked against the other rows of its"
            " file (2 row(s))") in result.stdout
    assert "edits appended: 2" in result.stdout
    tag = f"[{HW}, {WORKLOAD}]"
    rows = lines_with(run.bench.read_text(), tag)
    assert sorted(config_of(r) for r in rows) == ["modalities=text", "modalities=text+audio"]
    assert all("/4 " in r for r in rows), rows  # parseable/total of this run's 4 samples
    (state,) = (json.loads(p.read_text()) for p in (tmp_path / "results").glob("eval/*/*/run-state.json"))
    assert {r["id"]: r["edit"]["action"] for r in state["rows"]} == {"mmsu-text": "appended",
                                                                     "mmsu-text-audio": "appended"}
