"""oMLX: a multi-model MLX server that serves every model folder it finds in `--model-dir`.

The command is `omlx serve --model-dir <dir> --port <port> --host <host>` with explicit cache
settings: a fresh `--paged-ssd-cache-dir`, `--paged-ssd-cache-max-size 100GB`,
`--hot-cache-max-size 8GB` and `OMLX_HOT_CACHE_ONLY=true`. Both cache sizes are explicit
because omlx persists CLI arguments to ~/.omlx/settings.json, so its documented defaults are not
what a later start gets; the SSD cache directory is emptied before each start, so no server starts
warm from an earlier one.

The model directory holds exactly one entry, a symlink to the MLX folder; omlx lists a model under
its folder name, so the link's name is the served id. The folder is a Hub-cache snapshot named by a
commit hash, so the link carries the profile's id instead. The id is sent explicitly with every
request: omlx also lists every model in the user's HF cache, so the first listed model may be a
stray one, and a listed model other than the loaded one answers HTTP 409.

The link is replaced atomically by renaming a fresh symlink over it; `bench.base.files.atomic_write`
replaces a file's contents, not a link, so this module keeps that one rename of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from bench.base.paths import cache_root
from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.scripted import ScriptedInstall, Step

REPO = "https://github.com/jundot/omlx.git"
PYTHON = "{prefix}/venv/bin/python"

RECIPE = ScriptedInstall(
    framework="omlx",
    version="git-main",
    steps=(
        Step(("git", "clone", REPO, "{prefix}/omlx")),
        Step(("uv", "venv", "{prefix}/venv", "--python", "3.12")),
        Step(("uv", "pip", "install", "--python", PYTHON, "-e", "{prefix}/omlx")),
    ),
    update_commands=(
        Step(("git", "pull"), cwd="omlx"),
        Step(("uv", "pip", "install", "--python", PYTHON, "-e", "{prefix}/omlx")),
    ),
    executables={"omlx": "venv/bin/omlx"},
    version_probe=("git", "-C", "{prefix}/omlx", "describe", "--tags", "--always"),
    env_var="OMLX",
    path_name="omlx",
)

SSD_CACHE_MAX = "100GB"
HOT_CACHE_MAX = "8GB"


def link_name(model: ModelRef) -> str:
    """The folder name omlx lists: the profile's id (a `/` would make it a nested folder)."""
    return (model.alias or model.served_id).replace("/", "--")


def model_dir(model: ModelRef) -> Path:
    """A directory whose only entry links to the model, one per (name, target): two profiles never
    share one, so nothing is reset under a running server."""
    assert model.path is not None  # an MLX folder
    name, target = link_name(model), str(model.path)
    key = hashlib.sha256(f"{name}\0{target}".encode()).hexdigest()[:12]
    directory = cache_root() / "omlx" / f"models-{key}"
    link = directory / name
    if not (link.is_symlink() and os.readlink(link) == target):
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{name}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target, target_is_directory=True)
        os.replace(tmp, link)
    return directory


def fresh_ssd_cache(port: int) -> Path:
    directory = cache_root() / "omlx" / f"ssd-cache-{port}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("omlx"), "serve",
        "--model-dir", str(model_dir(ctx.model)),
        "--port", str(ctx.port),
        "--host", ctx.host,
        "--paged-ssd-cache-dir", str(fresh_ssd_cache(ctx.port)),
        "--paged-ssd-cache-max-size", SSD_CACHE_MAX,
        "--hot-cache-max-size", HOT_CACHE_MAX,
    ]
    return ServeCommand(argv=argv, env={"OMLX_HOT_CACHE_ONLY": "true"})


ADAPTER = Adapter(
    name="omlx",
    platforms=frozenset({"darwin-arm64"}),
    model_format="mlx",
    default_port=8005,
    ready_path="/v1/models",
    recipes={"*": RECIPE},
    serve=serve,
    # Tokens arrive bundled, 2-14 per SSE delta; a listed model other than the loaded one answers 409.
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    served_id=link_name,
)
