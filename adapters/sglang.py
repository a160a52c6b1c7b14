"""SGLang's `sglang.launch_server`: the MLX backend on Apple silicon, CUDA on Linux.

On Apple silicon: `SGLANG_USE_MLX=1 python -m sglang.launch_server --model-path
$HF_MODEL --host 0.0.0.0 --port 8010 --trust-remote-code --disable-radix-cache --disable-cuda-graph
--tp-size 1`; on CUDA the command keeps the radix cache and CUDA graphs: `python -m
sglang.launch_server --model-path $HF_MODEL --host 0.0.0.0 --port 8010 --trust-remote-code`. Both are
bound to 127.0.0.1. SGLang lists the model under `--model-path` as given, so the served id is
the HF folder's path.

The Apple install: a clone, `python/pyproject_other.toml` swapped in for the
CUDA `pyproject.toml`, `python[all_mps]` into a Python 3.11 venv (other versions are known broken),
newer mlx and mlx-lm, and then sglang's own transformers pin again, because upgrading mlx-lm drags
transformers past it and server startup then aborts registering a config transformers now ships.
On CUDA the install takes the torch sglang pins.
"""

from __future__ import annotations

from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.scripted import ScriptedInstall, Step
from bench.setup.server_metrics import ServerMetrics

REPO = "https://github.com/sgl-project/sglang.git"
PYTHON = "{prefix}/venv/bin/python"
SRC = "{prefix}/sglang/python"
SWAP_MPS_PYPROJECT = f"rm -f {SRC}/pyproject.toml && mv {SRC}/pyproject_other.toml {SRC}/pyproject.toml"
REPIN_TRANSFORMERS = (
    f"""pin=$(grep -oE '"transformers==[^"]+"' {SRC}/pyproject.toml | head -1 | tr -d '"' || true); """
    f'if [ -n "$pin" ]; then uv pip install --python {PYTHON} "$pin"; fi'
)
VERSION_PROBE = ("git", "-C", "{prefix}/sglang", "describe", "--tags", "--always")

MPS = ScriptedInstall(
    framework="sglang",
    version="git-main-mps",
    steps=(
        Step(("git", "clone", REPO, "{prefix}/sglang")),
        Step(SWAP_MPS_PYPROJECT),
        Step(("uv", "venv", "{prefix}/venv", "--python", "3.11")),
        Step(("uv", "pip", "install", "--python", PYTHON, "-e", f"{SRC}[all_mps]")),
        Step(("uv", "pip", "install", "--python", PYTHON, "--upgrade", "mlx", "mlx-lm")),
        Step(REPIN_TRANSFORMERS),
    ),
    update_commands=(
        # The swap leaves a tree `git pull` refuses; restore both files, pull, swap again.
        Step(("git", "checkout", "--", "python/pyproject.toml", "python/pyproject_other.toml"), cwd="sglang"),
        Step(("git", "pull", "--ff-only"), cwd="sglang"),
        Step(SWAP_MPS_PYPROJECT),
        Step(("uv", "pip", "install", "--python", PYTHON, "--upgrade", "-e", f"{SRC}[all_mps]")),
        Step(("uv", "pip", "install", "--python", PYTHON, "--upgrade", "mlx", "mlx-lm")),
        Step(REPIN_TRANSFORMERS),
    ),
    executables={"python": "venv/bin/python"},
    version_probe=VERSION_PROBE,
)
CUDA = ScriptedInstall(
    framework="sglang",
    version="git-main-cuda",
    steps=(
        Step(("git", "clone", REPO, "{prefix}/sglang")),
        Step(("uv", "venv", "{prefix}/venv", "--python", "3.12")),
        Step(("uv", "pip", "install", "--python", PYTHON, "-e", f"{SRC}[all]")),
    ),
    update_commands=(
        Step(("git", "pull"), cwd="sglang"),
        Step(("uv", "pip", "install", "--python", PYTHON, "--upgrade", "-e", f"{SRC}[all]")),
    ),
    executables={"python": "venv/bin/python"},
    version_probe=VERSION_PROBE,
)

CUDA_PLATFORMS = ("linux-x86_64+cuda", "linux-aarch64+cuda")


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("python"), "-m", "sglang.launch_server",
        "--model-path", str(ctx.model.path),
        "--host", ctx.host,
        "--port", str(ctx.port),
        "--trust-remote-code",
    ]
    if ctx.platform in CUDA_PLATFORMS:
        return ServeCommand(argv=argv)
    # MLX has neither a radix cache nor CUDA graphs.
    argv += ["--disable-radix-cache", "--disable-cuda-graph", "--tp-size", "1"]
    return ServeCommand(argv=argv, env={"SGLANG_USE_MLX": "1"})


def served_id(model: ModelRef) -> str:
    return str(model.path)


ADAPTER = Adapter(
    name="sglang",
    platforms=frozenset({"darwin-arm64", *CUDA_PLATFORMS}),
    model_format="hf",
    default_port=8010,
    ready_path="/v1/models",
    recipes={"darwin-arm64": MPS, **{tag: CUDA for tag in CUDA_PLATFORMS}},
    serve=serve,
    capabilities=Capabilities(ignore_eos=True),
    startup_timeout_s=300.0,
    served_id=served_id,
    server_metrics=ServerMetrics(  # off unless asked for; names as SGLang's production-metrics docs give them
        flags=("--enable-metrics",),
        counters={"generated_tokens": "sglang:generation_tokens_total", "prompt_tokens": "sglang:prompt_tokens_total"},
        gauges={"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs",
                "kv_cache_usage": "sglang:token_usage", "prefix_cache_hit_rate": "sglang:cache_hit_rate"},
        histograms={"ttft": "sglang:time_to_first_token_seconds"}),
)
