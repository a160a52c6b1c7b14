"""mlx-lm's `mlx_lm.server`: MLX on Metal on Apple silicon, MLX's CPU backend (`mlx[cpu]`) on Linux.

The command: `python -m mlx_lm.server --model $MLX_MODEL --port 8002 --host 127.0.0.1`.
The server names the model itself: `/v1/models` lists the resolved absolute path of `--model`
(there is no alias option), and a request naming any other id makes it look the id up on the Hub.
`/v1/models` also scans the HF cache and crashes its handler when that directory does not exist,
so the server gets an (empty) one inside the install.
"""

from __future__ import annotations

from pathlib import Path

from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.recipes import PipVenv

MLX = "0.32.4"
MLX_LM = "0.32.2"
HUB_CACHE = "hf-hub"  # inside the install prefix


def _recipe(mlx_requirement: str, backend: str) -> PipVenv:
    return PipVenv(
        framework="mlx_lm",
        version=MLX_LM,
        packages=(mlx_requirement, f"mlx-lm=={MLX_LM}"),
        executables=("python",),
        report=("mlx-lm", "mlx", backend, "transformers"),
        dirs=(HUB_CACHE,),
    )


RECIPES = {
    "darwin-arm64": _recipe(f"mlx=={MLX}", "mlx-metal"),  # the macOS wheel pulls the Metal backend
    "*": _recipe(f"mlx[cpu]=={MLX}", "mlx-cpu"),  # Linux: mlx alone has no backend
}


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("python"), "-m", "mlx_lm.server",
        "--model", served_id(ctx.model),  # the very string requests name: any other makes it load the model again
        "--host", ctx.host,
        "--port", str(ctx.port),
    ]
    env = {"HF_HUB_CACHE": str(ctx.install.prefix / HUB_CACHE), "HF_HUB_OFFLINE": "1"}
    return ServeCommand(argv=argv, env=env)


def served_id(model: ModelRef) -> str:
    assert model.path is not None  # mlx models are local folders
    return str(Path(model.path).resolve())


ADAPTER = Adapter(
    name="mlx_lm",
    platforms=frozenset({"linux-x86_64", "darwin-arm64"}),
    model_format="mlx",
    default_port=8002,
    ready_path="/v1/models",
    recipes=RECIPES,
    serve=serve,
    # `ignore_eos` is accepted but not honoured, so it is not sent.
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=120.0,
    served_id=served_id,
)
