"""Ollama, installed with Homebrew on macOS or the user's own binary on Linux, serving a registry tag it has pulled.

The command: `OLLAMA_HOST=127.0.0.1:8006 OLLAMA_NUM_PARALLEL=16 OLLAMA_KEEP_ALIVE=10m
OLLAMA_CONTEXT_LENGTH=16384 ollama serve`, with the 16384 context on both splits. Ollama serves
whatever its model store holds: the model is the profile's tag (no local file), sent in every
request, and a tag that was never pulled (`ollama pull <tag>`) answers 404 on every request, which
the cell reports as wrong-model because `/v1/models` does not list it.
A running Ollama is left alone (cellbench never touches processes it did not start); the
Ollama app's own server listens on another port (11434).

On Linux (CPU, and CUDA where its build finds a GPU) cellbench has no installer: cells run the
binary `$OLLAMA` (or the older `$OLLAMA_BIN`) names, else `ollama` on PATH, and skip saying so
without one. The same variables name a user's own build on macOS ahead of brew's.
"""

from __future__ import annotations

from bench.setup.adapter import LINUX_PLATFORMS, Adapter, Capabilities, ServeCommand, ServeContext
from bench.setup.installs.scripted import OwnBinary, ScriptedInstall, Step

RECIPE = ScriptedInstall(
    framework="ollama",
    version="brew",
    steps=(Step(("brew", "install", "ollama")),),
    update_commands=(Step(("brew", "upgrade", "ollama")),),
    executables={"ollama": "ollama"},  # on PATH once brew has installed it
    version_probe=("{ollama}", "--version"),  # "ollama version is 0.12.3" (a warning first when no server runs)
    env_var="OLLAMA",
    env_aliases=("OLLAMA_BIN",),
    path_name="ollama",
)
OWN = OwnBinary.beside(RECIPE, "cellbench has no installer for ollama on Linux")

NUM_PARALLEL = 16
KEEP_ALIVE = "10m"
CONTEXT_LENGTH = {"chat": 16384, "agent": 16384}


def serve(ctx: ServeContext) -> ServeCommand:
    env = {
        "OLLAMA_HOST": f"{ctx.host}:{ctx.port}",
        "OLLAMA_NUM_PARALLEL": str(NUM_PARALLEL),
        "OLLAMA_KEEP_ALIVE": KEEP_ALIVE,
        "OLLAMA_CONTEXT_LENGTH": str(CONTEXT_LENGTH.get(ctx.split, CONTEXT_LENGTH["chat"])),
    }
    return ServeCommand(argv=[ctx.install.executable("ollama"), "serve"], env=env)


ADAPTER = Adapter(
    name="ollama",
    platforms=frozenset({"darwin-arm64", *LINUX_PLATFORMS}),
    model_format="ollama",
    default_port=8006,
    ready_path="/v1/models",
    recipes={"*": OWN, "darwin-arm64": RECIPE},
    serve=serve,
    # The OpenAI layer drops fields it does not know, so `ignore_eos` would be silently ignored.
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    notes="the profile's tag must be pulled first: ollama pull <tag>",
)
