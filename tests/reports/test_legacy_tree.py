"""SiliconBench's legacy tree, `results/<model>/<split>/` with no machine folder, written when asked
for by name (APPLEBENCH_RESULTS_SUBDIR set empty: bench.host.machine): a split folder there is
found, compared for the machine that owns it and cleaned only by that machine in that tree;
SiliconBench's own files beside cellbench's are left alone and said in one line; and a real pytest
session files its cell, journal and reports there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.store import split_place
from bench.host.machine import detect
from bench.plugins.recorder import ignored_lines
from bench.reports.cleanup import plan
from bench.reports.comparison import build_comparison
from bench.reports.rebuild import split_dirs
from tests.imports.test_import_siliconbench import newer_file, write_sb
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S
from tests.support.results import MACHINE, Spec, write_cell

SLUG = MACHINE["slug"]
EARLIER = "20261129T100000Z-0000"


def test_a_legacy_split_folder_is_found_and_compared_for_the_machine_that_owns_it(tmp_path):
    legacy = write_cell(tmp_path, Spec(), folder="").parent
    scoped = write_cell(tmp_path, Spec(framework="vllm")).parent
    assert legacy == tmp_path / "tiny" / "chat" and scoped == tmp_path / "tiny" / SLUG / "chat"
    place = split_place(legacy)
    assert (place.model, place.machine, place.legacy) == ("tiny", SLUG, True)
    assert split_place(scoped).legacy is False and split_place(scoped).machine == SLUG
    assert sorted(split_dirs(tmp_path)) == [legacy, scoped]
    assert list(split_dirs(tmp_path, model="tiny", machine=SLUG)) == [legacy, scoped]
    assert list(split_dirs(tmp_path, machine="m5pro")) == []
    comparison = build_comparison(legacy)
    assert (comparison["model"], comparison["machine"], comparison["frameworks"]) == ("tiny", SLUG, ["llamacpp"])


def test_another_machines_result_in_the_legacy_tree_is_ignored_as_in_any_machines_folder(tmp_path):
    other = {**MACHINE, "slug": "m2max", "host": "studio"}
    legacy = write_cell(tmp_path, Spec(run_id=EARLIER), machine=other, folder="").parent
    write_cell(tmp_path, Spec(framework="vllm"), folder="")  # newer: this machine owns the tree now
    comparison = build_comparison(legacy)
    assert comparison["machine"] == SLUG and comparison["frameworks"] == ["vllm"]
    assert [i["file"] for i in comparison["ignored"]] == [f"llamacpp_{EARLIER}.json"]
    refused = plan(legacy, SLUG, timedelta(days=0))
    assert [p.name for p, _ in refused.refused] == [f"llamacpp_{EARLIER}.json"], "never deleted: not this machine's"


def test_siliconbench_files_beside_cellbench_results_stay_and_are_said_in_one_line(tmp_path):
    legacy = write_cell(tmp_path, Spec(), folder="").parent
    for stamp in ("20261101_100000", "20261108_100000", "20261115_100000"):
        write_sb(legacy, f"llamacpp_{stamp}.json", newer_file())
    write_sb(legacy, "notes.json", "{not json")
    comparison = build_comparison(legacy)
    assert comparison["frameworks"] == ["llamacpp"] and len(comparison["ignored"]) == 4
    lines = ignored_lines(Path("tiny/chat"), comparison["ignored"])
    assert len(lines) == 2 and lines[0].startswith("cellbench: ignored tiny/chat/notes.json: unreadable: ")
    assert lines[1] == ("cellbench: left 3 SiliconBench result files in tiny/chat out of its reports "
                        "(llamacpp_20261101_100000.json, ...): `cellbench import siliconbench` converts them")


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_a_session_asked_for_the_legacy_tree_files_its_cell_journal_and_reports_there(tmp_path):
    """APPLEBENCH_RESULTS_SUBDIR set empty: the header says where, the result, the journal and the
    reports are in results/<model>/ and results/<model>/<split>/, a SiliconBench file there stays
    byte for byte, and `cellbench report` rebuilds the folder afterwards."""
    argv = [sys.executable, "-m", "tests.support.faultserver", "--port", "{port}", "--mode", "ok"]
    profile = tmp_path / "legacy.yaml"
    profile.write_text("\n".join([
        "name: legacy", "results_name: Qwen3-0.6B", "builtin: tiny", "formats: {gguf: {served_id: tiny}}",
        "openai:", f"  command: {json.dumps(argv)}", f"  env: {{PYTHONPATH: {json.dumps(str(PROJECT_ROOT))}}}",
        "  served_id: tiny"]) + "\n")
    results = tmp_path / "results"
    theirs = write_sb(results / "Qwen3-0.6B" / "chat", "llamacpp_20261101_100000.json", newer_file())
    before = theirs.read_bytes()
    env = {k: v for k, v in os.environ.items() if k not in ("CELLBENCH_MACHINE", "APPLEBENCH_MODEL")}
    env.update(APPLEBENCH_RESULTS_SUBDIR="", PYTHONPATH=str(PROJECT_ROOT))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "openai",
           f"--model={profile}", f"--results-dir={results}", "--port", "0", "--requests", "4", "--concurrency", "1",
           "--warmup", "0", "--progress-interval", "0", "--host-lock-timeout", str(HOST_LOCK_WAIT_S)]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S, env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    slug = detect().slug
    assert (f"cellbench cells write to {results / 'Qwen3-0.6B'}/<split>/ (model legacy from --model, machine {slug} "
            "from detected, in SiliconBench's legacy tree results/<model>/<split>/ (APPLEBENCH_RESULTS_SUBDIR is set "
            "empty))") in out
    split = results / "Qwen3-0.6B" / "chat"
    (mine,) = split.glob("openai_*.json")
    result = json.loads(mine.read_text())
    assert result["machine"]["slug"] == slug and result["verdict"]["verdict"] == "ok"
    assert not (results / "Qwen3-0.6B" / slug).exists(), "nothing under a machine folder"
    (journal,) = (results / "Qwen3-0.6B").glob("weekly_*.journal.md")
    assert "| openai | ok |" in journal.read_text()
    comparison = json.loads((split / "comparison.json").read_text())
    assert comparison["frameworks"] == ["openai"] and comparison["standing"]["openai"]["ok"]
    assert (split / "REPORT.md").is_file() and theirs.read_bytes() == before
    assert ("cellbench: left 1 SiliconBench result file in Qwen3-0.6B/chat out of its reports "
            "(llamacpp_20261101_100000.json, ...): `cellbench import siliconbench` converts them") in out

    (split / "REPORT.md").unlink()
    report = subprocess.run([sys.executable, "-m", "bench.cli.main", "report", f"--results-dir={results}"],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert report.returncode == 0, report.stdout + report.stderr
    assert str(split / "REPORT.md") in report.stdout.splitlines() and (split / "REPORT.md").is_file()
