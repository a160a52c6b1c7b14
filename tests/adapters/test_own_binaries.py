"""Frameworks cellbench cannot install on Linux (Ollama, mistral.rs, inferrs): found where the user
put them, and otherwise skipped with a reason that says what is missing and how to provide it.

The binaries here are small scripts that answer `--version` as the real ones do; the cell test's
fake `ollama serve` is the suite's fault server on OLLAMA_HOST, so a real cell runs through the
Ollama adapter's own command on this Linux machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.setup.installs.cache import NotInstalled, ensure_installed
from bench.setup.installs.scripted import OwnBinary, ScriptedInstall
from bench.setup.installs.updates import update_one
from tests.support.busy import assert_ok_unless_client_limited

LINUX = "linux-x86_64"
# (framework, variable, older name or None, binary, --version output)
OWN = [
    ("ollama", "OLLAMA", "OLLAMA_BIN", "ollama", "ollama version is 0.12.3"),
    ("mistralrs", "MISTRALRS_SERVER", "MISTRALRS", "mistralrs", "mistralrs 0.6.0"),
    ("inferrs", "INFERRS", None, "inferrs", "inferrs 0.1.4"),
]
VARIABLES = ("OLLAMA", "OLLAMA_BIN", "MISTRALRS_SERVER", "MISTRALRS", "INFERRS")


@pytest.fixture(autouse=True)
def nothing_installed(tmp_path, monkeypatch) -> Path:
    """No variable set, and a PATH with none of the binaries (only this Python's folder and /bin)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    bare = tmp_path / "path"
    bare.mkdir()
    monkeypatch.setenv("PATH", os.pathsep.join([str(bare), str(Path(sys.executable).parent), "/usr/bin", "/bin"]))
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))
    return bare


def binary(folder: Path, name: str, version_line: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("name, variable, older, exe, version_line", OWN)
def test_without_a_binary_the_reason_says_what_is_missing_and_how_to_point_at_it(name, variable, older, exe,
                                                                                 version_line):
    recipe = adapters.get(name).recipe_for(LINUX)
    assert isinstance(recipe, OwnBinary)
    with pytest.raises(NotInstalled) as err:
        ensure_installed(recipe, allow_install=True)  # --install changes nothing: there is no installer
    assert not err.value.installable
    also = f" (or ${older})" if older else ""
    assert str(err.value).startswith(f"{name} is not installed: cellbench has no installer for ")
    assert str(err.value).endswith(f": set {variable}=/path/to/{exe}{also} or put `{exe}` on PATH")


@pytest.mark.parametrize("name, variable, older, exe, version_line", OWN)
def test_the_users_binary_is_found_by_variable_older_name_and_path(name, variable, older, exe, version_line,
                                                                   tmp_path, monkeypatch, nothing_installed):
    recipe = adapters.get(name).recipe_for(LINUX)
    on_path = binary(nothing_installed, exe, version_line)
    found = ensure_installed(recipe, allow_install=False)
    assert (found.source, found.executable(exe)) == ("PATH", str(on_path))
    assert found.version == version_line.split()[-1]
    mine = tmp_path / "mine"
    mine.mkdir()
    if older:
        monkeypatch.setenv(older, str(binary(mine, f"old-{exe}", version_line)))
        assert ensure_installed(recipe, allow_install=False).source == f"${older}"
    monkeypatch.setenv(variable, str(binary(mine, exe, version_line)))
    found = ensure_installed(recipe, allow_install=False)
    assert (found.source, found.executable(exe)) == (f"${variable}", str(mine / exe)), "the new name wins"


@pytest.mark.parametrize("name", ["ollama", "mistralrs"])
def test_macos_keeps_its_recipe_and_honours_both_names(name):
    recipe = adapters.get(name).recipe_for("darwin-arm64")
    assert isinstance(recipe, ScriptedInstall)
    hint = recipe.install_hint()
    assert hint.startswith(f"cellbench install {name} (runs: ")
    assert {"ollama": "set $OLLAMA or $OLLAMA_BIN", "mistralrs": "set $MISTRALRS_SERVER or $MISTRALRS"}[name] in hint


FAKE_OLLAMA = """#!/bin/sh
# `ollama --version` and `ollama serve` (on OLLAMA_HOST), answered by the suite's fault server.
if [ "$1" = "--version" ]; then echo "ollama version is 0.12.3"; exit 0; fi
exec {python} -m tests.support.faultserver --port "${{OLLAMA_HOST##*:}}" --served-id tiny:latest
"""


@pytest.mark.integration
def test_an_ollama_cell_runs_on_linux_with_the_users_binary(tmp_path):
    fake = tmp_path / "bin" / "ollama"
    fake.parent.mkdir()
    fake.write_text(FAKE_OLLAMA.format(python=sys.executable))
    fake.chmod(0o755)
    profile = tmp_path / "tagged.yaml"
    profile.write_text("name: tagged\nresults_name: tagged\n"
                       "formats: {ollama: {tag: 'tiny:latest'}}\n")
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "ollama", "-rs",
           f"--model={profile}", f"--results-dir={results}", "--concurrency", "1", "--requests", "3",
           "--warmup", "1", "--port", "0", "--progress-interval", "0"]
    env = {**{k: v for k, v in os.environ.items() if k not in VARIABLES}, "OLLAMA": str(fake),
           "PYTHONPATH": str(PROJECT_ROOT), "CELLBENCH_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stdout[-3000:]
    (path,) = [p for p in results.rglob("ollama_*.json")]
    result = json.loads(path.read_text())
    assert_ok_unless_client_limited(result["verdict"], "ollama cell")
    assert result["framework"]["platform"] == LINUX, result["framework"]
    assert result["framework"]["version"] == "0.12.3" and result["framework"]["install_source"] == "$OLLAMA"


@pytest.mark.parametrize("name, variable, older, exe, version_line", OWN)
def test_an_update_names_what_is_missing_and_leaves_the_users_binary_alone(name, variable, older, exe, version_line,
                                                                            nothing_installed):
    """`cellbench update` and the weekly run's update step: an error naming the missing binary (never
    a crash, never a build), then, once there is one, the user's own install as it is."""
    recipe = adapters.get(name).recipe_for(LINUX)
    missing = update_one(recipe, LINUX)
    assert missing.error is not None and missing.error.startswith(f"{name} is not installed: "), missing
    assert missing.after is None and not (nothing_installed.parent / "cache" / "frameworks" / name).exists()
    binary(nothing_installed, exe, version_line)
    own = update_one(recipe, LINUX)
    assert own.error is None and own.after == version_line.split()[-1], own
    assert "cells use your own install (PATH)" in own.note
