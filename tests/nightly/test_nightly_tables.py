"""The night keeps its reference-table edits: the machine job's own steps (after `pytest -m eval
--no-commit` left a rewritten row in the runner's checkout) put them in the machine's artifact as
a patch, and the publish step applies each machine's patch on nightly/<date>, keeping the patch
there too; a patch that no longer applies stays a patch, said in the commit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.eval.config.loader import load_eval_config
from bench.eval.row import row_edit
from bench.eval.tables import plan_edit
from bench.nightly.publish import publish
from bench.nightly.tables import PATCH, RECORD
from tests.support import workflow
from tests.support.gitrepo import run_git

WORKFLOW = PROJECT_ROOT / ".github" / "workflows" / "nightly.yml"
TABLE = "benchmarks/eval/benchmark_arith.py"
TABLES = (TABLE, "benchmarks/eval/benchmark_toolcall.py")  # every table models/tiny/eval.yaml's rows name
STEPS = ("Keep the night's table edits", "Upload this machine's folder")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A runner's checkout holding the real reference tables, and this checkout's virtualenv."""
    ws = tmp_path / "workspace"
    (ws / TABLE).parent.mkdir(parents=True)
    for table in TABLES:
        shutil.copy2(PROJECT_ROOT / table, ws / table)
    (ws / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    (ws / ".gitignore").write_text("/.venv\n/nightly-out/\n")
    run_git(ws, "init", "-q", "-b", "main")
    run_git(ws, "add", ".")
    run_git(ws, "commit", "-q", "-m", "checkout")
    return ws


def _eval_rewrites_a_row(ws: Path, row_id: str = "arith-llamacpp-c4", accuracy: str = "3.00%") -> str:
    """What an eval row's run does to its table with --no-commit: the table engine's own edit."""
    config = load_eval_config(PROJECT_ROOT / "models" / "tiny" / "eval.yaml", ws, set(adapters.registry()))
    (row,) = [r for r in config.rows if r.id == row_id]
    values = {column: "…" for column in row.cells} | {"accuracy": accuracy}
    text, outcome = plan_edit((ws / TABLE).read_text(), row_edit(row, "LAB A CPU", "nightly", values))
    assert outcome.status == "ok", outcome
    (ws / TABLE).write_text(text)
    return text


def _added_row(patch: Path, accuracy: str) -> bool:
    """Whether the patch adds the eval row's line with this accuracy."""
    return any(line.startswith("+|") and f" {accuracy} " in line and "LAB A CPU" in line
               for line in patch.read_text().splitlines())


def _machine_steps(ws: Path, store: Path, name: str) -> workflow.JobRun:
    wf = workflow.load(WORKFLOW)
    job = wf["jobs"]["machine"]
    picked = [step for step in job["steps"] if step.get("name") in STEPS]
    assert [s["name"] for s in picked] == list(STEPS), "the steps run after the eval rows, in this order"
    ctx = workflow.Context(matrix={"name": name, "eval": True, "model": "tiny", "splits": "chat", "frameworks": "",
                                   "pytest_args": ""})
    return workflow.run_job({"jobs": {"machine": {**job, "steps": picked}}}, "machine", ctx, ws, store, {})


@pytest.mark.session
def test_the_machine_job_uploads_the_nights_table_edits_and_publish_applies_them(workspace, tmp_path):
    store = tmp_path / "artifacts"
    store.mkdir()
    edited = _eval_rewrites_a_row(workspace)
    run = _machine_steps(workspace, store, "lab-a")
    assert run.ok, run.log()
    folder = store / "nightly-lab-a"
    assert run.steps[0].output.startswith(f"kept 1 edited file(s) as nightly-out/{PATCH} (on ")
    record = json.loads((folder / RECORD).read_text())
    assert record == {"base": run_git(workspace, "rev-parse", "HEAD"), "files": [TABLE], "machine": "lab-a"}
    assert _added_row(folder / PATCH, "3.00%")

    # The merge job's checkout: the same commit, untouched; publish applies the machine's patch.
    merge_ws = tmp_path / "merge"
    run_git(tmp_path, "clone", "-q", str(workspace), str(merge_ws))
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "MERGED.md").write_text("# merged\n")
    subject = publish(merge_ws, "nightly/2026-12-04", merged, [folder], push=False)
    assert subject == "results: nightly 2026-12-04 from 1 machine folders"
    assert run_git(merge_ws, "show", f"nightly/2026-12-04:{TABLE}") + "\n" == edited
    assert run_git(merge_ws, "show", "nightly/2026-12-04:nightly/2026-12-04/tables/lab-a.patch") == \
        (folder / PATCH).read_text().strip()  # (run_git strips its output)
    body = run_git(merge_ws, "log", "-1", "--format=%b", "nightly/2026-12-04")
    assert body == f"- lab-a: table edits applied ({TABLE})"
    assert run_git(merge_ws, "show", f"main:{TABLE}") + "\n" == (PROJECT_ROOT / TABLE).read_text(), "main untouched"


@pytest.mark.session
def test_a_night_without_edits_uploads_no_patch_and_a_clashing_patch_stays_a_patch(workspace, tmp_path):
    store = tmp_path / "artifacts"
    store.mkdir()
    quiet = _machine_steps(workspace, store, "lab-b")
    assert quiet.ok and quiet.steps[0].output.strip() == f"no table edits in {Path('.')}: nothing to keep"
    assert not (store / "nightly-lab-b" / PATCH).exists()

    for name, accuracy in (("lab-c", "3.00%"), ("lab-d", "4.00%")):  # two machines, one row: the same lines
        run_git(workspace, "checkout", "-q", "--", TABLE)
        shutil.rmtree(workspace / "nightly-out", ignore_errors=True)
        _eval_rewrites_a_row(workspace, accuracy=accuracy)
        assert _machine_steps(workspace, store, name).ok
    repo = tmp_path / "merge"
    run_git(tmp_path, "clone", "-q", str(workspace), str(repo))
    merged = tmp_path / "merged"
    merged.mkdir()
    publish(repo, "nightly/2026-12-04", merged, [store / "nightly-lab-c", store / "nightly-lab-d"], push=False)
    body = run_git(repo, "log", "-1", "--format=%b", "nightly/2026-12-04").splitlines()
    assert body[0] == f"- lab-c: table edits applied ({TABLE})"
    assert body[1].startswith("- lab-d: table edits not applied (") and \
        body[1].endswith("kept as nightly/2026-12-04/tables/lab-d.patch")
    assert any("3.00%" in line and "LAB A CPU" in line
               for line in run_git(repo, "show", f"nightly/2026-12-04:{TABLE}").splitlines())
    assert _added_row(store / "nightly-lab-d" / PATCH, "4.00%")
    assert run_git(repo, "show", "nightly/2026-12-04:nightly/2026-12-04/tables/lab-d.patch") == \
        (store / "nightly-lab-d" / PATCH).read_text().strip()
