"""vllm-metal: vLLM on Apple silicon through MLX, installed by the project's own script.

The command: `VLLM_METAL_USE_PAGED_ATTENTION=1 VLLM_METAL_MEMORY_FRACTION=auto vllm
serve $HF_MODEL --port 8004 --host 0.0.0.0 --enable-prefix-caching --max-model-len 4096` (16384
on the agent split), bound to 127.0.0.1. The memory fraction stays `auto`: pinning 0.5 has cost
12-52% of throughput (docs/history.md). vLLM lists the model under the `serve`
argument as given, so the served id is the HF folder's path. The install script always creates
`~/.venv-vllm-metal`; an update moves it aside, reinstalls, and puts
it back when the reinstall fails.
"""

from __future__ import annotations

from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.scripted import ScriptedInstall, Step, dist_version_probe

VENV = "~/.venv-vllm-metal"
INSTALL = "curl -fsSL https://raw.githubusercontent.com/vllm-project/vllm-metal/main/install.sh | bash"
UPDATE = (
    f"mv {VENV} {VENV}.bak && {{ {INSTALL} && rm -rf {VENV}.bak; }}"
    f" || {{ rm -rf {VENV}; mv {VENV}.bak {VENV}; exit 1; }}"
)

RECIPE = ScriptedInstall(
    framework="vllm_metal",
    version="release",
    steps=(Step(INSTALL),),
    update_commands=(Step(UPDATE),),
    executables={"vllm": f"{VENV}/bin/vllm"},
    version_probe=dist_version_probe("{dir}/python", "vllm-metal"),
    external_probe=dist_version_probe("{dir}/python", "vllm-metal"),
    search_paths=(f"{VENV}/bin/vllm",),
)

MAX_MODEL_LEN = {"chat": 4096, "agent": 16384}


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("vllm"), "serve", str(ctx.model.path),
        "--port", str(ctx.port),
        "--host", ctx.host,
        "--enable-prefix-caching",
        "--max-model-len", str(MAX_MODEL_LEN.get(ctx.split, MAX_MODEL_LEN["chat"])),
    ]
    env = {"VLLM_METAL_USE_PAGED_ATTENTION": "1", "VLLM_METAL_MEMORY_FRACTION": "auto"}
    return ServeCommand(argv=argv, env=env)


def served_id(model: ModelRef) -> str:
    return str(model.path)


ADAPTER = Adapter(
    name="vllm_metal",
    platforms=frozenset({"darwin-arm64"}),
    model_format="hf",
    default_port=8004,
    ready_path="/v1/models",
    recipes={"*": RECIPE},
    serve=serve,
    capabilities=Capabilities(ignore_eos=True),
    startup_timeout_s=300.0,
    served_id=served_id,
)
