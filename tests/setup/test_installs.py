"""The framework cache: idempotent, locked against concurrent installs, all-or-nothing, versioned."""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench.setup.installs.cache import (
    Installation,
    InstallError,
    NotInstalled,
    build_log_path,
    ensure_installed,
    install_dir,
)
from bench.setup.installs.commands import run_logged
from bench.setup.installs.recipes import SdistCMakeBuild


@dataclass
class ScriptRecipe:
    """A recipe whose 'build' writes an executable script; counts how often it really built."""

    framework: str = "demo"
    version: str = "1.0"
    fail: bool = False
    builds: list = field(default_factory=list)

    def external(self):
        return None

    def install_hint(self):
        return "cellbench install demo"

    def build(self, prefix: Path, log) -> Installation:
        self.builds.append(prefix)
        time.sleep(0.3)  # long enough for a second installer to arrive and wait on the lock
        run_logged(["sh", "-c", "echo compiling; exit 1" if self.fail else "echo compiling"], log)
        exe = prefix / "bin" / "demo-server"
        exe.parent.mkdir()
        exe.write_text("#!/bin/sh\necho demo 1.0\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        return Installation(self.framework, self.version, prefix, {"demo-server": str(exe)}, "cache")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path))
    return tmp_path


def test_install_once_then_reuse(cache):
    recipe = ScriptRecipe()
    first = ensure_installed(recipe)
    second = ensure_installed(recipe)
    assert len(recipe.builds) == 1
    assert first == second and second.prefix == cache / "frameworks" / "demo" / "1.0"
    assert second.details["build_log"] == str(build_log_path(recipe))
    assert "compiling" in build_log_path(recipe).read_text()


def test_concurrent_installs_build_once():
    recipe = ScriptRecipe()
    results = []
    threads = [threading.Thread(target=lambda: results.append(ensure_installed(recipe))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(recipe.builds) == 1 and len(results) == 3 and len({r.prefix for r in results}) == 1


def test_failed_build_names_its_log_and_leaves_no_install():
    recipe = ScriptRecipe(fail=True)
    with pytest.raises(InstallError, match=str(build_log_path(recipe))):
        ensure_installed(recipe)
    assert not (install_dir(recipe) / "install.json").exists()
    recipe.fail = False
    ensure_installed(recipe)  # an interrupted or failed build is simply redone
    assert len(recipe.builds) == 2


def test_not_installed_says_how():
    with pytest.raises(NotInstalled, match="cellbench install demo"):
        ensure_installed(ScriptRecipe(), allow_install=False)


def test_versions_are_separate_cache_entries():
    a, b = ensure_installed(ScriptRecipe(version="1.0")), ensure_installed(ScriptRecipe(version="2.0"))
    assert a.prefix != b.prefix and b.version == "2.0"


def _fake_server(tmp_path: Path) -> Path:
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\necho 'version: 7001 (abc1234)' >&2\n")
    exe.chmod(0o755)
    return exe


def test_external_binary_from_env_var_wins(tmp_path, monkeypatch):
    recipe = SdistCMakeBuild("x", "b1", "x==1", "src", ("t",), (), ("llama-server",), env_var="LLAMA_SERVER")
    monkeypatch.setenv("LLAMA_SERVER", str(_fake_server(tmp_path)))
    inst = ensure_installed(recipe, allow_install=False)
    assert inst.source == "$LLAMA_SERVER" and inst.version == "7001 (abc1234)"
    assert inst.executable("llama-server") == str(tmp_path / "llama-server")


def test_external_binary_on_path(tmp_path, monkeypatch):
    recipe = SdistCMakeBuild("x", "b1", "x==1", "src", ("t",), (), ("llama-server",), path_name="llama-server")
    _fake_server(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert ensure_installed(recipe, allow_install=False).source == "PATH"


def test_env_var_pointing_nowhere_is_a_clear_error(tmp_path, monkeypatch):
    recipe = SdistCMakeBuild("x", "b1", "x==1", "src", ("t",), (), ("llama-server",), env_var="LLAMA_SERVER")
    monkeypatch.setenv("LLAMA_SERVER", str(tmp_path / "missing"))
    with pytest.raises(InstallError, match="not an executable file"):
        ensure_installed(recipe)
