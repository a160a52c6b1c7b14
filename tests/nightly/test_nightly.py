"""The nightly job across machines: machines.yaml's matrix (tests/test_workflows.py lints the
workflow with actionlint), and the workflow's own `run:` steps executed here for the `linux-cpu`
machine, then merged with two more local "machines" (CELLBENCH_MACHINE), one of them missing a split; a stand-in `gh`
records the tracking issue opened, then closed by the next night if it is green (updated if a cell
of it is not: on a busy host a real cell may truthfully be `degraded`, its client starved, and the
test follows the verdict each cell recorded), and the night lands on nightly/<date> in a local
origin, never on main. The issue's whole life (opened, updated, closed by a green night) is also
checked on hand-made nights, whose verdicts are known by construction."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.nightly.machines import Inputs, MachinesError, NightlyMachine, job_minutes, load_machines, matrix
from bench.nightly.tracking import Night, track
from tests.support import workflow
from tests.support.busy import assert_ok_unless_client_limited
from tests.support.gitrepo import run_git

WORKFLOW = PROJECT_ROOT / ".github" / "workflows" / "nightly.yml"
MACHINES = PROJECT_ROOT / "machines.yaml"
TODAY = date.today().isoformat()


# ------------------------------------------------------------------ the workflow and machines.yaml

def test_every_machine_of_the_file_gets_a_job_with_its_labels_and_a_timeout_from_its_caps():
    machines = {m.name: m for m in load_machines(MACHINES)}
    entries = {e["name"]: e for e in matrix(list(machines.values()), Inputs())}
    assert set(entries) == set(machines)
    cpu = entries["linux-cpu"]
    assert cpu["labels"] == ["self-hosted", "linux", "cpu"] and cpu["splits"] == "chat,agent"
    assert "mlx_lm" in cpu["frameworks"] and "omlx" not in cpu["frameworks"], "only what runs on linux-x86_64"
    assert "vllm" in entries["h200"]["frameworks"] and "llamacpp" in entries["h200"]["frameworks"]
    assert "omlx" in entries["m5-pro"]["frameworks"]
    m = machines["linux-cpu"]
    cells = len(cpu["frameworks"].split(","))
    expected = m.setup_minutes + cells * (m.cell_budget_minutes["chat"] + m.cell_budget_minutes["agent"])
    assert cpu["timeout_minutes"] == round(expected)
    assert "--cell-budget chat=20m,agent=30m" in cpu["pytest_args"] and "--requests 32" in cpu["pytest_args"]
    assert entries["h200"]["eval"] is True and cpu["eval"] is False


def test_a_manual_run_narrows_the_night():
    machines = load_machines(MACHINES)
    entries = matrix(machines, Inputs(frameworks="omlx", splits="chat", requests="5", eval=False))
    assert [e["name"] for e in entries] == ["m5-pro"], "a machine where none of the frameworks runs has no job"
    (mac,) = entries
    assert mac["frameworks"] == "omlx" and mac["splits"] == "chat" and "--requests 5" in mac["pytest_args"]
    assert "agent=" not in mac["pytest_args"]
    assert [e["name"] for e in matrix(machines, Inputs(machines="h200"))] == ["h200"]
    assert matrix(machines, Inputs(machines="h200", eval=False))[0]["eval"] is False
    with pytest.raises(MachinesError, match="no machine named dgx"):
        matrix(machines, Inputs(machines="dgx"))


def test_a_job_timeout_is_capped_at_five_days():
    big = NightlyMachine(name="m", labels=("self-hosted",), platform="darwin-arm64", model="tiny", splits=("agent",),
                  requests=None, frameworks=None, cell_budget_minutes={"agent": 6000.0}, setup_minutes=60,
                  eval=False, eval_minutes=240)
    assert job_minutes(big, ("agent",), 3, False) == 5 * 24 * 60


@pytest.mark.parametrize("text, message", [
    ("machines:\n  - {name: a, labels: [x], platform: linux-x86_64, gpu: true}\n",
     r"machines\[0\] \(a\): unknown field gpu"),
    ("machines:\n  - {name: a, labels: [x], platform: windows}\n", "platform is one of"),
    ("machines:\n  - {name: a, labels: [x]}\n", "missing platform"),
    ("machines:\n  - {name: a, labels: [x], platform: linux-x86_64, frameworks: [llama]}\n", "no adapter named llama"),
    ("machines:\n  - {name: a, labels: [x], platform: linux-x86_64, cell_budget: {chat: soon}}\n",
     r"cell_budget.chat: a duration such as 45m"),
    ("machines:\n  - {name: a, labels: [x], platform: linux-x86_64}\n"
     "  - {name: a, labels: [y], platform: darwin-arm64}\n", "distinct names"),
    ("defaults: {requests: 10}\nmachine: []\n", "unknown top-level field machine"),
])
def test_a_wrong_machines_file_names_the_file_and_the_field(tmp_path: Path, text: str, message: str):
    path = tmp_path / "machines.yaml"
    path.write_text(text)
    with pytest.raises(MachinesError, match=message) as caught:
        load_machines(path)
    assert str(path) in str(caught.value)


def test_the_tracking_issue_lists_failing_cells_and_silent_machines_per_model():
    merged = {"tables": [{"model": "tiny"}, {"model": "qwen"}],
              "failures": [{"model": "tiny", "split": "chat", "machine": "h200", "framework": "vllm",
                            "verdict": "all-failed", "reason": "32/32 requests failed: HTTP 500"}],
              "missing": [{"model": "tiny", "split": "agent", "machine": "m5-pro", "reason": "sent nothing"}]}
    night = Night.from_merged(merged, day="2026-11-30", run_url="RUN", models=["tiny", "qwen", "big"])
    assert night.problems["qwen"] == [], "a model whose tables are green is green"
    assert night.problems["big"] == ["no result from any machine"]
    assert night.problems["tiny"] == ["h200: vllm/chat all-failed: 32/32 requests failed: HTTP 500",
                                      "m5-pro: no agent result (sent nothing)"]
    assert "- m5-pro: no agent result (sent nothing)" in night.body("tiny") and "(RUN)" in night.body("tiny")



FAKE_GH = '''#!{python}
"""A stand-in for gh: records each call, and keeps the issues it was told to open in a file."""
import json, os, sys
from pathlib import Path
state, log = Path(os.environ["FAKE_GH_STATE"]), Path(os.environ["FAKE_GH_LOG"])
args = sys.argv[1:]
issues = json.loads(state.read_text()) if state.exists() else []
record = {{"args": args}}
def opt(name):
    return args[args.index(name) + 1]
if args[:2] == ["issue", "list"]:
    print(json.dumps([{{"number": i["number"], "title": i["title"]}} for i in issues if i["state"] == "open"]))
elif args[:2] == ["issue", "create"]:
    record["body"] = Path(opt("--body-file")).read_text()
    issues.append({{"number": len(issues) + 1, "title": opt("--title"), "state": "open", "body": record["body"]}})
    print(f"https://issues.invalid/{{len(issues)}}")
elif args[:2] == ["issue", "edit"]:
    record["body"] = Path(opt("--body-file")).read_text()
elif args[:2] == ["issue", "close"]:
    for i in issues:
        if i["number"] == int(args[2]):
            i["state"] = "closed"
with log.open("a") as f:
    f.write(json.dumps(record) + "\\n")
state.write_text(json.dumps(issues))
'''


def _fake_gh(root: Path) -> dict[str, str]:
    """The stand-in gh in root/bin, and the environment that puts it first on PATH."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(FAKE_GH.format(python=sys.executable))
    (bin_dir / "gh").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_GH_STATE": str(root / "gh-state.json"),
            "FAKE_GH_LOG": str(root / "gh-log.jsonl")}


def test_a_failing_nights_issue_is_updated_while_it_fails_and_closed_by_the_first_green_night(tmp_path, monkeypatch):
    for name, value in _fake_gh(tmp_path).items():
        monkeypatch.setenv(name, value)
    starved = {"model": "tiny", "split": "chat", "machine": "linux-cpu", "framework": "llamacpp",
               "verdict": "degraded", "reason": "client starved at c=8: host CPU 100% busy"}

    def night(day: str, failures: list[dict]) -> Night:
        return Night.from_merged({"tables": [{"model": "tiny"}], "failures": failures, "missing": []}, day=day,
                                 run_url=f"RUN-{day}", models=["tiny"])

    assert track(night("2026-11-30", [starved])) == ["tiny: opened (1 problems)"]
    assert track(night("2026-12-01", [starved])) == ["tiny: updated #1 (1 problems)"]
    assert track(night("2026-12-02", [])) == ["tiny: closed #1"]
    assert track(night("2026-12-03", [])) == ["tiny: green"]
    calls = [json.loads(line)["args"] for line in (tmp_path / "gh-log.jsonl").read_text().splitlines()]
    edited = [c for c in calls if c[:2] in (["issue", "create"], ["issue", "edit"], ["issue", "close"])]
    assert [c[:2] for c in edited] == [["issue", "create"], ["issue", "edit"], ["issue", "close"]]
    assert "Still not green on 2026-12-01" in [c for c in calls if c[:2] == ["issue", "comment"]][0][-1]
    assert edited[-1][2] == "1" and edited[-1][-1] == "Green on 2026-12-02 ([run](RUN-2026-12-02))."
    issues = json.loads((tmp_path / "gh-state.json").read_text())
    assert [(i["title"], i["state"]) for i in issues] == [("cellbench nightly: tiny is failing", "closed")]
    assert "- linux-cpu: llamacpp/chat degraded: client starved at c=8" in issues[0]["body"]


# ------------------------------------------------------------------ the workflow's steps, run here


def _workspace(root: Path) -> Path:
    """What actions/checkout leaves: this tree's files (committed or not) in a git checkout whose
    origin is a local bare repository. The virtualenv is this checkout's, already set up, so
    `make setup` finds it current (its stamp is newer than pyproject.toml)."""
    ws = root / "workspace"
    listed = run_git(PROJECT_ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for rel in filter(None, listed):
        source = PROJECT_ROOT / rel
        if source.is_file():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, ws / rel)
    (ws / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    stamp = max((PROJECT_ROOT / ".venv").glob(".installed-*"), key=lambda p: p.stat().st_mtime)
    os.utime(ws / "pyproject.toml", (stamp.stat().st_mtime - 60,) * 2)
    run_git(ws, "init", "-q", "-b", "main")
    run_git(ws, "add", "-A")
    run_git(ws, "commit", "-q", "-m", "checkout")
    run_git(root, "init", "-q", "--bare", "origin.git")
    run_git(ws, "remote", "add", "origin", str(root / "origin.git"))
    run_git(ws, "push", "-q", "origin", "main")
    return ws


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The plan and linux-cpu machine jobs of a manual run (llama.cpp, 2 requests per level), and
    two more machines run by hand as docs/nightly.md's fan-out says."""
    root = tmp_path_factory.mktemp("nightly")
    ws, store = _workspace(root), root / "artifact-store"
    store.mkdir()
    wf = workflow.load(WORKFLOW)
    inputs = {"model": "", "splits": "chat,agent", "frameworks": "llamacpp", "requests": "2", "eval": False,
              "machines": "", "push_results": False}
    plan = workflow.run_job(wf, "plan", workflow.Context(inputs=inputs), ws, store, {})
    assert plan.ok, plan.log()
    entries = json.loads(plan.outputs["matrix"])
    (cpu,) = [e for e in entries if e["name"] == "linux-cpu"]
    needs = {"plan": {"result": "success", "outputs": plan.outputs}}
    assert workflow.Context(needs=needs).condition(wf["jobs"]["machine"]["if"])
    machine = workflow.run_job(wf, "machine", workflow.Context(inputs=inputs, matrix=cpu, needs=needs), ws, store, {})
    hand = {}  # at one level and without the fidelity pass: the agent split's three cost half a minute a cell
    for name, splits in (("lab-b", "chat,agent"), ("lab-c", "chat")):  # lab-c sends no agent split
        cmd = (f"CELLBENCH_MACHINE={name} .venv/bin/cellbench weekly --no-branch --no-fidelity --splits {splits} "
               f"--frameworks llamacpp --results-dir {store}/nightly-{name}/results -- --requests 2 --concurrency 1")
        hand[name] = subprocess.run(["bash", "-c", cmd], cwd=ws, capture_output=True, text=True, timeout=1800,
                                    stdin=subprocess.DEVNULL)
    return {"root": root, "ws": ws, "store": store, "wf": wf, "plan": plan, "entries": entries, "cpu": cpu,
            "machine": machine, "hand": hand}


def _merge(night: dict, *, expected: str, push: bool) -> workflow.JobRun:
    ws, root = night["ws"], night["root"]
    for leftover in ("artifacts", "merged"):  # each job starts from a clean checkout
        shutil.rmtree(ws / leftover, ignore_errors=True)
    env = _fake_gh(root)
    ctx = workflow.Context(
        inputs={"push_results": push},
        needs={"plan": {"result": "success", "outputs": {**night["plan"].outputs, "expected": expected}}},
        github={"server_url": "https://github.invalid", "repository": "lab/cellbench", "run_id": "7",
                "token": "not-a-token"})
    return workflow.run_job(night["wf"], "merge", ctx, ws, night["store"], env)


def _gh_calls(night: dict) -> list[dict]:
    return [json.loads(line) for line in (night["root"] / "gh-log.jsonl").read_text().splitlines()]


SPLITS = {"linux-cpu": ("chat", "agent"), "lab-b": ("chat", "agent"), "lab-c": ("chat",)}  # what each machine ran


def _verdicts(night: dict, machine: str) -> dict[str, dict]:
    """Each split's llama.cpp result of `machine`, whose verdict is ok or, on a host busy enough to
    starve the client, a truthful client-limited `degraded` (tests/support/busy.py): a test of the
    nightly's plumbing takes either, and checks what follows from the one the cell recorded. A cell
    with no result (one that gave up on another session's host lock, say) fails the test with the
    machine's journal, which says why."""
    scoped = night["store"] / f"nightly-{machine}" / "results" / "tiny" / machine
    journal = scoped / f"weekly_{TODAY}.journal.md"
    found = {}
    for split in SPLITS[machine]:
        paths = list((scoped / split).glob("llamacpp_*.json"))
        told = journal.read_text()[-3000:] if journal.is_file() else f"no journal in {scoped}"
        assert len(paths) == 1, f"{machine} llamacpp/{split}: {len(paths)} result files; its journal:\n{told}"
        found[split] = json.loads(paths[0].read_text())
        assert_ok_unless_client_limited(found[split]["verdict"], f"{machine} llamacpp/{split}")
    return found


def _not_ok(results: dict[str, dict]) -> list[str]:
    """`cellbench weekly`'s not_ok list for these results: it exits 1 when it is not empty."""
    return sorted(f"llamacpp/{split}: {r['verdict']['verdict']}" for split, r in results.items()
                  if r["verdict"]["verdict"] != "ok")


@pytest.mark.integration
@pytest.mark.timeout(3600)
def test_the_plan_and_machine_jobs_leave_this_machines_artifact(night):
    assert [e["name"] for e in night["entries"]] == ["m5-pro", "h200", "linux-cpu"]
    assert night["cpu"]["frameworks"] == "llamacpp" and "--requests 2" in night["cpu"]["pytest_args"]
    results = _verdicts(night, "linux-cpu")
    # The cells step is `cellbench weekly`, which fails (exit 1) when a cell is not ok, so a night
    # whose client this busy host starved fails that step, truthfully; the folder is uploaded either way.
    steps = {s.name: s for s in night["machine"].steps}
    assert steps["Chat and agent cells"].returncode == (1 if _not_ok(results) else 0), night["machine"].log()
    assert all(s.returncode == 0 for name, s in steps.items() if name != "Chat and agent cells"), night["machine"].log()
    ran = [s.ran for s in night["machine"].steps]
    assert ran == [True, True, True, False, False, True], "no eval rows (nor their table edits) on linux-cpu"
    scoped = night["store"] / "nightly-linux-cpu" / "results" / "tiny" / "linux-cpu"
    for split, data in results.items():
        assert data["machine"]["slug"] == "linux-cpu"
        assert data["harness"]["commit"] == run_git(PROJECT_ROOT, "rev-parse", "HEAD")
        assert (scoped / f"weekly_{TODAY}_{split}.html").stat().st_size > 0
        assert (scoped / split / "REPORT.md").is_file()
    assert (scoped / f"weekly_{TODAY}.journal.md").is_file() and (scoped / f"weekly_{TODAY}.log").is_file()
    for name, done in night["hand"].items():
        told = f"{name}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
        not_ok = _not_ok(_verdicts(night, name))
        assert done.returncode == (1 if not_ok else 0), told
        assert json.loads(done.stdout[done.stdout.rindex("\n{") + 1:])["not_ok"] == not_ok, told


@pytest.mark.integration
@pytest.mark.timeout(3600)
def test_the_merge_job_reports_silent_machines_and_tracks_the_issue_until_a_green_night(night):
    store, ws = night["store"], night["ws"]
    recorded = {m: _verdicts(night, m) for m in ("linux-cpu", "lab-b", "lab-c")}
    failing = _merge(night, expected="linux-cpu,lab-b,lab-c,m5-pro", push=False)
    assert failing.ok, failing.log()
    assert [s.ran for s in failing.steps][-1] is False, "nothing is committed unless push_results is set"
    merged = json.loads((ws / "merged" / "merged.json").read_text())
    tables = {t["split"]: t for t in merged["tables"]}
    assert tables["chat"]["machines"] == ["linux-cpu", "lab-b", "lab-c", "m5-pro"]
    assert tables["agent"]["missing"] == {"lab-c": "no result from lab-c", "m5-pro": "no result from m5-pro"}
    assert "lab-c" not in tables["chat"]["missing"]
    for machine, results in recorded.items():  # each cell is that machine's own result, never a mix
        for split, result in results.items():
            cell = tables[split]["cells"]["llamacpp"][machine]
            assert (cell["verdict"], cell["run_id"]) == (result["verdict"]["verdict"], result["run_id"])
            assert set(cell["output_tps"]) == {str(level["concurrency"]) for level in result["levels"]}
    report = (ws / "merged" / "MERGED.md").read_text()
    assert "no result from lab-c" in report and "no result from m5-pro" in report
    assert "no result from m5-pro" in (ws / "merged" / "index.html").read_text()
    site = (store / "site" / "index.html").read_text()  # the artifact `site`: every machine's splits
    assert all(f'id="tiny-{m}-{s}"' in site for m in SPLITS for s in SPLITS[m]), "cellbench site over the night"

    def problems(machines: tuple[str, ...]) -> list[str]:
        """The tracking issue's line of each cell of `machines` that is not ok (bench.nightly.tracking)."""
        return [f"- {m}: llamacpp/{split} {r['verdict']['verdict']}: {r['verdict']['reason']}"
                for m in machines for split, r in recorded[m].items() if r["verdict"]["verdict"] != "ok"]

    (opened,) = [c for c in _gh_calls(night) if c["args"][:2] == ["issue", "create"]]
    assert opened["args"][opened["args"].index("--title") + 1] == "cellbench nightly: tiny is failing"
    assert "lab-c: no agent result" in opened["body"] and "m5-pro: no chat result" in opened["body"]
    assert "https://github.invalid/lab/cellbench/actions/runs/7" in opened["body"]
    assert all(line in opened["body"] for line in problems(("linux-cpu", "lab-b", "lab-c"))), opened["body"]

    shutil.rmtree(store / "nightly-lab-c")  # the next night: every expected machine sends everything
    main_before = run_git(night["root"] / "origin.git", "rev-parse", "main")
    calls_before = len(_gh_calls(night))
    next_night = _merge(night, expected="linux-cpu,lab-b", push=True)
    assert next_night.ok, next_night.log()
    calls = _gh_calls(night)[calls_before:]
    closed = [c for c in calls if c["args"][:2] == ["issue", "close"]]
    still = problems(("linux-cpu", "lab-b"))
    if not still:  # green: the issue is closed
        assert [c["args"][2] for c in closed] == ["1"] and "Green on" in closed[0]["args"][-1]
    else:  # a cell the busy host starved keeps the night from being green: the issue stays open, updated
        (edited,) = [c for c in calls if c["args"][:2] == ["issue", "edit"]]
        assert closed == [] and edited["args"][2] == "1", calls
        assert all(line in edited["body"] for line in still) and "lab-c" not in edited["body"], edited["body"]
    origin = night["root"] / "origin.git"
    files = run_git(origin, "ls-tree", "-r", "--name-only", f"nightly/{TODAY}").splitlines()
    assert f"nightly/{TODAY}/MERGED.md" in files
    for machine in ("linux-cpu", "lab-b"):
        assert any(f.startswith(f"results/tiny/{machine}/agent/llamacpp_") for f in files)
    assert run_git(origin, "rev-parse", "main") == main_before, "main never moves"


@pytest.mark.parametrize("branch", ["main", "master", "weekly/2026-11-30"])
def test_publish_refuses_any_branch_but_nightly(tmp_path: Path, branch: str):
    from bench.base.git import GitError
    from bench.nightly.publish import publish

    repo = tmp_path / "repo"
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    with pytest.raises(GitError, match="nightly/<date> branch|refusing"):
        publish(repo, branch, tmp_path, [], push=False)
    assert run_git(repo, "branch", "--list").split() == ["*", "main"], "no branch was made"
