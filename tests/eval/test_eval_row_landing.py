"""A result lands on its own row or nowhere: the ways one landed where it must not, each on a copy
of a table shaped like sglang-omni's real ones.

sglang-omni's benchmark files are not in this repository; the copies keep their layout (banner,
disclaimer, metadata block, one section line per table, `| Model | Config | ... | Source |`,
`PR #316 [H200, full-set, c=8]` tags): `mmsu_doc` is `benchmark_omni_mmsu.py`'s, `seedtts_doc`
`benchmark_omni_seedtts.py`'s with its trailing `Local v1 Pipeline Result` block. Each case edits
a copy as the issue did (one Config's rows removed, a Thinking row added, the Local block made
longer) and checks that the result is refused before anything runs, or lands on the right row,
every other line kept.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

import adapters
from bench.eval.config.loader import load_eval_config
from bench.eval.precheck import locator_clashes
from bench.eval.source import hardware_tag
from bench.eval.tables import Claim, Locator, RowEdit, apply_edits, clashes, parse_tables, plan_edit
from bench.host.machine import HostMachine
from tests.eval.test_eval_real_tables import CELLS, TAG, WORKLOAD, config_of, lines_with, mmsu_doc, mmsu_edit

ACCURACY = "Accuracy (accuracy)"
TEXT_ROWS = ("| Qwen3-Omni | modalities=text       | 70.88%", "| Qwen3-Omni | modalities=text       | 71.10%")


def without_text_rows(model: str = "Qwen3-Omni") -> str:
    """The MMSU accuracy table holding only the text+audio Config so far."""
    text_rows = tuple(row.replace("Qwen3-Omni", f"{model:<10}") for row in TEXT_ROWS)
    doc = "".join(line for line in mmsu_doc(model).splitlines(keepends=True) if not line.startswith(text_rows))
    accuracy = next(t for t in parse_tables(doc).official if t.section_line == ACCURACY)
    assert [config_of(r.text) for r in accuracy.rows] == ["modalities=text+audio"]
    return doc


def claim(row_id: str, config: str, section: str = ACCURACY, workload: str = WORKLOAD, model: str = "qwen3-omni",
          **kw) -> Claim:
    return Claim(row_id, Locator(section, config, workload), model, **kw)


def kept(before: str, after: str, changed: int = 0) -> list[str]:
    """The lines of `before` missing from `after`; at most `changed` may be (rows replaced in place)."""
    missing = [line for line in before.splitlines() if line not in after.splitlines()]
    assert len(missing) <= changed, missing
    return missing


# --------------------------------------------------------------------------- 1. two rows, one Config


def test_the_text_row_alone_looks_fine_against_a_table_holding_only_text_audio():
    """Why a row must be checked against the others: alone, "modalities=text" meets one Config, the
    wrong one, and its append would be labelled text+audio."""
    _, outcome = plan_edit(without_text_rows(), mmsu_edit("modalities=text"))
    assert (outcome.status, outcome.action) == ("ok", "appended")
    assert config_of(outcome.after) == "modalities=text+audio"


def test_two_rows_that_can_only_meet_one_config_are_refused_naming_both():
    doc = without_text_rows()
    found = clashes(parse_tables(doc), [claim("mmsu-text", "modalities=text"),
                                        claim("mmsu-text-audio", "modalities=text+audio"),
                                        claim("mmsu-text-speed", "modalities=text", "Speed (speed)")])
    assert [c.rows for c in found] == [("mmsu-text", "mmsu-text-audio")]
    assert found[0].reason == (
        "rows mmsu-text and mmsu-text-audio both meet Config 'modalities=text+audio' (line 19) under"
        " 'Accuracy (accuracy)': mmsu-text's config_substring 'modalities=text', mmsu-text-audio's"
        " 'modalities=text+audio'; one row's result would be filed under the other's Config, or replace it")


def test_the_runners_trailing_space_lets_both_land_each_under_its_own_config(tmp_path: Path):
    doc = without_text_rows()
    text_row = {"Model": "Qwen3-Omni", "Config": "modalities=text"}  # no text row to copy it from yet
    assert clashes(parse_tables(doc), [claim("t", "modalities=text ", new_row=text_row),
                                       claim("ta", "modalities=text+audio")]) == []
    path = tmp_path / "benchmark_omni_mmsu.py"
    path.write_text(doc)
    text_audio = {"overall_accuracy": "73.00%", "parseable_samples": "4998/5000", "unparseable_samples": "2"}
    outcomes = apply_edits(path, [mmsu_edit("modalities=text ", row_id="t", new_row=text_row),
                                  mmsu_edit("modalities=text+audio", text_audio, row_id="ta")], tmp_path / "locks")
    assert [(o.status, o.action) for o in outcomes] == [("ok", "appended"), ("ok", "appended")]
    new = path.read_text()
    assert sorted((config_of(r), r.split("|")[3].strip()) for r in lines_with(new, TAG)) == [
        ("modalities=text", "72.00%"), ("modalities=text+audio", "73.00%")]
    kept(doc, new)


def test_a_row_clashes_with_the_row_another_is_about_to_append():
    """text+audio's first row does not exist yet: "modalities=text" would meet it once appended."""
    doc = mmsu_doc().replace("| Qwen3-Omni | modalities=text+audio | 71.22%",
                             "| Qwen3-Omni | modalities=text       | 71.22%")
    audio_row = {"Model": "Qwen3-Omni", "Config": "modalities=text+audio"}
    found = clashes(parse_tables(doc), [claim("t", "modalities=text"),
                                        claim("ta", "modalities=text+audio", new_row=audio_row)])
    assert [c.rows for c in found] == [("t", "ta")]
    assert "both meet Config 'modalities=text+audio' (the row ta would append to the table at line 17)" \
        in found[0].reason


def test_one_locator_twice_clashes_unless_the_workloads_differ():
    doc = mmsu_doc()
    twice = clashes(parse_tables(doc), [claim("a", "modalities=text "), claim("b", "modalities=text ")])
    assert [c.rows for c in twice] == [("a", "b")]
    assert "both would write the row of Config 'modalities=text' (line 19)" in twice[0].reason
    c1 = claim("c1", "modalities=text ", workload="router, 2-worker, full-set, c=1")
    assert clashes(parse_tables(doc), [claim("c8", "modalities=text "), c1]) == []


def test_two_models_rows_with_one_config_do_not_clash():
    doc = mmsu_doc().replace("| Qwen3-Omni | modalities=text       | 71.10%",
                             "| S2-Pro     | modalities=text       | 71.10%")
    assert clashes(parse_tables(doc), [claim("omni", "modalities=text "),
                                       claim("s2pro", "modalities=text ", model="s2-pro")]) == []


def _config(tmp_path: Path, rows: list[dict], doc: str, **top) -> Path:
    bench = tmp_path / "benchmarks" / "eval" / "benchmark_omni_mmsu.py"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(doc)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "name": "qwen3-omni", "hf_model_id": "Qwen/Qwen3-Omni-30B-A3B-Instruct", **top,
        "server_profiles": {"llama": {"framework": "llamacpp"}}, "default_server_profile": "llama",
        "rows": [{"file": "benchmarks/eval/benchmark_omni_mmsu.py", "client": "true", "result_json": "r.json",
                  "cells": {"overall_accuracy": {"path": "summary.accuracy"}}, **row} for row in rows]}))
    return config


def _locate(section: str, config: str) -> dict:
    return {"section_substring": section, "config_substring": config, "source_workload": WORKLOAD}


def test_every_row_of_the_config_counts_even_one_left_out_of_the_run(tmp_path: Path):
    path = _config(tmp_path, [{"id": "mmsu-text", "locate": _locate(ACCURACY, "modalities=text")},
                              {"id": "mmsu-text-audio", "locate": _locate(ACCURACY, "modalities=text+audio")},
                              {"id": "mmsu-text-speed", "locate": _locate("Speed (speed)", "modalities=text ")}],
                   without_text_rows(), model_aliases={"Qwen/Qwen3-Omni-30B-A3B-Instruct": "Qwen3-Omni"})
    config = load_eval_config(path, tmp_path, set(adapters.registry()))
    text = [r for r in config.rows if r.id == "mmsu-text"]
    assert [c.rows for _, c in locator_clashes(config, text)] == [("mmsu-text", "mmsu-text-audio")]
    speed = [r for r in config.rows if r.id == "mmsu-text-speed"]
    assert locator_clashes(config, speed) == []


# --------------------------------------------------------------------------- 2. a model's name, whole

THINKING = "| Qwen3-Omni-Thinking | modalities=text | 74.40% | 5000/5000 | 0 | PR #420 {tag} |"


def with_thinking(tag: str = TAG, last: bool = False) -> str:
    """The MMSU accuracy table with a Qwen3-Omni-Thinking text row: after the first text row, or last."""
    doc = mmsu_doc()
    anchor = next(line for line in doc.splitlines() if line.startswith(TEXT_ROWS[1 if last else 0]))
    return doc.replace(anchor + "\n", anchor + "\n" + THINKING.format(tag=tag) + "\n", 1)


def test_a_result_never_replaces_a_thinking_row_carrying_its_tag():
    doc = with_thinking()
    new, outcome = plan_edit(doc, mmsu_edit("modalities=text "))
    assert (outcome.status, outcome.action) == ("ok", "appended"), outcome.reason
    assert outcome.after.startswith("| Qwen3-Omni ") and config_of(outcome.after) == "modalities=text"
    assert THINKING.format(tag=TAG) in new.splitlines()
    kept(doc, new)


def test_an_appended_row_copies_its_own_models_name_not_the_thinking_rows():
    doc = with_thinking(tag="[H100, router, 2-worker, full-set, c=8]", last=True)  # the last text row
    new, outcome = plan_edit(doc, mmsu_edit("modalities=text "))
    assert (outcome.status, outcome.action) == ("ok", "appended"), outcome.reason
    assert outcome.after.split("|")[1].strip() == "Qwen3-Omni"
    kept(doc, new)


def test_each_model_lands_on_its_own_row_of_one_file(tmp_path: Path):
    path = tmp_path / "benchmark_omni_mmsu.py"
    doc = with_thinking()
    path.write_text(doc)
    thinking = {"overall_accuracy": "75.00%", "parseable_samples": "5000/5000", "unparseable_samples": "0"}
    outcomes = apply_edits(path, [mmsu_edit("modalities=text ", row_id="instruct"),
                                  mmsu_edit("modalities=text ", thinking, row_id="thinking",
                                            model="qwen3-omni-thinking")], tmp_path / "locks")
    assert [(o.row_id, o.action) for o in outcomes] == [("instruct", "appended"), ("thinking", "replaced")]
    rows = {r.split("|")[1].strip(): r.split("|")[3].strip() for r in lines_with(path.read_text(), TAG)}
    assert rows == {"Qwen3-Omni": CELLS["overall_accuracy"], "Qwen3-Omni-Thinking": "75.00%"}
    assert kept(doc, path.read_text(), changed=1) == [THINKING.format(tag=TAG)]


def test_a_repo_id_takes_a_table_name_only_through_a_declared_alias(tmp_path: Path):
    locate = _locate(ACCURACY, "modalities=text ")
    bare = load_eval_config(_config(tmp_path, [{"id": "t", "locate": locate}], with_thinking()), tmp_path,
                            set(adapters.registry()))
    assert bare.rows[0].other_model_names == ()
    aliased = load_eval_config(
        _config(tmp_path, [{"id": "t", "locate": locate}], with_thinking(),
                model_aliases={"qwen/qwen3-omni-30b-a3b-instruct": ["Qwen3-Omni"], "other/model": ["Other"]}),
        tmp_path, set(adapters.registry()))
    assert aliased.rows[0].other_model_names == ("Qwen3-Omni",)
    for config, lands in ((bare, False), (aliased, True)):
        row = config.rows[0]
        edit = RowEdit(row.id, Locator(**asdict(row.locate)), "H200", "PR #400", CELLS, model=row.model_hint,
                       aliases=row.other_model_names)
        new, outcome = plan_edit(with_thinking(), edit)
        assert (outcome.status == "ok") is lands, outcome.reason
        if lands:
            assert outcome.after is not None and outcome.after.split("|")[1].strip() == "Qwen3-Omni"
            assert THINKING.format(tag=TAG) in new.splitlines()


# --------------------------------------------------------------------------- 3. a Local section, however long

SEEDTTS_HEAD = '''"""Seed-TTS WER of Qwen3-Omni against an OpenAI-compatible omni server.

H200 Full-Set Reference Results

Reproducibility references for the FULL eval set — NOT CI thresholds.

Benchmark: Seed-TTS | Dataset: zhaochenyang20/seed-tts-eval-arrow
Last verified: 2026-05-04

Accuracy (accuracy.wer)

| Model      | Config            | wer_corpus | evaluated | Source                                      |
| ---------- | ----------------- | ---------- | --------- | ------------------------------------------- |
| Qwen3-Omni | EN, voice_clone=T | 1.95%      | 1088      | PR #411 [H200, V1-pipeline, full-set, c=16] |
| Qwen3-Omni | EN, voice_clone=T | 1.90%      | 1088      | PR #450 {tag} |
| Qwen3-Omni | ZH, voice_clone=T | 1.41%      | 2020      | PR #411 [H200, V1-pipeline, full-set, c=16] |

Local v1 Pipeline Result (this workspace, 2026-05-01)

These runs differ from the Reference Results above in one setting each.
'''

SEEDTTS_LOCAL_TABLE = '''
Accuracy (accuracy.wer)

| Model      | Config            | wer_corpus | evaluated | Source                   |
| ---------- | ----------------- | ---------- | --------- | ------------------------ |
| Qwen3-Omni | EN, voice_clone=T | 1.01%      | 1088      | local {tag}       |
| Qwen3-Omni | EN, voice_clone=F | 2.50%      | 1088      | local {tag}       |
"""
'''
SEEDTTS_WORKLOAD = "router, 2-worker, full-set, c=16"
SEEDTTS_TAG = f"[H200, {SEEDTTS_WORKLOAD}]"


def seedtts_doc(local_notes: int = 90) -> str:
    """The file with a Local block whose table sits `local_notes` note lines below its heading."""
    notes = "".join(f"- sweep {k}: max_tokens={256 + k}, one GPU, warm cache\n" for k in range(local_notes))
    return (SEEDTTS_HEAD + "\n" + notes + SEEDTTS_LOCAL_TABLE).format(tag=SEEDTTS_TAG)


def seedtts_edit(config: str, **kw) -> RowEdit:
    return RowEdit(config, Locator("Accuracy (accuracy.wer)", config, SEEDTTS_WORKLOAD), "H200", "PR #460",
                   {"wer_corpus": "1.80%", "evaluated": "1088"}, model="qwen3-omni", **kw)


def test_a_local_table_far_below_its_heading_is_still_local():
    doc = seedtts_doc()
    official, local = parse_tables(doc).tables
    marker = next(n for n, line in enumerate(doc.splitlines(), 1) if line.startswith("Local v1 Pipeline Result"))
    assert local.header_line - marker > 90
    assert (official.local, local.local) == (False, True)
    assert local.marker == "Local v1 Pipeline Result (this workspace, 2026-05-01)"


def test_the_official_row_is_replaced_and_the_long_local_section_untouched():
    doc = seedtts_doc()
    new, outcome = plan_edit(doc, seedtts_edit("EN, voice_clone=T"))
    assert (outcome.status, outcome.action, outcome.line) == ("ok", "replaced", 15), outcome.reason
    assert "| 1.80% " in outcome.after and "PR #460 [H200, router" in outcome.after
    assert kept(doc, new, changed=1) == [line for line in doc.splitlines() if "PR #450" in line]


def test_a_config_only_the_local_table_holds_is_never_appended_there():
    doc = seedtts_doc()
    new, outcome = plan_edit(doc, seedtts_edit("EN, voice_clone=F"))
    assert new == doc and outcome.status == "fail"
    assert "no row of the table at line 12 contains 'EN, voice_clone=F'" in outcome.reason
    new, outcome = plan_edit(doc, seedtts_edit("EN, voice_clone=F",
                                                new_row={"Model": "Qwen3-Omni", "Config": "EN, voice_clone=F"}))
    assert (outcome.status, outcome.action, outcome.line) == ("ok", "appended", 17), outcome.reason
    kept(doc, new)
    local_from = doc.index("Local v1 Pipeline Result")
    assert new.endswith(doc[local_from:])  # the new row is in the official table; the Local block is as it was


def test_a_local_section_ends_at_the_next_banner_not_at_a_sentence():
    doc = seedtts_doc(local_notes=3).replace(
        '"""\n', "\nH100 Reference Results\n\nAccuracy (accuracy.wer)\n\n"
        "| Model      | Config            | wer_corpus | Source                   |\n"
        "| ---------- | ----------------- | ---------- | ------------------------ |\n"
        "| Qwen3-Omni | EN, voice_clone=T | 2.01%      | PR #351 [H100, c=16]     |\n\"\"\"\n", 1)
    assert [t.local for t in parse_tables(doc).tables] == [False, True, False]


# --------------------------------------------------------------------------- 4. a GPU variant's tag


def test_a_4090_d_result_appends_beside_the_4090_row_never_over_it():
    tag = hardware_tag(HostMachine(slug="x", host="h", os="Linux", cpu="x", chip=None,
                                   gpus=("NVIDIA GeForce RTX 4090 D",), cores=2, memory_gib=24.0))
    assert tag == "RTX4090D"
    doc = mmsu_doc().replace("PR #351 [H100, full-set, c=8]", f"PR #352 [RTX4090, {WORKLOAD}]")
    new, outcome = plan_edit(doc, RowEdit("t", Locator(ACCURACY, "modalities=text ", WORKLOAD), tag, "PR #400", CELLS,
                                          model="qwen3-omni"))
    assert (outcome.status, outcome.action) == ("ok", "appended"), outcome.reason
    assert f"PR #400 [RTX4090D, {WORKLOAD}]" in outcome.after
    kept(doc, new)


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4090 Laptop GPU"])
def test_a_variant_never_finds_the_4090s_row(name: str):
    tag = hardware_tag(HostMachine(slug="x", host="h", os="Linux", cpu="x", chip=None, gpus=(name,), cores=2,
                                   memory_gib=24.0))
    assert f"[{tag}, {WORKLOAD}]" not in f"PR #352 [RTX4090, {WORKLOAD}]"
