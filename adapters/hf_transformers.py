"""Hugging Face transformers' own OpenAI server, `transformers serve`, with continuous batching.

The command: `transformers serve --continuous-batching --device mps --dtype bfloat16
--attn-implementation sdpa --port 8009 $HF_MODEL` with `PYTORCH_ENABLE_MPS_FALLBACK=1` on Apple
silicon, the same flags on CUDA, and `--device cpu` elsewhere. The pinned release lists its positional
model argument verbatim as the model id and answers 400 to any other id, so the adapter passes the
absolute path and expects exactly that. It rejects unknown request fields (422 on `ignore_eos`), ends
streams without `data: [DONE]`, and puts usage on the chunk that carries `finish_reason`.

`TRANSFORMERS=/path/to/transformers` runs the user's own `transformers` instead of the pinned venv
(the versions recorded are those its own Python reports); one older than MINIMUM, the first
release whose `transformers serve` takes this command, is refused and the cell skipped. Releases
before CACHE_LISTED_UNTIL list the Hugging Face download cache on /v1/models instead of the
served model, and name the served model `<path>@main` in their responses (`naming`): 5.17.0 on
the tiny model answered 500 on /v1/models where ~/.cache/huggingface/hub did not exist
(CacheNotFound), listed only `Qwen/Qwen3-0.6B` where that cache held it, and named the model
`<path>@main` in every chunk; it answered 400 to another id, as the pinned release does. So the
model check accepts that id and does not judge their listing, and readiness is `/health`, which
every release from MINIMUM on answers once the model is loaded (it is loaded before the server listens).

With continuous batching the server builds its batching manager on its first request, from that
request's sampling settings, and keeps them (5.24.0: `CBGenerateManager.init_cb`, "Remove when CB
supports per-request generation config"): after a level sampled at the profile's temperature a
greedy request is sampled too (the fidelity run found its two passes 0/16 alike on the tiny model).
So its fidelity run gets a server of its own (`sampling_per_request=False`).
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from bench.setup.adapter import Adapter, Capabilities, ModelRef, ServeCommand, ServeContext, ServerNaming
from bench.setup.installs.cache import Installation
from bench.setup.installs.recipes import PipVenv

TRANSFORMERS = "5.24.0"
TORCH = "2.13.0"
MINIMUM = "5.5.0"  # the first release whose `serve` takes the model as its argument (5.0-5.4: --force-model)
CACHE_LISTED_UNTIL = "5.24.0"  # 5.5-5.23 list the download cache on /v1/models and say `<path>@main`

# One recipe everywhere: PyPI's torch wheel is the Metal-enabled build on macOS and the CUDA build
# on Linux (which runs on CPU too); a machine whose pip configuration offers a `+cpu` build of the
# same version gets that. torchvision is left out: text generation does not need it, and a
# torchvision built for another torch breaks `import transformers`.
RECIPE = PipVenv(
    framework="hf_transformers",
    version=TRANSFORMERS,
    packages=(f"transformers[serving]=={TRANSFORMERS}", f"torch=={TORCH}"),
    executables=("transformers",),
    report=("transformers", "torch", "tokenizers"),
    env_var="TRANSFORMERS",
    minimum=MINIMUM,
)

ACCELERATED = {
    "darwin-arm64": ("mps", {"PYTORCH_ENABLE_MPS_FALLBACK": "1"}),  # ops MPS lacks run on the CPU
    "linux-x86_64+cuda": ("cuda", {}),
}


def serve(ctx: ServeContext) -> ServeCommand:
    argv = [
        ctx.install.executable("transformers"), "serve", "--continuous-batching",
        "--host", ctx.host,
        "--port", str(ctx.port),
    ]
    env = {"HF_HUB_OFFLINE": "1"}
    if ctx.platform in ACCELERATED:
        device, device_env = ACCELERATED[ctx.platform]
        argv += ["--device", device, "--dtype", "bfloat16", "--attn-implementation", "sdpa"]
        env.update(device_env)
    else:
        argv += ["--device", "cpu"]  # the checkpoint's own dtype: CPUs without bf16 units are slow at it
    argv.append(served_id(ctx.model))
    return ServeCommand(argv=argv, env=env)


def served_id(model: ModelRef) -> str:
    assert model.path is not None  # hf models are local folders
    return str(Path(model.path).resolve())


def naming(model: ModelRef, install: Installation) -> ServerNaming:
    """`<path>@main` is the served path at revision `main` whatever the release (a local folder has no
    other revision); only releases before CACHE_LISTED_UNTIL list something else on /v1/models."""
    try:
        lists_cache = Version(install.version) < Version(CACHE_LISTED_UNTIL)
    except InvalidVersion:  # "unknown" (an eval row's own environment): the listing is asked, as for a new release
        lists_cache = False
    return ServerNaming(other_ids=(f"{model.served_id}@main",), lists_served=not lists_cache)


ADAPTER = Adapter(
    name="hf_transformers",
    platforms=frozenset({"linux-x86_64", "linux-x86_64+cuda", "darwin-arm64"}),
    model_format="hf",
    default_port=8009,
    ready_path="/health",
    recipes={"*": RECIPE},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False, sampling_per_request=False),  # 422 on `ignore_eos`; see above
    startup_timeout_s=180.0,
    served_id=served_id,
    naming=naming,
)
