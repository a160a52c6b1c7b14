"""`TRANSFORMERS=/path/to/transformers`: the user's own transformers instead of the pinned venv.

The user's `transformers` here is a console script as pip writes one, on a Python whose packages
are dist-info folders only (nothing imports them): what is checked is which executable the cell
runs, which versions it records (those the script's own Python reports), the refusal of a release
older than the adapter's minimum, and the model check for releases that list their download cache
on /v1/models and name the served model `<path>@main`. The pinned install, where cached, serves as
a real user's transformers. A real 5.17 server on this path: docs/running-cells.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import adapters
from adapters import hf_transformers
from bench.cli.main import doctor_report
from bench.cli.main import main as cellbench
from bench.core.result.files import new_run_id
from bench.core.verdicts import Identity, Verdict
from bench.run.cell import CellConfig, run_cell
from bench.setup import profiles
from bench.setup.adapter import ModelRef, ServeContext
from bench.setup.installs.cache import Installation, InstallError, NotInstalled, cached, ensure_installed
from bench.setup.installs.recipes import script_python
from bench.setup.installs.updates import install_selected, update_one

LINUX = "linux-x86_64"
MODEL = ModelRef(path=Path("/models/tiny"), served_id="/models/tiny")
USERS_CACHE = os.environ.get("CELLBENCH_CACHE")  # the framework cache `make test` installs into
CACHE_LISTING = ("Qwen/Qwen3-0.6B", "HuggingFaceTB/SmolLM2-135M-Instruct")  # what an old release lists


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """An empty framework cache and no TRANSFORMERS: a test sets what it needs."""
    monkeypatch.delenv("TRANSFORMERS", raising=False)
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))


def own_transformers(folder: Path, versions: dict[str, str]) -> Path:
    """A `transformers` console script on a Python of its own whose installed packages are `versions`."""
    site, bin_dir = folder / "site-packages", folder / "bin"
    for dist, version in versions.items():
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    script = bin_dir / "transformers"
    script.write_text(f"#!{python}\nimport sys\nfrom transformers.cli.transformers import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return script


H200_BOX = {"transformers": "5.17.0", "torch": "2.11.0+cu130", "tokenizers": "0.22.2"}


def test_the_users_transformers_runs_instead_of_the_venv_with_its_own_versions(tmp_path, monkeypatch):
    script = own_transformers(tmp_path, H200_BOX)
    monkeypatch.setenv("TRANSFORMERS", str(script))
    adapter = adapters.get("hf_transformers")
    install = install_selected(adapter.recipe_for(LINUX), pinned=False, allow_install=False)  # as a cell binds
    assert (install.source, install.version, install.executable("transformers")) == ("$TRANSFORMERS", "5.17.0",
                                                                                   str(script))
    assert install.details["packages"] == H200_BOX, "the versions its own Python reports, torch's build included"
    assert install.details["python"] == str(tmp_path / "bin" / "python")
    assert install.version_choice is None, "neither the adapter's pin nor an update: the user's own"
    ctx = ServeContext(install, adapter.model_for_server(MODEL), "127.0.0.1", 8009, "chat", 1, LINUX)
    assert adapter.serve(ctx).argv[:2] == [str(script), "serve"]
    assert cached(adapter.recipe_for(LINUX)) is None, "nothing was installed"

    report = doctor_report(adapter)
    assert (report["installed"], report["version"], report["source"]) == (True, "5.17.0", "$TRANSFORMERS")
    assert report["install_command"] == ("cellbench install hf_transformers; "
                                         "or set $TRANSFORMERS to your own transformers")
    own = update_one(adapter.recipe_for(LINUX), LINUX, dry_run=True)
    assert own.after == "5.17.0" and "cells use your own install ($TRANSFORMERS)" in own.note, own


def test_without_the_variable_the_pinned_venv_is_used_even_with_transformers_on_path(tmp_path, monkeypatch):
    script = own_transformers(tmp_path, H200_BOX)
    monkeypatch.setenv("PATH", f"{script.parent}:{Path(sys.executable).parent}:/usr/bin:/bin")
    recipe = adapters.get("hf_transformers").recipe_for(LINUX)
    assert recipe.external() is None
    with pytest.raises(NotInstalled, match=r"hf_transformers 5\.24\.0 is not installed: cellbench install"):
        ensure_installed(recipe, allow_install=False)


@pytest.mark.parametrize("old", ["4.57.6", "5.4.0"])
def test_an_older_transformers_skips_the_cell_naming_the_minimum(tmp_path, monkeypatch, capsys, old):
    monkeypatch.setenv("TRANSFORMERS", str(own_transformers(tmp_path, {**H200_BOX, "transformers": old})))
    cfg = CellConfig(framework="hf_transformers", split="chat", profile=profiles.load_profile("tiny"),
                     results_root=tmp_path / "results", run_id=new_run_id())
    outcome = run_cell(cfg, launch=None)
    assert outcome.verdict.verdict is Verdict.SKIPPED and outcome.result_path is None
    assert outcome.verdict.reason == (f"$TRANSFORMERS is transformers {old}; the hf_transformers adapter needs "
                                      f"transformers {hf_transformers.MINIMUM} or newer")
    assert doctor_report(adapters.get("hf_transformers"))["error"] == outcome.verdict.reason
    capsys.readouterr()
    assert cellbench(["install", "hf_transformers"]) == 1, "named by the user, it is not installed instead"
    assert capsys.readouterr().err == f"hf_transformers: {outcome.verdict.reason}\n"


def test_a_variable_naming_no_python_transformers_fails_saying_why(tmp_path, monkeypatch):
    recipe = adapters.get("hf_transformers").recipe_for(LINUX)
    monkeypatch.setenv("TRANSFORMERS", str(tmp_path / "nowhere"))
    with pytest.raises(InstallError, match="which is not an executable file"):
        recipe.external()
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x7fELF\x02\x01\x01")
    binary.chmod(0o755)
    monkeypatch.setenv("TRANSFORMERS", str(binary))
    with pytest.raises(InstallError, match=r"not a Python console script \(no #! line\)"):
        recipe.external()
    monkeypatch.setenv("TRANSFORMERS", str(own_transformers(tmp_path, {"torch": "2.11.0"})))
    with pytest.raises(InstallError, match=r"whose Python \(.*/bin/python\) has no transformers"):
        recipe.external()


def test_the_interpreter_is_read_from_either_form_pip_writes(tmp_path):
    short = tmp_path / "short"
    short.write_text("#!/opt/env/bin/python3.11\nimport sys\n")
    assert script_python(short) == ["/opt/env/bin/python3.11"]
    long_path = "/a path with spaces/" + "x" * 120 + "/bin/python"  # too long (or spaced) for a #! line
    shell = tmp_path / "shell"
    shell.write_text(f"#!/bin/sh\n'''exec' \"{long_path}\" \"$0\" \"$@\"\n' '''\nimport sys\n")
    assert script_python(shell) == [long_path]
    env = tmp_path / "env"
    env.write_text("#!/usr/bin/env python3\n")
    assert script_python(env) == ["/usr/bin/env", "python3"]


def test_the_pinned_install_reports_the_same_versions_as_a_users_own(monkeypatch):
    """The pinned venv's own `transformers`, named by TRANSFORMERS, is a real user's install."""
    if USERS_CACHE is None:
        monkeypatch.delenv("CELLBENCH_CACHE")
    else:
        monkeypatch.setenv("CELLBENCH_CACHE", USERS_CACHE)
    pinned = cached(adapters.get("hf_transformers").recipe_for(LINUX))
    if pinned is None:
        pytest.skip("transformers is not in the framework cache (cellbench install hf_transformers)")
    monkeypatch.setenv("TRANSFORMERS", pinned.executable("transformers"))
    own = adapters.get("hf_transformers").recipe_for(LINUX).external()
    assert own is not None and own.version == pinned.version == hf_transformers.TRANSFORMERS
    assert own.details["packages"] == pinned.details["packages"]


def installation(version: str) -> Installation:
    return Installation("hf_transformers", version, Path("/opt/tf/bin"), {"transformers": "/opt/tf/bin/transformers"},
                        "$TRANSFORMERS")


def identity(version: str, listed: tuple[str, ...] | None, responses: tuple[str, ...]) -> Identity:
    """The cell's model check as bench.run.cell builds it for this release of the server."""
    adapter = adapters.get("hf_transformers")
    model = adapter.model_for_server(MODEL)
    naming = adapter.naming_for(model, installation(version))
    return Identity(model.served_id, listed, responses, naming.other_ids, naming.lists_served)


def test_a_release_that_lists_its_cache_serves_the_model_it_names_path_at_main():
    old = "5.17.0"
    assert identity(old, CACHE_LISTING, ("/models/tiny@main",)).mismatch() is None
    assert identity(old, None, ("/models/tiny@main",)).mismatch() is None, "its /v1/models failed: no cache yet"
    assert identity(old, CACHE_LISTING, ("/models/other@main",)).mismatch() == \
        "responses name /models/other@main, not /models/tiny"
    assert identity(old, CACHE_LISTING, ("/models/tiny@dev",)).mismatch() == \
        "responses name /models/tiny@dev, not /models/tiny"


def test_a_release_that_lists_the_served_model_is_held_to_its_listing():
    new = hf_transformers.CACHE_LISTED_UNTIL
    assert identity(new, ("/models/tiny",), ("/models/tiny",)).mismatch() is None
    assert identity(new, CACHE_LISTING, ("/models/tiny",)).mismatch() == \
        f"/v1/models lists {', '.join(CACHE_LISTING)}, not /models/tiny"
    assert identity("unknown", CACHE_LISTING, ()).mismatch() is not None, "an unknown release is asked too"
