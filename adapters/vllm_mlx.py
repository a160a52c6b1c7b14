"""vllm-mlx: a vLLM-style server on MLX, installed from git into its own venv.

The command: `vllm-mlx serve $MLX_MODEL --port 8008 --continuous-batching`, bound to
127.0.0.1. The server lists the model under the `serve` argument as given, so the served
id is the MLX folder's path. Earlier tool calls in the agent history reach the model as
`[Calling tool: ...]` text, so its answers are plain content, never parsed tool calls.
"""

from __future__ import annotations

from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.scripted_install import ScriptedInstall, Step, dist_version_probe

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


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("vllm-mlx"), "serve", str(ctx.model.path),
        "--port", str(ctx.port),
        "--host", ctx.host,
        "--continuous-batching",
    ]
    return ServeCommand(argv=argv)


def served_id(model: ModelRef) -> str:
    return str(model.path)


ADAPTER = Adapter(
    name="vllm_mlx",
    platforms=frozenset({"darwin-arm64"}),
    model_format="mlx",
    default_port=8008,
    ready_path="/v1/models",
    recipes={"*": RECIPE},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    served_id=served_id,
)
