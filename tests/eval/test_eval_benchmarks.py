"""`--benchmarks` names and the tables root: what a refresh may select and what it may edit.

The configs are sglang-omni-shaped (its six benchmark files in `benchmarks/eval/`), loaded from
a real folder in tmp_path; the precheck is the one `pytest -m eval` runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from bench.eval.config.benchmarks import ALIASES, accepted, listing, select_rows, wants_listing
from bench.eval.config.loader import load_eval_config
from bench.eval.config.schema import EvalConfig, EvalConfigError
from bench.eval.precheck import client_python, run_checks

FRAMEWORKS = {"llamacpp", "openai", "sglang_omni"}
FILES = ("benchmark_omni_mmsu.py", "benchmark_omni_mmmu.py", "benchmark_omni_seedtts.py", "benchmark_omni_videomme.py",
         "benchmark_omni_videoamme.py", "benchmark_tts_seedtts.py")


def _row(row_id: str, file: str, config: str = "c=8") -> dict:
    return {"id": row_id, "file": file, "server": "serve --port {port}", "server_gpus": 0,
            "locate": {"section_substring": "Accuracy", "config_substring": config, "source_workload": "c=8"},
            "client": "python c.py --port {port} --output-dir {output_dir}", "result_json": "r.json",
            "cells": {"accuracy": {"path": "summary.accuracy"}}}


def _project(tmp_path: Path, rows: list[dict] | None = None, **top) -> EvalConfig:
    evals = tmp_path / "benchmarks" / "eval"
    evals.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (evals / name).write_text('"""Accuracy\n\n| Model | Config | accuracy | Source |\n| - | - | - | - |\n"""\n')
    rows = rows if rows is not None else [
        _row("mmsu-text", "benchmarks/eval/benchmark_omni_mmsu.py"),
        _row("mmsu-audio", "benchmarks/eval/benchmark_omni_mmsu.py", "audio"),
        _row("mmmu", "benchmarks/eval/benchmark_omni_mmmu.py"),
        _row("omni-seedtts-en", "benchmarks/eval/benchmark_omni_seedtts.py"),
        _row("videomme", "benchmarks/eval/benchmark_omni_videomme.py"),
        _row("videoamme", "benchmarks/eval/benchmark_omni_videoamme.py"),
        {**_row("s2pro-en", "benchmarks/eval/benchmark_tts_seedtts.py"), "hf_model_id": "fishaudio/s2-pro"},
    ]
    source = tmp_path / "config.yaml"
    source.write_text(yaml.safe_dump({"name": "qwen3-omni", "hf_model_id": "Qwen/Qwen3-Omni-30B-A3B-Instruct",
                                      "rows": rows, **top}))
    return load_eval_config(source, tmp_path, FRAMEWORKS)


def _ids(config: EvalConfig, benchmarks: str, exclude: str = "") -> list[str]:
    return [row.id for row in select_rows(config.rows, benchmarks, exclude)]


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("names, expected", [
    ("mmsu", ["mmsu-text", "mmsu-audio"]),  # the seed's name for benchmark_omni_mmsu.py
    ("omni_mmsu", ["mmsu-text", "mmsu-audio"]),  # the file's own name still works
    ("mmsu,qwen_seedtts", ["mmsu-text", "mmsu-audio", "omni-seedtts-en"]),
    ("qwen_seedtts", ["omni-seedtts-en"]), ("omni_seedtts", ["omni-seedtts-en"]),
    ("s2pro_seedtts", ["s2pro-en"]), ("tts_seedtts", ["s2pro-en"]),
    ("mmmu, videomme ,videoamme", ["mmmu", "videomme", "videoamme"]),
    ("all", ["mmsu-text", "mmsu-audio", "mmmu", "omni-seedtts-en", "videomme", "videoamme", "s2pro-en"]),
])
def test_the_seeds_names_select_the_rows_of_their_files(tmp_path, names, expected):
    assert _ids(_project(tmp_path), names) == expected


def test_every_file_the_seed_covers_has_its_runner_name():
    assert sorted(alias for names in ALIASES.values() for alias in names) == [
        "mmmu", "mmsu", "qwen_seedtts", "s2pro_seedtts", "videoamme", "videomme"]


def test_an_unknown_name_names_every_accepted_one(tmp_path):
    with pytest.raises(EvalConfigError) as err:
        select_rows(_project(tmp_path).rows, "mmsu,seedtts")
    assert str(err.value) == (
        "--benchmarks: unknown seedtts; this config accepts omni_mmsu, omni_mmmu, omni_seedtts, omni_videomme, "
        "omni_videoamme, tts_seedtts, mmsu, mmmu, qwen_seedtts, videomme, videoamme, s2pro_seedtts "
        "(`--benchmarks help` lists each with its files and rows)")


def test_an_alias_never_shadows_a_files_own_name(tmp_path):
    (tmp_path / "benchmarks" / "eval").mkdir(parents=True)
    (tmp_path / "benchmarks" / "eval" / "benchmark_mmsu.py").write_text('"""x"""\n')
    config = _project(tmp_path, rows=[_row("plain", "benchmarks/eval/benchmark_mmsu.py"),
                                      _row("omni", "benchmarks/eval/benchmark_omni_mmsu.py")])
    assert _ids(config, "mmsu") == ["plain"] and _ids(config, "omni_mmsu") == ["omni"]
    assert list(accepted(config.rows)) == ["mmsu", "omni_mmsu"]


def test_exclude_ids_still_applies_after_the_names(tmp_path):
    assert _ids(_project(tmp_path), "mmsu", "audio") == ["mmsu-text"]


def test_the_listing_gives_each_name_its_files_and_rows(tmp_path):
    config = _project(tmp_path)
    lines = listing(config.rows, config.root)
    assert lines[0].startswith("--benchmarks takes all (the default)")
    start = lines.index("  mmsu (alias of omni_mmsu): benchmarks/eval/benchmark_omni_mmsu.py, 2 row(s)")
    assert lines[start + 1:start + 3] == ["      mmsu-text  [Accuracy] c=8", "      mmsu-audio  [Accuracy] audio"]
    assert "  s2pro_seedtts (alias of tts_seedtts): benchmarks/eval/benchmark_tts_seedtts.py, 1 row(s)" in lines
    assert wants_listing("help") and wants_listing("mmsu,help") and not wants_listing("all")


# --------------------------------------------------------------------------- the tables root


def test_a_row_outside_benchmarks_eval_is_refused_at_precheck_naming_the_fix(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmark_notes.py").write_text('"""x"""\n')
    config = _project(tmp_path, rows=[_row("inside", "benchmarks/eval/benchmark_omni_mmsu.py"),
                                      _row("outside", "docs/benchmark_notes.py")])
    inside, outside = config.rows
    assert config.refused(inside) is None
    assert config.refused(outside) == (
        f"refused: {tmp_path / 'docs' / 'benchmark_notes.py'} is outside the tables root "
        f"{tmp_path / 'benchmarks' / 'eval'}/ (tables_root in {config.source}); no table outside it is edited")
    lines = [check.line() for check in run_checks(config, list(config.rows), client_python(sys.executable, config),
                                                  None) if not check.ok and "outside" in check.line()]
    assert lines == [f"✗ row outside: {config.refused(outside)} — fix: move benchmark_notes.py under "
                     f"{tmp_path / 'benchmarks' / 'eval'}/, or set tables_root in {config.source}"]


def test_a_symlink_out_of_the_tables_root_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text('"""x"""\n')
    (tmp_path / "benchmarks" / "eval").mkdir(parents=True)
    (tmp_path / "benchmarks" / "eval" / "benchmark_link.py").symlink_to(elsewhere)
    config = _project(tmp_path, rows=[_row("link", "benchmarks/eval/benchmark_link.py")])
    assert config.refused(config.rows[0]) is not None


def test_tables_root_says_another_folder_and_must_be_one(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "benchmark_x.py").write_text('"""x"""\n')
    rows = [_row("x", "tables/benchmark_x.py"), _row("mmsu", "benchmarks/eval/benchmark_omni_mmsu.py")]
    config = _project(tmp_path, rows=rows, tables_root="tables")
    assert config.tables == tmp_path / "tables"
    assert config.refused(config.rows[0]) is None and config.refused(config.rows[1]) is not None
    with pytest.raises(EvalConfigError, match=r"tables_root: 'no-such' is not a folder"):
        _project(tmp_path, rows=rows, tables_root="no-such")
