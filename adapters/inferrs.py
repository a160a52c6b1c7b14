"""inferrs' `inferrs serve`, SiliconBench's tenth framework, run from the user's own build.

SiliconBench retired inferrs on 2026-07-03 (no upstream activity for 69 days); its results still
import (bench.imports), and this adapter lets their cells be re-run where a build exists. The
contract is SiliconBench's: port 8007, `inferrs serve $HF_MODEL --port 8007 --device metal --dtype
bf16 --max-seq-len 16384 --initial-blocks 512 --paged-attention=0.5`, no model argument sent by its
client (it took `/v1/models`' first id), ready when `/v1/models` answers 200 within 300 s. Here the
command binds 127.0.0.1 (inferrs' default is 0.0.0.0) and `--device` follows the platform: `metal`
on Apple silicon, `cuda` on a Linux CUDA host, `cpu` on other Linux hosts, the three backends
inferrs builds for (`cargo build --release`, with `--features metal` or `--features cuda`).

cellbench has no installer for it (nothing is released to install from): cells run the binary
`$INFERRS` names, else `inferrs` on PATH, and skip saying so without one. The model is the
profile's local Hugging Face folder, given as an absolute path; SiliconBench's inferrs results name
the model exactly as its argument was given (`Qwen/Qwen3-0.6B`), so the path is the id every
request sends and `/v1/models` must list (a build that lists another id ends `wrong-model`).
Not run on this project's machines: no inferrs build was at hand when this adapter was written.
"""

from __future__ import annotations

from pathlib import Path

from bench.setup.adapter import LINUX_PLATFORMS, Adapter, Capabilities, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.scripted import OwnBinary

PORT = 8007
MAX_SEQ_LEN = 16384
INITIAL_BLOCKS = 512
PAGED_ATTENTION = "0.5"  # the share of free memory its paged KV cache may take (SiliconBench's value)
DEVICES = {"darwin-arm64": "metal", "linux-x86_64+cuda": "cuda", "linux-aarch64+cuda": "cuda"}
PLATFORMS = ("darwin-arm64", *LINUX_PLATFORMS)

RECIPE = OwnBinary(
    framework="inferrs",
    env_var="INFERRS",
    path_name="inferrs",
    why_no_installer=("cellbench has no installer for inferrs (retired upstream; build it with "
                      "`cargo build --release`, `--features metal` or `--features cuda`)"),
)


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("inferrs"), "serve", served_id(ctx.model),
        "--host", ctx.host,
        "--port", str(ctx.port),
        "--device", DEVICES.get(ctx.platform, "cpu"),
        "--dtype", "bf16",
        "--max-seq-len", str(MAX_SEQ_LEN),
        "--initial-blocks", str(INITIAL_BLOCKS),
        f"--paged-attention={PAGED_ATTENTION}",
    ]
    # A local folder is all it needs: no Hub lookup may stall or fail a start.
    return ServeCommand(argv=argv, env={"HF_HUB_OFFLINE": "1"})


def served_id(model: ModelRef) -> str:
    assert model.path is not None  # hf models are local folders
    return str(Path(model.path).resolve())


ADAPTER = Adapter(
    name="inferrs",
    platforms=frozenset(PLATFORMS),
    model_format="hf",
    default_port=PORT,
    ready_path="/v1/models",
    recipes={"*": RECIPE},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=300.0,
    served_id=served_id,
    notes="retired by SiliconBench on 2026-07-03; its cells re-run only where an inferrs build is installed",
)
