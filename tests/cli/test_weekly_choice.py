"""One model and one machine folder for every command, chosen as a pytest session chooses them
(`--model`, else APPLEBENCH_MODEL, else tiny; CELLBENCH_MACHINE, else APPLEBENCH_RESULTS_SUBDIR,
else the hardware), and said: `cellbench weekly` (and `--dry-run`), `weekly skip`, `noise`,
`serve` and `eval`. A SiliconBench shell's "run the weekly benchmark" measures its model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from tests.support.gitrepo import run_git

TODAY = date.today().isoformat()


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This environment without the variables that choose model and machine."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("APPLEBENCH_MODEL", "APPLEBENCH_RESULTS_SUBDIR", "CELLBENCH_MACHINE")}
    return env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("/results/\n")
    run_git(repo, "init", "-q", "-b", "main")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-q", "-m", "start")
    return repo


def _cellbench(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.cli", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _fault_profile(where: Path) -> Path:
    """A profile whose server is the suite's fault server answering well (the generic openai cell)."""
    argv = [sys.executable, "-m", "tests.support.faultserver", "--port", "{port}", "--mode", "ok"]
    path = where / "faulty.yaml"
    path.write_text("\n".join(["name: faulty", "results_name: faulty", "builtin: tiny",
                               "formats: {gguf: {served_id: tiny}}", "openai:", f"  command: {json.dumps(argv)}",
                               f"  env: {{PYTHONPATH: {json.dumps(str(PROJECT_ROOT))}}}"]) + "\n")
    return path


@pytest.mark.session
def test_the_dry_run_names_the_model_and_machine_and_what_chose_them(repo, shell):
    done = _cellbench("weekly", "--dry-run", f"--repo={repo}", env={**shell, "APPLEBENCH_MODEL": "qwen3-0.6b"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "cellbench weekly --dry-run: nothing is installed, run, written, committed or pushed"
    assert lines[1] == f"model: qwen3-0.6b ({PROJECT_ROOT / 'models' / 'qwen3-0.6b.yaml'}) from APPLEBENCH_MODEL"
    assert lines[2] == f"machine: {detect().slug} from detected"
    scoped = repo / "results" / "Qwen3-0.6B" / detect().slug
    assert lines[3] == f"folder: {scoped}/ (journal weekly_{TODAY}.journal.md, log weekly_{TODAY}.log)"
    head = run_git(repo, "rev-parse", "--short", "HEAD")
    assert lines[4] == f"branch: weekly/{TODAY} (would be made from {head})"
    sessions = [line for line in lines if line.startswith("session: ")]
    assert len(sessions) == 2 and all("--model" not in line for line in sessions), \
        "the sessions read APPLEBENCH_MODEL themselves, and their headers say so"
    assert not (repo / "results").exists() and run_git(repo, "branch", "--list", "weekly/*") == "", "nothing done"

    given = _cellbench("weekly", "--dry-run", f"--repo={repo}", "--model", "tiny", "--splits", "chat",
                       env={**shell, "APPLEBENCH_MODEL": "qwen3-0.6b", "APPLEBENCH_RESULTS_SUBDIR": "m5pro"})
    assert given.returncode == 0, given.stderr
    assert f"model: tiny ({PROJECT_ROOT / 'models' / 'tiny.yaml'}) from --model" in given.stdout
    assert "machine: m5pro from APPLEBENCH_RESULTS_SUBDIR" in given.stdout
    assert f"folder: {repo / 'results' / 'tiny' / 'm5pro'}/" in given.stdout
    (session,) = [line for line in given.stdout.splitlines() if line.startswith("session: ")]
    assert " --model=tiny " in session and " -m chat " in session
    assert " --fidelity" in session, "the weekly run compares each stack's answers by default"
    bare = _cellbench("weekly", "--dry-run", f"--repo={repo}", "--model", "tiny", "--splits", "chat", "--no-fidelity",
                      env=shell)
    (session,) = [line for line in bare.stdout.splitlines() if line.startswith("session: ")]
    assert "--fidelity" not in session

    legacy = _cellbench("weekly", "--dry-run", f"--repo={repo}", env={**shell, "APPLEBENCH_RESULTS_SUBDIR": ""})
    assert legacy.stdout.splitlines()[2] == (
        f"machine: {detect().slug} from detected, in SiliconBench's legacy tree results/<model>/<split>/ "
        "(APPLEBENCH_RESULTS_SUBDIR is set empty)"), "asking for the legacy tree is not silently ignored"
    assert f"folder: {repo / 'results' / 'tiny'}/" in legacy.stdout, "the legacy tree has no machine folder"

    bad = _cellbench("weekly", "--dry-run", f"--repo={repo}", env={**shell, "APPLEBENCH_MODEL": "nosuch"})
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "cellbench weekly: error: APPLEBENCH_MODEL=nosuch: model profile 'nosuch': no file "
        f"{PROJECT_ROOT / 'models' / 'nosuch.yaml'} (shipped profiles: qwen3-0.6b, tiny)")


@pytest.mark.integration
def test_a_weekly_run_measures_the_model_applebench_model_names(repo, shell, tmp_path):
    env = {**shell, "APPLEBENCH_MODEL": str(_fault_profile(tmp_path))}
    done = _cellbench("weekly", f"--repo={repo}", "--no-update", "--no-branch", "--splits", "chat",
                      "--frameworks", "openai", "--", "--concurrency", "1", "--requests", "2", "--warmup", "0",
                      "--port", "0", env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    scoped = repo / "results" / "faulty" / detect().slug
    assert f"cellbench weekly: model faulty from APPLEBENCH_MODEL, machine {detect().slug} from detected; " \
           f"results, journal and log in {scoped}/" in done.stderr
    assert f"cellbench cells write to {repo / 'results' / 'faulty' / detect().slug}/<split>/ (model faulty from " \
           "APPLEBENCH_MODEL" in done.stdout, "the session chose it itself, from the same variable"
    (result,) = (scoped / "chat").glob("openai_*.json")
    data = json.loads(result.read_text())
    assert (data["model"]["profile"], data["model"]["profile_source"]) == ("faulty", "APPLEBENCH_MODEL")
    assert not (repo / "results" / "tiny").exists(), "the toy model was not measured"
    journal = (scoped / f"weekly_{TODAY}.journal.md").read_text()
    assert f"- Chosen: model faulty from APPLEBENCH_MODEL, machine {detect().slug} from detected" in journal


@pytest.mark.session
def test_weekly_skip_records_under_the_chosen_model(repo, shell):
    done = _cellbench("weekly", "skip", f"--repo={repo}", "llamacpp", "chat", "--reason", "upstream #1",
                      env={**shell, "APPLEBENCH_MODEL": "qwen3-0.6b", "APPLEBENCH_RESULTS_SUBDIR": "m5pro"})
    assert done.returncode == 0, done.stderr
    scoped = repo / "results" / "Qwen3-0.6B" / "m5pro"
    assert done.stderr == (f"cellbench weekly skip: model qwen3-0.6b from APPLEBENCH_MODEL, machine m5pro from "
                           f"APPLEBENCH_RESULTS_SUBDIR: {scoped}/\n")
    assert "llamacpp/chat" in json.loads((scoped / "weekly_skips.json").read_text())["skips"]


@pytest.mark.session
def test_noise_runs_its_session_on_the_chosen_model(shell, tmp_path):
    done = _cellbench("noise", "llamacpp", "--runs", "2", "--results-dir", str(tmp_path), "--", "--collect-only",
                      env={**shell, "APPLEBENCH_MODEL": "qwen3-0.6b"}, timeout=300)
    slug = detect().slug
    assert done.stdout.startswith(f"cellbench noise: model qwen3-0.6b from APPLEBENCH_MODEL, machine {slug} from "
                                  "detected\n"), done.stdout[-2000:] + done.stderr[-2000:]
    runs = tmp_path / "Qwen3-0.6B" / slug / "noise" / "runs"
    assert f"cellbench cells write to {runs / 'Qwen3-0.6B' / slug}/<split>/ (model qwen3-0.6b from " \
           "APPLEBENCH_MODEL" in done.stdout
    assert done.returncode == 1 and "no floor measured" in done.stderr, "--collect-only measures nothing"


@pytest.mark.session
def test_eval_reads_the_chosen_models_config_and_names_the_variable(shell):
    done = _cellbench("eval", "locate", env={**shell, "APPLEBENCH_MODEL": "tiny"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[0].endswith(f"; model tiny from APPLEBENCH_MODEL, machine {detect().slug} "
                                                "from detected")
    missing = _cellbench("eval", "precheck", env={**shell, "APPLEBENCH_MODEL": "qwen3-0.6b"})
    assert missing.returncode == 2
    assert missing.stderr == (f"cellbench eval: APPLEBENCH_MODEL=qwen3-0.6b: eval config "
                              f"{PROJECT_ROOT / 'models' / 'qwen3-0.6b' / 'eval.yaml'}: no such file\n")


@pytest.mark.integration
def test_serve_starts_the_chosen_models_server_and_says_why(shell, tmp_path):
    env = {**shell, "APPLEBENCH_MODEL": str(_fault_profile(tmp_path)), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "serve", "openai", "--port", "0",
                             "--log", str(tmp_path / "server.log")], cwd=PROJECT_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while not any(line.startswith("Ctrl-C stops it.") for line in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"chosen:  model faulty from APPLEBENCH_MODEL, machine {detect().slug} from detected\n" in lines, \
        "".join(lines) + out
    assert any(f"--model {tmp_path / 'faulty.yaml'} --requests 3" in line for line in lines), "its verify command"
    assert proc.returncode == 0 and "stopped openai on http://127.0.0.1:" in out
