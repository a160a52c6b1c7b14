"""The tracking issue opens on a significant regression against the previous night, not only on
failures: the regressions come from `cellbench compare`'s engine on real result files, the title
names the regressed cells and the body their change; a stand-in `gh` records the issue's life, and
`cellbench nightly previous` fetches the previous run's folders or says there is none."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest

from bench.cli.main import main as cellbench
from bench.cli.nightly import night_regressions
from bench.core.result.files import read_result, write_result
from bench.nightly.tracking import Night, Regression, model_of, title, track
from tests.nightly.test_nightly import FAKE_GH
from tests.support.results import MACHINE, Spec, write_cell

OLD_ID, NEW_ID = "20261130T013000Z-aaaa", "20261201T013000Z-bbbb"
GREEN = {"tables": [{"model": "tiny"}], "failures": [], "missing": []}
CELL = f"llamacpp/chat on {MACHINE['slug']}"


@pytest.fixture
def fake_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH.format(python=sys.executable))
    (bin_dir / "gh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GH_STATE", str(tmp_path / "gh-state.json"))
    monkeypatch.setenv("FAKE_GH_LOG", str(tmp_path / "gh-log.jsonl"))
    return tmp_path / "gh-log.jsonl"


def nights(tmp_path: Path, speed: float) -> tuple[Path, Path]:
    """The previous night's folder and tonight's (one machine's artifact each): llama.cpp chat,
    tonight at `speed` times the previous night's."""
    previous, current = tmp_path / "previous" / "nightly-a", tmp_path / "artifacts" / "nightly-a"
    write_cell(previous / "results", Spec(run_id=OLD_ID, requests=40))
    write_cell(current / "results", Spec(run_id=NEW_ID, requests=40, speed=speed,
                                         finished_at="2026-12-01T01:30:30+00:00"))
    return previous.parent, current.parent


def test_titles_name_the_regressed_cells_and_lead_back_to_their_model():
    assert title("tiny") == "cellbench nightly: tiny is failing"
    cells = ["llamacpp/chat on a", "vllm/chat on a", "mlx_lm/chat on b", "sglang/agent on c"]
    assert title("tiny", failing=False, regressed=cells[:1]) == "cellbench nightly: tiny regressed: llamacpp/chat on a"
    both = title("tiny-2", regressed=cells)
    assert both == ("cellbench nightly: tiny-2 is failing and regressed: llamacpp/chat on a, vllm/chat on a, "
                    "mlx_lm/chat on b +1 more")
    assert [model_of(t) for t in (title("tiny"), both, "another issue")] == ["tiny", "tiny-2", None]


def test_a_slower_night_is_a_list_of_regressions_per_model_with_their_change(tmp_path: Path):
    previous, current = nights(tmp_path, speed=0.6)
    regressions, against = night_regressions(current, previous)
    assert against == f"the previous night (run {OLD_ID}, 1 cells compared)"
    lines = regressions["tiny"]
    assert {r.cell for r in lines} == {CELL}
    ttft = next(r.line for r in lines if r.line.startswith("c=1 TTFT p50 (ms) +"))
    assert ttft.endswith(": regression (basis: within-run)")

    again = tmp_path / "again" / "nightly-a" / "results" / "tiny" / MACHINE["slug"] / "chat"
    again.mkdir(parents=True)
    (before,) = (previous / "nightly-a" / "results" / "tiny" / MACHINE["slug"] / "chat").glob("llamacpp_*.json")
    same_numbers = copy.deepcopy(read_result(before))
    same_numbers["run_id"], same_numbers["requests_file"] = NEW_ID, f"llamacpp_{NEW_ID}.requests.jsonl"
    write_result(again / f"llamacpp_{NEW_ID}.json", same_numbers)
    same, _ = night_regressions(tmp_path / "again", previous)
    assert same == {}, "the same numbers: nothing regressed"
    none, why = night_regressions(current, tmp_path / "no-previous")
    assert none == {} and why == f"nothing: no previous night's results in {tmp_path / 'no-previous'}"


def test_a_regression_alone_opens_the_issue_and_a_green_night_closes_it(tmp_path: Path, fake_gh: Path):
    previous, current = nights(tmp_path, speed=0.6)
    night = Night.from_merged(GREEN, day="2026-12-01", run_url="RUN", models=["tiny"])
    assert track(night.with_regressions(*night_regressions(current, previous)))[0].startswith("tiny: opened (")
    calls = [json.loads(line) for line in fake_gh.read_text().splitlines()]
    (opened,) = [c for c in calls if c["args"][:2] == ["issue", "create"]]
    assert opened["args"][opened["args"].index("--title") + 1] == f"cellbench nightly: tiny regressed: {CELL}"
    assert "Significant regressions against the previous night" in opened["body"]
    assert f"- {CELL}: c=1 TTFT p50 (ms) +" in opened["body"] and "Failing cells" not in opened["body"]

    failing = Night.from_merged({**GREEN, "failures": [{"model": "tiny", "split": "agent", "machine": "a",
                                                        "framework": "vllm", "verdict": "failed", "reason": "r"}]},
                                day="2026-12-02", run_url="RUN2")
    regressed = failing.with_regressions({"tiny": [Regression(CELL, "c=1 req/s -40.0% [...]: regression")]}, "x")
    assert track(regressed) == ["tiny: updated #1 (1 problems, 1 regressions)"]
    edit = [json.loads(line) for line in fake_gh.read_text().splitlines()][-2]
    new_title = edit["args"][edit["args"].index("--title") + 1]
    assert new_title == f"cellbench nightly: tiny is failing and regressed: {CELL}"

    green = Night.from_merged(GREEN, day="2026-12-03", run_url="RUN3").with_regressions({}, "the previous night")
    assert track(green) == ["tiny: closed #1"]


def test_previous_says_when_there_is_no_previous_run(tmp_path: Path, fake_gh: Path, capsys):
    assert cellbench(["nightly", "previous", "--out", str(tmp_path / "previous"), "--this-run", "7"]) == 0
    assert capsys.readouterr().out.strip() == "no previous nightly run: tonight's regressions are not checked"
    (listed,) = [json.loads(line)["args"] for line in fake_gh.read_text().splitlines()]
    assert listed[:4] == ["run", "list", "--workflow", "nightly.yml"]


def test_previous_downloads_the_newest_other_runs_machine_folders(tmp_path: Path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f"""#!{sys.executable}
import json, sys
from pathlib import Path
args = sys.argv[1:]
if args[:2] == ["run", "list"]:
    print(json.dumps([{{"databaseId": 7, "createdAt": "2026-12-02T01:17:00Z"}},
                      {{"databaseId": 6, "createdAt": "2026-12-01T01:17:00Z"}}]))
elif args[:2] == ["run", "download"]:
    out = Path(args[args.index("--dir") + 1]) / "nightly-a"
    out.mkdir(parents=True)
    (out / "from-run").write_text(args[2])
""")
    (bin_dir / "gh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "previous"
    assert cellbench(["nightly", "previous", "--out", str(out), "--this-run", "7"]) == 0
    assert (out / "nightly-a" / "from-run").read_text() == "6", "this run (7) is never its own previous night"
    said = capsys.readouterr().out.strip()
    assert said == f"previous nightly run 6 (2026-12-01T01:17:00Z): its machines' folders in {out}"
