"""vllm-mlx: a vLLM-style server on MLX, from git on Apple silicon, from the package index on Linux CPU.

The command: `vllm-mlx serve $MLX_MODEL --port 8008 --continuous-batching`, bound to
127.0.0.1. The server lists the model under the `serve` argument as given, so the served
id is the MLX folder's path. Earlier tool calls in the agent history reach the model as
`[Calling tool: ...]` text, so its answers are plain content, never parsed tool calls.

vllm-mlx is pure Python on MLX, and MLX has a CPU backend on Linux (`mlx[cpu]`, as mlx-lm uses):
on 2026-12-02 vllm-mlx 0.6.0 with mlx[cpu] 0.32.4 served the built-in tiny model's HF folder on a
Linux x86_64 CPU with correct streams (role chunk, content deltas, finish_reason `length`, a
usage chunk), so Linux runs the released package, pinned; the chat cell (`--requests 8
--concurrency 1,8`) then ended `ok`, its streams now and then carrying two tokens in one chunk
(annotated `token-accounting`). Its requirements pull torchvision and so torch, which text
serving never loads: unpinned, pip took torch with CUDA libraries (a 6.5 GB venv, 253 s to install
on 2 cores); pinned to the CPU build the transformers and vLLM installs use, 2.1 GB in 79 s. The
torchvision that comes with it does not match that torch ("operator torchvision::nms does not
exist") and breaks transformers' import of the model's config, so it is removed, as for vLLM.

The server keeps its prefix cache on disk under `~/.cache/vllm-mlx/` and loads it at the next
start of the same model: each server gets a fresh, empty HOME (under cellbench's cache, per port),
so a level never starts on the previous level's cached prompts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.base.paths import cache_root
from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.recipes import PipVenv
from bench.setup.installs.scripted import ScriptedInstall, Step, dist_version_probe

SOURCE = "git+https://github.com/waybarrios/vllm-mlx.git"
PYTHON = "{prefix}/venv/bin/python"

RECIPE = ScriptedInstall(
    framework="vllm_mlx",
    version="git-main",
    steps=(
        Step(("uv", "venv", "{prefix}/venv", "--python", "3.12")),
        Step(("uv", "pip", "install", "--python", PYTHON, SOURCE)),
    ),
    update_commands=(Step(("uv", "pip", "install", "--python", PYTHON, "--upgrade", "--force-reinstall", SOURCE)),),
    executables={"vllm-mlx": "venv/bin/vllm-mlx"},
    version_probe=dist_version_probe("{dir}/python", "vllm-mlx"),
    external_probe=dist_version_probe("{dir}/python", "vllm-mlx"),
    path_name="vllm-mlx",
)


VLLM_MLX = "0.6.0"
MLX = "0.32.4"  # mlx-lm's pin too: one MLX for both MLX frameworks on Linux
LINUX = PipVenv(
    framework="vllm_mlx",
    version=VLLM_MLX,
    packages=(f"vllm-mlx=={VLLM_MLX}", f"mlx[cpu]=={MLX}", "torch==2.13.0"),  # else a CUDA torch: see above
    executables=("vllm-mlx",),
    report=("vllm-mlx", "mlx", "mlx-cpu", "mlx-lm", "transformers", "torch"),
    uninstall=("torchvision",),
)


def fresh_home(port: int) -> Path:
    home = cache_root() / "vllm_mlx" / f"home-{port}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("vllm-mlx"), "serve", str(ctx.model.path),
        "--port", str(ctx.port),
        "--host", ctx.host,
        "--continuous-batching",
    ]
    return ServeCommand(argv=argv, env={"HOME": str(fresh_home(ctx.port)), "HF_HUB_OFFLINE": "1"})


def served_id(model: ModelRef) -> str:
    return str(model.path)


ADAPTER = Adapter(
    name="vllm_mlx",
    platforms=frozenset({"darwin-arm64", "linux-x86_64"}),
    model_format="mlx",
    default_port=8008,
    ready_path="/v1/models",
    recipes={"*": RECIPE, "linux-x86_64": LINUX},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    served_id=served_id,
)
