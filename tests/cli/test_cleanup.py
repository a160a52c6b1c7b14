"""`cellbench clean` deletes only what provably is this machine's stale results, and names the rest.

The files are a synthetic llamacpp result of this machine (tests/support/results.py) varied by
run id and machine. The hazard under test: a cleanup run on one machine must never delete
another machine's results, whatever directory they sit in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.model import MachineBlock, Result
from bench.host.machine import detect
from bench.reports import cleanup
from tests.support.results import put, synthetic_result, variant

OLD, NEWER, NEWEST = "20260101T000000Z-aaaa", "20260201T000000Z-bbbb", "20260301T000000Z-cccc"


@pytest.fixture(scope="module")
def template() -> Result:
    machine: MachineBlock = detect().to_json()  # the machine's own record
    return synthetic_result(machine=machine)


@pytest.fixture
def split_dir(tmp_path: Path, template: Result) -> Path:
    here = detect().slug
    split_dir = tmp_path / "results" / "tiny" / here / "chat"
    for run_id in (OLD, NEWER, NEWEST):
        path = put(split_dir, variant(template, run_id=run_id))
        path.with_suffix(".requests.jsonl").write_text("{}\n")
        (split_dir / "logs").mkdir(exist_ok=True)
        (split_dir / "logs" / f"{path.stem}_c1.server.log").write_text("log\n")
    # Misfiled: another machine's result inside this machine's directory, and a file with no record.
    put(split_dir, variant(template, run_id=OLD.replace("aaaa", "dddd"), machine="m5pro"))
    (split_dir / "siliconbench_old.json").write_text(json.dumps({"results": []}))
    other = tmp_path / "results" / "tiny" / "m5pro" / "chat"
    put(other, variant(template, run_id=OLD, machine="m5pro"))
    return split_dir


def test_plan_deletes_only_old_results_of_this_machine_with_their_sidecars(split_dir):
    found = cleanup.plan(split_dir, detect().slug, timedelta(days=30), now=datetime(2026, 2, 15, tzinfo=timezone.utc))
    assert sorted(p.name for p in found.delete) == [
        f"llamacpp_{OLD}.json", f"llamacpp_{OLD}.requests.jsonl", f"llamacpp_{OLD}_c1.server.log"]
    assert {p.name for p in found.kept} == {f"llamacpp_{NEWER}.json", f"llamacpp_{NEWEST}.json"}
    refused = {p.name: why for p, why in found.refused}
    assert "recorded machine m5pro" in refused["llamacpp_20260101T000000Z-dddd.json"]
    assert "cannot prove which machine" in refused["siliconbench_old.json"]


def test_the_newest_result_of_a_framework_is_never_deleted(split_dir):
    found = cleanup.plan(split_dir, detect().slug, timedelta(days=0))
    assert {p.name for p in found.kept} == {f"llamacpp_{NEWEST}.json"}
    assert f"llamacpp_{NEWER}.json" in {p.name for p in found.delete}


def test_a_directory_of_another_machine_is_refused_whole(split_dir):
    other = split_dir.parents[1] / "m5pro" / "chat"
    found = cleanup.plan(other, detect().slug, timedelta(days=0))
    assert found.delete == [] and "directory of machine m5pro" in found.refused[0][1]


@pytest.mark.session
def test_clean_command_deletes_names_refusals_and_exits_1(split_dir):
    root = split_dir.parents[2]
    cmd = [sys.executable, "-m", "bench.cli.main", "clean", f"--results-dir={root}", "--older-than", "0"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "REFUSED" in done.stderr and "llamacpp_20260101T000000Z-dddd.json: recorded machine m5pro" in done.stderr
    left = sorted(p.name for p in split_dir.glob("*.json"))
    assert left == ["llamacpp_20260101T000000Z-dddd.json", f"llamacpp_{NEWEST}.json", "siliconbench_old.json"]
    assert not (split_dir / f"llamacpp_{OLD}.requests.jsonl").exists()
    assert (split_dir / "logs" / f"llamacpp_{NEWEST}_c1.server.log").exists()
    other = root / "tiny" / "m5pro" / "chat"
    assert len(list(other.glob("*.json"))) == 1  # the other machine's directory is untouched


@pytest.mark.session
def test_dry_run_deletes_nothing(split_dir):
    before = sorted(p.name for p in split_dir.rglob("*"))
    cmd = [sys.executable, "-m", "bench.cli.main", "clean", f"--results-dir={split_dir.parents[2]}",
           "--older-than", "0",
           "--dry-run"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert "would delete" in done.stdout
    assert sorted(p.name for p in split_dir.rglob("*")) == before


def test_an_imported_result_is_a_baseline_and_is_never_deleted(split_dir, tmp_path):
    from tests.imports.test_import_siliconbench import convert_file, newer_file, write_sb

    older = newer_file(timestamp="2025-09-03T19:59:07")  # older than every measured result here
    source = write_sb(tmp_path / "sb" / "chat", "llamacpp_20250903_195907.json", older)
    baseline = put(split_dir, convert_file(source, machine=detect().slug))
    found = cleanup.plan(split_dir, detect().slug, timedelta(days=0))
    assert baseline in found.kept and baseline not in found.delete
    assert f"llamacpp_{NEWER}.json" in {p.name for p in found.delete}  # a measured one as old is deleted
