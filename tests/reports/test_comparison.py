"""comparison.json: which result stands for each framework, and what is reported beside it.

The template is a synthetic result (tests/support/results.py: requests summarised and judged by
the real metrics and verdict code), varied (another framework, machine, run id, throughput) to
build each directory the selection has to get right. The hazard under test: a file that wins
on mtime (a resume, a git checkout) must not win here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.core.result.files import read_result
from bench.core.result.model import Result
from bench.core.result.store import load_results, select_latest, suspicious
from bench.reports.comparison import build_comparison, methodology_differences, write_comparison
from tests.support.results import cell_dir, put, variant, write_cell

FOREIGN = "h200"
DAY = 86400


@pytest.fixture(scope="module")
def real_path(tmp_path_factory) -> Path:
    """A cell's files as a cell writes them: the result, its sidecar and its logs."""
    return write_cell(tmp_path_factory.mktemp("cell") / "results")


@pytest.fixture(scope="module")
def template(real_path) -> Result:
    return read_result(real_path)


@pytest.fixture
def here(template) -> str:
    return template["machine"]["slug"]


def test_the_written_result_is_loaded_and_chosen(real_path, template, here):
    loaded, problems = load_results(real_path.parent)
    assert [r.path for r in loaded] == [real_path] and problems == []
    comparison = build_comparison(real_path.parent, machine=here)
    assert comparison["frameworks"] == ["llamacpp"]
    assert comparison["results"]["llamacpp"] == template
    assert comparison["provenance"]["llamacpp"] == {
        "run_id": template["run_id"], "file": real_path.name, "machine": here,
        "finished_at": template["finished_at"], "model_path": template["model"]["path"],
    }
    assert (comparison["model"], comparison["machine"], comparison["split"]) == ("tiny", here, "chat")
    assert comparison["methodology_warnings"] == [] and comparison["suspicious"] == {} and comparison["ignored"] == []


def test_this_machines_newest_run_id_wins_whatever_the_mtimes(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    now = time.time()
    newest = put(d, variant(template, run_id="20300102T000000Z-aaaa"), mtime=now - 400 * DAY)
    older = put(d, variant(template, run_id="20300101T000000Z-bbbb"), mtime=now - DAY)
    foreign = put(d, variant(template, run_id="20310101T000000Z-cccc", machine=FOREIGN), mtime=now + 30 * DAY)
    assert foreign.stat().st_mtime > older.stat().st_mtime > newest.stat().st_mtime

    path = write_comparison(d, machine=here)
    comparison = json.loads(path.read_text())
    assert path == d / "comparison.json"
    assert comparison["provenance"]["llamacpp"]["run_id"] == "20300102T000000Z-aaaa"
    assert comparison["provenance"]["llamacpp"]["machine"] == here
    assert comparison["ignored"] == [{"file": foreign.name, "reason": f"machine {FOREIGN}, this is {here}"}]

    selection = select_latest(load_results(d)[0], machine=here)
    assert selection.chosen["llamacpp"].path == newest and selection.previous["llamacpp"].path == older


def test_the_foreign_machine_has_its_own_comparison(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    foreign = put(d, variant(template, run_id="20300102T000000Z-bbbb", machine=FOREIGN))
    selection = select_latest(load_results(d)[0], machine=FOREIGN)
    assert selection.chosen["llamacpp"].path == foreign
    assert [i.reason for i in selection.ignored] == [f"machine {here}, this is {FOREIGN}"]


def test_same_start_second_is_decided_by_finished_at_not_suffix(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    put(d, variant(template, run_id="20300101T000000Z-ffff", finished_at="2030-01-01T00:00:10+00:00"))
    later = put(d, variant(template, run_id="20300101T000000Z-0000", finished_at="2030-01-01T00:00:30+00:00"))
    assert select_latest(load_results(d)[0], machine=here).chosen["llamacpp"].path == later


def test_a_misfiled_split_is_ignored_not_compared(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    agent = put(d, variant(template, run_id="20300102T000000Z-bbbb", split="agent", scale=20))
    comparison = build_comparison(d, machine=here)
    assert comparison["provenance"]["llamacpp"]["run_id"] == "20300101T000000Z-aaaa"
    assert comparison["ignored"] == [{"file": agent.name, "reason": "split agent, this directory is for chat"}]
    assert comparison["suspicious"] == {}


def test_methodology_warnings_name_each_framework_value(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    put(d, variant(template, framework="vllm", run_id="20300101T000000Z-bbbb", levels=[1, 2, 4], share_server=True))
    lines = build_comparison(d, machine=here)["methodology_warnings"]
    assert lines == ["levels: llamacpp=[1, 2], vllm=[1, 2, 4]", "levels_share_server: llamacpp=false, vllm=true"]


def test_identical_methodology_gives_no_warning(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    put(d, variant(template, framework="vllm", run_id="20300101T000000Z-bbbb", scale=3))
    assert methodology_differences(select_latest(load_results(d)[0], machine=here)) == []


@pytest.mark.parametrize("factor, flagged",
                         [(10, True), (0.1, True), (25, True), (9, False), (1 / 9, False), (1, False)])
def test_suspicious_at_ten_fold_either_way(template, factor, flagged):
    previous = variant(template, run_id="20300101T000000Z-aaaa")
    current = variant(template, run_id="20300102T000000Z-bbbb", scale=factor)
    reason = suspicious(current, previous)
    assert (reason is not None) is flagged
    if flagged:
        assert "20300101T000000Z-aaaa" in reason and "c=1:" in reason and "c=2:" in reason
        assert ("higher" if factor > 1 else "lower") in reason


def test_suspicious_compares_only_levels_both_measured_with_successes(template):
    previous = variant(template, run_id="20300101T000000Z-aaaa", levels=[1, 4])
    current = variant(template, run_id="20300102T000000Z-bbbb", levels=[1, 2], scale=50)
    previous["levels"][0]["successful"] = 0
    assert suspicious(current, previous) is None  # c=1 had no successes before, c=2 and c=4 are not shared


@pytest.mark.parametrize("change", [{"split": "agent"}, {"machine": FOREIGN}])
def test_suspicious_never_compares_across_cells(template, change):
    previous = variant(template, run_id="20300101T000000Z-aaaa", **change)
    current = variant(template, run_id="20300102T000000Z-bbbb", scale=100)
    with pytest.raises(ValueError, match="one cell only"):
        suspicious(current, previous)


def test_comparison_flags_against_the_previous_run_of_this_machine_only(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    put(d, variant(template, run_id="20300103T000000Z-cccc"))
    put(d, variant(template, run_id="20300102T000000Z-bbbb", machine=FOREIGN, scale=0.01))
    assert build_comparison(d, machine=here)["suspicious"] == {}  # the other machine is no baseline
    put(d, variant(template, run_id="20300101T000000Z-aaaa", scale=0.1))
    flagged = build_comparison(d, machine=here)["suspicious"]
    assert list(flagged) == ["llamacpp"] and "run 20300101T000000Z-aaaa" in flagged["llamacpp"]


def test_unreadable_foreign_and_misnamed_files_are_reported_not_fatal(tmp_path, template, here):
    d = cell_dir(tmp_path, template)
    good = put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    (d / "vllm_20300101T000000Z-dead.json").write_text('{"schema_version": 1, "run_id": ')
    (d / "omlx_20260423_115912.json").write_text(json.dumps({"framework": "omlx", "concurrency_results": []}))
    invalid = variant(template, framework="sglang", run_id="20300101T000000Z-beef")
    del invalid["verdict"]
    put(d, invalid)
    (d / "renamed.json").write_text(json.dumps(variant(template, run_id="20300102T000000Z-abcd")))
    (d / "comparison.json").write_text("stale, and not a result")
    (d / good.name.replace(".json", ".requests.jsonl")).write_text("")

    reasons = {i["file"]: i["reason"] for i in build_comparison(d, machine=here)["ignored"]}
    assert set(reasons) == {"vllm_20300101T000000Z-dead.json", "omlx_20260423_115912.json",
                            "sglang_20300101T000000Z-beef.json", "renamed.json"}
    assert reasons["vllm_20300101T000000Z-dead.json"].startswith("unreadable:")
    assert reasons["omlx_20260423_115912.json"] == "not a cellbench v1 result (schema_version None)"
    assert "'verdict' is a required property" in reasons["sglang_20300101T000000Z-beef.json"]
    assert reasons["renamed.json"].endswith("llamacpp_20300102T000000Z-abcd.json")
    assert build_comparison(d, machine=here)["provenance"]["llamacpp"]["file"] == good.name
