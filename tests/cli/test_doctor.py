"""`cellbench doctor` on this machine, and what `pytest -m chat` says about frameworks it cannot run.

This machine is Linux on x86_64 without a GPU, with llama.cpp built in the framework cache (CI's
`make test` builds it first): llama.cpp runs here and is installed; the Apple-only and CUDA-only
frameworks cannot run, and every one of them says so in one line that names the platform; the
ones run from a user's own binary on Linux (Ollama, mistral.rs, inferrs) run here and, without
one, say what is missing and how to point at it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.cli.main import main
from bench.setup.adapter import host_platforms, this_platform

ELSEWHERE = ("vllm_metal", "omlx", "sglang")
# Run here from the user's own binary only (no Linux installer): framework -> its variable, binary.
OWN_BINARY = {"mistralrs": ("MISTRALRS_SERVER", "mistralrs"), "ollama": ("OLLAMA", "ollama"),
              "inferrs": ("INFERRS", "inferrs")}
OWN_VARIABLES = ("MISTRALRS_SERVER", "MISTRALRS", "OLLAMA", "OLLAMA_BIN", "INFERRS")

pytestmark = pytest.mark.skipif(
    host_platforms() != ("linux-x86_64",), reason=f"expects a Linux x86_64 host without a GPU, not {host_platforms()}"
)


@pytest.fixture
def report(capsys, monkeypatch) -> dict:
    for name in ("LLAMA_SERVER", *OWN_VARIABLES):  # the cached build, not a user's own
        monkeypatch.delenv(name, raising=False)
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    return {r["framework"]: r for r in data["frameworks"]}


def test_llamacpp_runs_here_and_is_installed_from_the_cache(report):
    llamacpp = report["llamacpp"]
    assert llamacpp["runnable"] and llamacpp["platform"] == "linux-x86_64"
    assert llamacpp["installed"] and llamacpp["source"] == "cache" and llamacpp["version"] == "b11434"
    assert llamacpp["install_command"] == "cellbench install llamacpp"
    assert "linux-x86_64+cuda" in llamacpp["platforms"] and "darwin-arm64" in llamacpp["platforms"]


def test_omlx_cannot_run_here_and_says_where_it_runs_and_how_to_install(report):
    omlx = report["omlx"]
    assert not omlx["runnable"] and omlx["platforms"] == ["darwin-arm64"] and "installed" not in omlx
    assert omlx["install_command_for"] == "darwin-arm64"
    assert "git clone https://github.com/jundot/omlx.git" in omlx["install_command"]
    assert any("git pull" in step for step in omlx["update_commands"])


def test_every_framework_has_a_report(report):
    for name in ELSEWHERE:
        assert not report[name]["runnable"], name
        assert report[name]["install_command"].startswith(f"cellbench install {name} (runs: "), name
    assert report["sglang"]["install_by_platform"]["linux-x86_64+cuda"] != report["sglang"]["install_command"]
    assert report["openai"]["runnable"] and "--endpoint" in report["openai"]["install_command"]


def test_frameworks_without_a_linux_installer_run_here_from_the_users_binary(report):
    for name, (variable, exe) in OWN_BINARY.items():
        own = report[name]
        assert own["runnable"] and own["platform"] == "linux-x86_64", own
        assert own["installed"] is (shutil.which(exe) is not None), own
        assert own["install_command"].startswith("cellbench has no installer for "), own
        how = own["install_command"]
        assert f"set {variable}=/path/to/{exe}" in how and how.endswith(f"or put `{exe}` on PATH"), how
    assert report["ollama"]["install_by_platform"]["darwin-arm64"].startswith("cellbench install ollama (runs: brew")


def test_install_of_a_framework_without_an_installer_says_how_to_provide_it(capsys, monkeypatch):
    monkeypatch.delenv("INFERRS", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # no inferrs on it
    assert main(["install", "inferrs"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("inferrs: inferrs is not installed: cellbench has no installer for inferrs"), err
    assert "installing" not in err, "nothing is built"


def test_install_of_everything_that_runs_here_passes_over_what_it_cannot_install(capsys, monkeypatch):
    """`make bench` runs `cellbench install`: a framework with no installer here is named, not a failure."""
    for name in OWN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    runs_here = [a for a in adapters.registry().values() if a.runs_here()]
    own = [a for a in runs_here if not getattr(a.recipe, "has_installer", True)]
    monkeypatch.setattr(adapters, "registry", lambda: {a.name: a for a in own})  # nothing is built
    assert sorted(a.name for a in own) == sorted(OWN_BINARY)
    assert main(["install"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sorted(line.split(":")[0] for line in err) == sorted(OWN_BINARY)
    assert all(" is not installed: cellbench has no installer for " in line for line in err), err


def test_the_table_names_the_platform_of_what_cannot_run(capsys):
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["framework", "platforms", "runnable", "here", "installed", "install"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert re.search(r"yes \(linux-x86_64\)\s+b11434 \(cache\)\s+cellbench install llamacpp", rows["llamacpp"])
    assert re.search(r"^omlx\s+darwin-arm64\s+no \(this is linux-x86_64\)\s+-\s+"
                     r"\[darwin-arm64\] cellbench install omlx",
                     rows["omlx"])


def test_install_refuses_a_framework_that_cannot_run_here(capsys):
    assert main(["install", "omlx"]) == 1
    assert "omlx: runs on darwin-arm64; this is linux-x86_64" in capsys.readouterr().err


@pytest.mark.integration
def test_chat_cells_of_frameworks_that_cannot_run_here_skip_with_one_line_each(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-rs",
           "--requests", "2", "--concurrency", "1", "--port", "0", f"--results-dir={tmp_path / 'results'}",
           "-k", "not llamacpp and not mlx_lm and not hf_transformers and not vllm- and not vllm_mlx"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env={k: v for k, v in os.environ.items() if k not in ("LLAMA_SERVER", *OWN_VARIABLES)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert re.search(r"\b7 skipped\b", out) and "cellbench verdicts: 7 skipped" in out
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED [1] ")]
    for name in ELSEWHERE:
        (line,) = [line for line in skips if f": {name} runs on " in line]
        assert line.endswith(f"; this is {this_platform()}"), line
    for name, (variable, exe) in OWN_BINARY.items():  # on PATH it would run: the tiny profile then skips it
        (line,) = [line for line in skips if f": {name} " in line]
        if shutil.which(exe) is None:
            assert f": {name} is not installed: cellbench has no installer for " in line, line
            assert f"set {variable}=/path/to/{exe}" in line and line.endswith(f"or put `{exe}` on PATH"), line
            assert "--install" not in line, "--install would change nothing"
    (generic,) = [line for line in skips if ": openai: " in line]
    assert "--endpoint http://127.0.0.1:PORT" in generic
    results = [p for p in tmp_path.rglob("*.json") if not p.name.endswith(".journal.json")]
    assert not results, "a skipped cell writes no result"


@pytest.mark.session
def test_a_reader_that_stops_early_ends_the_command_quietly():
    """`cellbench doctor | head -3`: the pipe closes before doctor is done writing."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "doctor"], cwd=PROJECT_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
