"""mistral.rs' `mistralrs serve`, built from git with Metal on Apple silicon, or the user's own on Linux.

The command: `mistralrs serve -p 8003 -m DIR --format gguf -f $GGUF_MODEL`, bound to 127.0.0.1
(its default is 0.0.0.0). `-m` must be a local directory: given a Hub repo id, mistral.rs lists
the repo on every start and a TLS failure there took the server down before it bound its port.
A cell hands an adapter one model format, so `-m` is the GGUF's own directory and the tokenizer
and chat template come from the GGUF's metadata. The server lists its single model as `default`, which is
the id every request sends.

On Linux (a CPU or CUDA build) cellbench has no installer: cells run the binary
`$MISTRALRS_SERVER` (or the older `$MISTRALRS`) names, else `mistralrs` on PATH. The package
index's `mistralrs` wheels are Python bindings (a `mistralrs` module, no server executable), so
they give no OpenAI server to run.
"""

from __future__ import annotations

from pathlib import Path

from bench.setup.adapter import LINUX_PLATFORMS, Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.scripted import OwnBinary, ScriptedInstall, Step

REPO = "https://github.com/EricLBuehler/mistral.rs.git"
# Unattended shells do not read the user's profile, so cargo may be missing from PATH.
CARGO_BUILD = (
    '[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"; '
    'MISTRALRS_METAL_PRECOMPILE=0 cargo build --release --features "metal accelerate"'
)

RECIPE = ScriptedInstall(
    framework="mistralrs",
    version="git-main",
    steps=(
        Step(("git", "clone", REPO, "{prefix}/mistral.rs")),
        Step(CARGO_BUILD, cwd="mistral.rs"),
    ),
    update_commands=(
        Step(("git", "pull"), cwd="mistral.rs"),
        Step(CARGO_BUILD, cwd="mistral.rs"),
    ),
    executables={"mistralrs": "mistral.rs/target/release/mistralrs"},
    version_probe=("git", "-C", "{prefix}/mistral.rs", "describe", "--tags", "--always"),
    env_var="MISTRALRS_SERVER",
    env_aliases=("MISTRALRS",),
    path_name="mistralrs",
)
OWN = OwnBinary.beside(RECIPE, "cellbench has no installer for mistral.rs on Linux")


def serve(ctx: ServeContext) -> ServeCommand:
    assert ctx.model.path is not None  # a GGUF file
    gguf = Path(ctx.model.path)
    argv = [
        ctx.install.executable("mistralrs"), "serve",
        "-p", str(ctx.port),
        "--host", ctx.host,
        "-m", str(gguf.parent),
        "--format", "gguf",
        "-f", gguf.name,
    ]
    return ServeCommand(argv=argv)


def served_id(model: ModelRef) -> str:
    return "default"


ADAPTER = Adapter(
    name="mistralrs",
    platforms=frozenset({"darwin-arm64", *LINUX_PLATFORMS}),
    model_format="gguf",
    default_port=8003,
    ready_path="/v1/models",
    recipes={"*": OWN, "darwin-arm64": RECIPE},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    served_id=served_id,
)
