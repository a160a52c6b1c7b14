"""`cellbench compare OLD NEW` on real result files (written by bench.core.result.files.write_result):
a slower run is a regression and exits 1, an identical one is no detectable change with the
smallest change it could see, cells and levels on one side only are listed, each side's noise
floor is used and named, and a side that names nothing is one line and exit 2."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.cli.main import main as cellbench
from bench.core import noise
from bench.core.result.files import read_result, write_result
from bench.core.result.model import Result
from tests.support.results import MACHINE, Spec, write_cell

OLD_ID, NEW_ID = "20261130T100000Z-aaaa", "20261201T100000Z-bbbb"
NEW_AT = "2026-12-01T10:00:30+00:00"
CELL = f"tiny/{MACHINE['slug']}/chat/llamacpp"


def copy_as(path: Path, run_id: str, level_changes: dict[str, float] | None = None) -> Path:
    """`path`'s result again under another run id: the same numbers, so nothing changed, except
    each level's figures in `level_changes` ("ttft_ms.p50": factor) multiplied by their factor."""
    result: dict[str, Any] = copy.deepcopy(dict(read_result(path)))
    finished_at = NEW_AT
    result["run_id"], result["finished_at"] = run_id, finished_at
    result["requests_file"] = f"llamacpp_{run_id}.requests.jsonl"
    for level in result["levels"]:
        for key, factor in (level_changes or {}).items():
            block, stat = key.split(".")
            level[block][stat] *= factor
            for end in ("low", "high"):
                level[block]["ci95"][stat][end] *= factor
    target = path.with_name(f"llamacpp_{run_id}.json")
    write_result(target, cast(Result, result))
    return target


def cannot_tell(path: Path) -> int:
    """The figures of a 2-level, 40-request result no comparison can judge within one run: the p99
    of TTFT, TPOT, E2EL and decode rate, ITL's p50 and p99 (a request's chunk gaps are not
    independent draws), and the two rates of a result written before rate intervals (throughput_ci95)."""
    levels = read_result(path)["levels"]
    return 6 * len(levels) + sum(2 for level in levels if "throughput_ci95" not in level)


def run(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cellbench(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_slower_run_is_a_regression_listed_first_and_exits_1(tmp_path: Path, capsys):
    old = write_cell(tmp_path, Spec(run_id=OLD_ID, requests=40))
    new = write_cell(tmp_path, Spec(run_id=NEW_ID, requests=40, speed=0.6, finished_at=NEW_AT))
    code, out, _ = run(str(old), str(new), capsys=capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"comparing {CELL} ({OLD_ID} -> {NEW_ID})"
    assert lines[2].startswith("regression (")
    ttft = next(line for line in lines if "c=1" in line and "TTFT p50" in line)
    assert ttft.endswith(": regression") and "+" in ttft, "a slower TTFT is higher, and worse"
    judged, unclear = 24 - cannot_tell(old), cannot_tell(old)
    assert lines[-1].startswith(f"{judged} regressions, 0 improvements, 0 no detectable change, {unclear} cannot tell")
    assert "basis: within-run" in lines[-1]
    assert "old: p99 needs at least 299 requests for a 95% bound" in out, "cannot tell says why"

    code, back, _ = run(str(new), str(old), capsys=capsys)
    assert code == 0 and back.splitlines()[2].startswith("improvement ("), "the other way round: better"


def test_the_same_numbers_are_no_detectable_change_with_what_could_have_been_seen(tmp_path: Path, capsys):
    old = write_cell(tmp_path, Spec(run_id=OLD_ID, requests=40))
    new = copy_as(old, NEW_ID)
    code, out, _ = run(str(old), str(new), capsys=capsys)
    assert code == 0
    same = [line for line in out.splitlines() if line.endswith(")") and "no detectable change (could detect" in line]
    assert any("TTFT p50" in line and "+0.0% [" in line for line in same), out
    unclear = cannot_tell(old)
    assert f"0 regressions, 0 improvements, {24 - unclear} no detectable change, {unclear} cannot tell" in out
    assert "ran otherwise" not in out, "alike runs: no settings to name"


def test_settings_two_runs_differ_in_are_named_beside_the_decisions(tmp_path: Path, capsys):
    old = write_cell(tmp_path, Spec(run_id=OLD_ID, requests=40))
    result: dict[str, Any] = copy.deepcopy(dict(read_result(copy_as(old, NEW_ID))))
    result["run_config"]["requests_per_level"] = 100
    result["run_config"]["request_extras"]["ignore_eos"] = True
    new = tmp_path / "elsewhere" / f"llamacpp_{NEW_ID}.json"
    write_result(new, cast(Result, result))
    code, out, _ = run(str(old), str(new), capsys=capsys)
    assert code == 0
    note = next(line for line in out.splitlines() if "ran otherwise" in line)
    assert "requests_per_level 40 -> 100" in note and '"ignore_eos": true' in note.split("request_extras")[1], note
    code, out, _ = run(str(old), str(new), "--json", capsys=capsys)
    differs = json.loads(out)["settings_differ"][CELL]
    assert differs["requests_per_level"] == {"old": "40", "new": "100"}


def test_run_ids_and_folders_pair_cells_and_list_what_one_side_lacks(tmp_path: Path, capsys):
    before, after = tmp_path / "before", tmp_path / "after"
    write_cell(before, Spec(run_id=OLD_ID, requests=40))
    write_cell(before, Spec(framework="vllm", run_id=OLD_ID, requests=40))
    new = write_cell(after, Spec(run_id=NEW_ID, requests=40, levels=(1, 2, 4), finished_at=NEW_AT))
    write_cell(after, Spec(framework="mlx_lm", run_id=NEW_ID, requests=40, finished_at=NEW_AT))
    code, out, _ = run(str(before), str(after), capsys=capsys)
    assert code in (0, 1)
    assert f"comparing {CELL} ({OLD_ID} -> {NEW_ID})" in out
    assert f"only in old: tiny/{MACHINE['slug']}/chat/vllm" in out
    assert f"only in new: tiny/{MACHINE['slug']}/chat/mlx_lm" in out
    assert f"{CELL}: level c=4 only in new" in out

    # a run id is every cell of that run under the results root
    code, by_id, _ = run(str(before / "tiny" / MACHINE["slug"] / "chat" / f"llamacpp_{OLD_ID}.json"), NEW_ID,
                         "--results-dir", str(after), capsys=capsys)
    assert f"only in new: tiny/{MACHINE['slug']}/chat/mlx_lm ({new.with_name(f'mlx_lm_{NEW_ID}.json')})" in by_id


def test_json_gives_every_change_with_its_cell_and_level(tmp_path: Path, capsys):
    old = write_cell(tmp_path, Spec(run_id=OLD_ID, requests=40))
    new = copy_as(old, NEW_ID, {"ttft_ms.p50": 1.5})
    code, out, _ = run(str(old), str(new), "--json", capsys=capsys)
    assert code == 1
    data = json.loads(out)
    ttft = [c for c in data["changes"] if c["figure"] == "ttft_ms.p50"]
    assert [(c["level"], c["framework"], c["split"], c["decision"]) for c in ttft] == [
        ("c=1", "llamacpp", "chat", "regression"), ("c=2", "llamacpp", "chat", "regression")]
    assert ttft[0]["change"] == pytest.approx(0.5) and ttft[0]["low"] > 0
    assert data["counts"] == {"regression": 2, "improvement": 0, "no detectable change": 22 - cannot_tell(old),
                              "cannot tell": cannot_tell(old)}
    assert len(data["changes"]) == sum(data["counts"].values())


def test_each_sides_noise_floor_is_used_and_a_floor_that_ran_otherwise_is_named(tmp_path: Path, capsys):
    old = write_cell(tmp_path, Spec(run_id=OLD_ID, requests=40))
    new = copy_as(old, NEW_ID, {"ttft_ms.p50": 1.5})
    code, out, _ = run(str(old), str(new), capsys=capsys)
    assert code == 1 and "TTFT p50" in out.split("regression (")[1].split("\n\n")[0], "+50% within one run"
    floor = noise.Floor(model="tiny", machine=MACHINE["slug"], split="chat", framework="llamacpp",
                        measured_at="2026-11-29T08:00:00Z", runs=5, settings=noise.spread_settings(read_result(old)),
                        levels={"c=1": {"ttft_ms.p50": 0.3}, "c=2": {"ttft_ms.p50": 0.3}})
    noise.write(floor, noise.floor_path(tmp_path, "tiny", MACHINE["slug"], "chat", "llamacpp"))
    code, out, _ = run(str(old), str(new), capsys=capsys)
    assert code == 0, out
    ttft = next(line for line in out.splitlines() if "c=1" in line and "TTFT p50" in line)
    assert "no detectable change" in ttft
    assert "noise floor of 2026-11-29 (5 runs)" in out.splitlines()[-1]
    assert "ran otherwise" not in out

    noise.write(noise.Floor(**{**floor.__dict__, "settings": {**floor.settings, "requests_per_level": 100}}),
                noise.floor_path(tmp_path, "tiny", MACHINE["slug"], "chat", "llamacpp"))
    _, out, _ = run(str(old), str(new), capsys=capsys)
    assert (f"{CELL}: old: noise floor of 2026-11-29 ran otherwise, so it may not apply: "
            "requests_per_level: floor 100, this 40") in out


def test_a_result_file_kept_outside_a_results_tree_is_compared_without_a_floor(tmp_path: Path, capsys):
    old = write_cell(tmp_path / "r", Spec(run_id=OLD_ID, requests=40))
    kept = tmp_path / "kept.json"
    kept.write_text(copy_as(old, NEW_ID).read_text())
    code, out, _ = run(str(old), str(kept), capsys=capsys)
    assert code == 0 and "noise floor of" not in out and "no detectable change (" in out


def test_a_side_that_names_nothing_is_one_line_and_exit_2(tmp_path: Path, capsys):
    old = write_cell(tmp_path / "r", Spec(run_id=OLD_ID))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    (tmp_path / "empty").mkdir()
    for side, message in ((str(tmp_path / "missing.json"), "not a result file, a results folder or a run id"),
                          (str(broken), "not a readable cellbench result"),
                          (str(tmp_path / "empty"), "no cellbench result under this folder"),
                          ("20260101T000000Z-0000", "no result of this run id under")):
        code, out, err = run(str(old), side, "--results-dir", str(tmp_path / "r"), capsys=capsys)
        assert (code, out) == (2, ""), side
        assert len(err.strip().splitlines()) == 1 and err.startswith("cellbench compare: ") and message in err


def test_two_cells_with_nothing_in_common_are_a_usage_error(tmp_path: Path, capsys):
    write_cell(tmp_path / "a", Spec(run_id=OLD_ID))
    write_cell(tmp_path / "a", Spec(framework="vllm", run_id=OLD_ID))
    write_cell(tmp_path / "b", Spec(framework="mlx_lm", run_id=NEW_ID, finished_at=NEW_AT))
    write_cell(tmp_path / "b", Spec(framework="ollama", run_id=NEW_ID, finished_at=NEW_AT))
    code, _, err = run(str(tmp_path / "a"), str(tmp_path / "b"), capsys=capsys)
    assert code == 2 and "no cell is on both sides" in err


@pytest.mark.session
def test_the_installed_command_runs_it(tmp_path: Path):
    old = write_cell(tmp_path, Spec(run_id=OLD_ID, requests=40))
    new = copy_as(old, NEW_ID, {"ttft_ms.p50": 2.0})
    done = subprocess.run([sys.executable, "-m", "bench.cli", "compare", str(old), str(new)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert "2 regressions" in done.stdout.splitlines()[-1]
