"""NVIDIA AIPerf (`aiperf profile`) as a peer of `cellbench perf compare`.

AIPerf is installed on request into the framework cache (`cellbench install aiperf`: a venv with
aiperf 0.13.0, never installed from here) and run in a child pinned to the comparison's client
core, so all of its processes (system controller, dataset and timing managers, workers, record
processors, ...) share that one core as every other client's process does.

The workload is cellbench's: the chat endpoint, streaming, a `single_turn` input file of the
warm-up request (prompts[0]) and then `work.requests` lines, request i on line i + 1
(prompts[i % len(prompts)]): AIPerf's warm-up takes the first line, the profiling phase those
after it (checked: its raw export's payloads come in that order), read in order
(`--dataset-sampling-strategy sequential`), `max_tokens` and `work.extra` in every body
(`--extra-inputs`), `work.concurrency` in flight in a closed loop, after one warm-up request,
the tiny model's local tokenizer folder. AIPerf 0.13 cannot load a local tokenizer folder with
`HF_HUB_OFFLINE=1` set, so the child's environment is this one without it; the tokenizer is a
local folder and AIPerf's server-metrics and GPU-telemetry polling are off, so it fetches nothing.

Token counts are the server's (`--use-server-token-count`), as cellbench counts them: otherwise
AIPerf tokenizes the output text with the client tokenizer, which on the null server makes 21
tokens of a 10-chunk " #1 tok tok ..." answer and its ITL a different figure from cellbench's TPOT.

Connections: pooled (AIPerf's default) on the null server, so its CPU row compares with vLLM's
pooled client and `cellbench --keep-alive`; `--connection-reuse-strategy never` on any other
server (llama-server), where AIPerf's pooled connections fail with `ServerDisconnectedError` and
a connection each does not (docs/measurements.md). The null server is known by the
model id it serves (`bench.perf.null_server.server.MODEL`).

Read back from AIPerf's own exports in the artifact folder:
- `profile_export_aiperf.json` (the profiling phase, warm-up excluded): `benchmark_duration`
  -> duration_s; `output_token_throughput` -> output_throughput_tps; p50 of
  `time_to_first_token` -> ttft_p50_ms; p50 of `inter_token_latency` -> tpot_p50_ms (AIPerf's
  ITL is (request latency - TTFT) / (output tokens - 1) per request, cellbench's TPOT); p50 of
  `inter_chunk_latency` -> itl_p50_ms (every gap between content chunks, cellbench's ITL). These
  are over the successful requests, as cellbench's are (the failure-inflated percentiles AIPerf
  adds are its `adj_*` entries, not read); `request_count` is its count of successful requests,
  `error_request_count` of failed ones (`completed_request_count` is both).
- With `work.detail` (`--export-level records --export-outputs-json`): `profile_export.jsonl`, one
  record per request, a request failed when it has an `error`; a successful one's chunks are 1 +
  its `inter_chunk_latency` gaps, its TTFT `time_to_first_token`. Those records keep no output
  text, so each is matched by its `x_request_id` to its entry in `outputs.json`, whose
  `response_text` starts with the null server's stream id. That export writes each request's text
  once; the raw export (`--export-level raw`: every SSE packet with its headers) has the same text
  but writes far more while the timed requests run (docs/measurements.md).
- Without (`--export-level summary`, the CPU runs: no per-request files written): the counts of
  the aggregate, and `total_usage_completion_tokens`, the server's completion tokens of the
  successful requests, as the chunks (one token a chunk, as the null server sends them).

CPU: `run_child`'s wait4 figure holds all of AIPerf's processes. AIPerf's parent (it renames
itself the system controller) starts the others (dataset manager, timing manager, worker
manager, records manager, one worker, one record processor here: 7 processes pinned to the one
core) and waits for them before it exits, so their user+sys are in its rusage, as polling every
process of the tree with psutil every 20 ms during the run confirmed (each one's last reading,
which misses at most its last 20 ms; the figures: docs/measurements.md). Most of a run's fixed
cost is the dataset manager's; the N-vs-3N difference cancels it.

`benchmark_duration` is AIPerf's first request sent to last response of the profiling phase.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.perf.clients import HEAD, ClientRun, Workload, requests_of, run_child
from bench.perf.null_server.server import MODEL as NULL_MODEL
from bench.perf.peers import Peer
from bench.setup.installs.cache import Installation, cached
from bench.setup.installs.recipes import PipVenv

AIPERF = "aiperf"

RECIPE = PipVenv(framework=AIPERF, version="0.13.0", packages=("aiperf==0.13.0",), executables=("aiperf",),
                 report=("aiperf", "aiohttp", "uvloop", "orjson", "pyzmq", "transformers"))

AGGREGATE = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"
OUTPUTS = "outputs.json"


def connection_reuse(work: Workload) -> str:
    """AIPerf's --connection-reuse-strategy for `work`: pooled on the null server, never elsewhere."""
    return "pooled" if work.model == NULL_MODEL else "never"


def aiperf_argv(executable: str, work: Workload, dataset: Path, artifacts: Path) -> list[str]:
    """`aiperf profile` on `dataset` in order, closed loop at `work.concurrency`, one warm-up request."""
    body = {"max_tokens": work.max_tokens, **work.extra}
    return [
        executable, "profile", "--model", work.model, "--url", work.base_url, "--endpoint-type", "chat",
        "--streaming", *(["--tokenizer", work.tokenizer] if work.tokenizer else []),
        "--input-file", str(dataset), "--custom-dataset-type", "single_turn",
        "--dataset-sampling-strategy", "sequential", "--random-seed", "0",
        "--concurrency", str(work.concurrency), "--request-count", str(work.requests),
        "--warmup-request-count", "1", "--extra-inputs", json.dumps(body), "--use-server-token-count",
        "--connection-reuse-strategy", connection_reuse(work),
        *(["--export-level", "records", "--export-outputs-json"] if work.detail else ["--export-level", "summary"]),
        "--output-artifact-dir", str(artifacts),
        "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry", "--no-auto-plot",
    ]


def child_env() -> dict[str, str]:
    """This environment without HF_HUB_OFFLINE, with which AIPerf 0.13 cannot load a local tokenizer."""
    return {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}


def run_aiperf(install: Installation, work: Workload, folder: Path, cpu: int | None,
               timeout_s: float = 600.0) -> ClientRun:
    """AIPerf on `work` in a child, read back from its exports."""
    dataset, artifacts = folder / "aiperf-dataset.jsonl", folder / "aiperf-artifacts"
    # AIPerf's warm-up request takes the file's first line and the profiling phase the lines after
    # it: the first line is the warm-up (prompts[0], as cellbench's), then request i on line i + 1.
    texts = [work.prompts[0], *requests_of(work)]
    dataset.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    for old in (AGGREGATE, RECORDS, OUTPUTS):
        (artifacts / old).unlink(missing_ok=True)
    log = folder / "aiperf.log"
    argv = aiperf_argv(install.executable(AIPERF), work, dataset, artifacts)
    rc, cpu_s, wall_s = run_child(argv, log, cpu, timeout_s, env=child_env())
    if rc != 0 or not (artifacts / AGGREGATE).is_file():
        raise RuntimeError(f"AIPerf exited {rc}; log: {log}")
    return read_aiperf_exports(artifacts, cpu_s, wall_s)


def read_aiperf_exports(artifacts: Path, cpu_s: float, wall_s: float) -> ClientRun:
    """An artifact folder as a ClientRun: per request from the records when they were exported,
    else from the aggregate."""
    aggregate = json.loads((artifacts / AGGREGATE).read_text())
    duration = float(_stat(aggregate, "benchmark_duration", "avg") or 0.0)
    if not (artifacts / RECORDS).is_file():
        ok = int(_stat(aggregate, "request_count", "avg") or 0)  # the successful ones
        failed = int(_stat(aggregate, "error_request_count", "avg") or 0)
        return ClientRun(client=AIPERF, ok=ok, failed=failed,
                         chunks=int(_stat(aggregate, "total_usage_completion_tokens", "avg") or 0),
                         duration_s=duration, cpu_s=cpu_s, wall_s=wall_s, timings=[],
                         reported=_reported(aggregate), errors=_summary_errors(aggregate))
    records = [r for r in _lines(artifacts / RECORDS) if r["metadata"].get("benchmark_phase") == "profiling"]
    texts = _output_heads(artifacts / OUTPUTS) if (artifacts / OUTPUTS).is_file() else {}
    good = [r for r in records if not r.get("error")]
    timings = []
    for r in good:
        gaps = _values(r, "inter_chunk_latency")
        ttft = r["metrics"]["time_to_first_token"]["value"] / 1e3
        timings.append((texts.get(r["metadata"]["x_request_id"], ""), float(ttft), [g / 1e3 for g in gaps]))
    return ClientRun(
        client=AIPERF, ok=len(good), failed=len(records) - len(good),
        chunks=sum(1 + len(_values(r, "inter_chunk_latency")) for r in good),
        duration_s=duration, cpu_s=cpu_s, wall_s=wall_s, timings=timings, reported=_reported(aggregate),
        errors=[_error_text(r["error"]) for r in records if r.get("error")][:3],
    )


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _values(record: dict[str, Any], tag: str) -> list[float]:
    """A record's list metric in ms (an absent one: a stream of one chunk has no gaps)."""
    found = record["metrics"].get(tag)
    if found is None:
        return []
    assert found["unit"] == "ms", found  # AIPerf exports latencies in its display unit
    return [float(x) for x in found["value"]]


def _output_heads(outputs: Path) -> dict[str, str]:
    """x_request_id -> the start of its output text, from outputs.json (profiling requests only)."""
    data = json.loads(outputs.read_text())
    return {str(e["x_request_id"]): str(e.get("response_text") or "")[:HEAD] for e in data["data"]}


def _stat(aggregate: dict[str, Any], tag: str, stat: str) -> float | None:
    value = (aggregate.get(tag) or {}).get(stat)
    return None if value is None else float(value)


def _reported(aggregate: dict[str, Any]) -> dict[str, float | None]:
    """AIPerf's own figures under cellbench's keys (see the module docstring for the mapping)."""
    return {"output_throughput_tps": _stat(aggregate, "output_token_throughput", "avg"),
            "ttft_p50_ms": _stat(aggregate, "time_to_first_token", "p50"),
            "tpot_p50_ms": _stat(aggregate, "inter_token_latency", "p50"),
            "itl_p50_ms": _stat(aggregate, "inter_chunk_latency", "p50")}


def _error_text(error: dict[str, Any]) -> str:
    return ": ".join(str(x) for x in (error.get("type"), error.get("message")) if x)


def _summary_errors(aggregate: dict[str, Any]) -> list[str]:
    return [_error_text(e.get("error_details") or {}) for e in aggregate.get("error_summary") or []][:3]


PEER = Peer(AIPERF, "cellbench install aiperf", find=lambda: cached(RECIPE), run=run_aiperf, recipe=RECIPE)
