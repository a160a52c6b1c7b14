"""Every GitHub Actions workflow in .github/workflows passes actionlint, and the suite's own CI
(ci.yml) runs what the Makefile and .ci/run define: a renamed target fails here, not on GitHub."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT

WORKFLOWS = sorted((PROJECT_ROOT / ".github" / "workflows").glob("*.y*ml"))
CI = PROJECT_ROOT / ".github" / "workflows" / "ci.yml"


def test_both_workflows_are_found():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "nightly.yml"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes(workflow: Path):
    actionlint = Path(sys.executable).parent / "actionlint"
    assert actionlint.exists(), "actionlint comes with the dev extra: make setup (pip install -e '.[dev]')"
    done = subprocess.run([str(actionlint), "-no-color", str(workflow)], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path):
    """The lint is real: an input the nightly workflow does not declare fails it."""
    nightly = PROJECT_ROOT / ".github" / "workflows" / "nightly.yml"
    broken = tmp_path / ".github" / "workflows" / "nightly.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(nightly.read_text().replace("${{ inputs.frameworks }}", "${{ inputs.framework_list }}"))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = subprocess.run([str(Path(sys.executable).parent / "actionlint"), "-no-color", str(broken)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "framework_list" in done.stdout


def run_steps(job: dict) -> list[str]:
    return [step["run"].strip() for step in job["steps"] if "run" in step]


def test_ci_runs_the_makefile_targets_and_ci_run():
    ci = yaml.safe_load(CI.read_text())
    triggers = ci[True] if True in ci else ci["on"]  # YAML 1.1 reads a bare `on:` key as true
    assert {"push", "pull_request", "workflow_dispatch"} <= set(triggers)
    jobs = ci["jobs"]
    assert run_steps(jobs["lint"]) == ["make lint"]
    assert run_steps(jobs["test-fast"]) == ["make test-fast"]
    assert "3.10" in jobs["test-fast"]["strategy"]["matrix"]["python"], "requires-python's oldest version"
    assert run_steps(jobs["test"]) == [".ci/run"]
    assert "refs/heads/main" in jobs["test"]["if"] and "workflow_dispatch" in jobs["test"]["if"]
    cache = next(s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == "~/.cache/cellbench" and "hashFiles('adapters/*.py')" in cache["with"]["key"]
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    for target in ("lint", "test-fast", "test"):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"the Makefile has no target {target!r}"
    assert (PROJECT_ROOT / ".ci" / "run").stat().st_mode & 0o111, ".ci/run must be executable"
