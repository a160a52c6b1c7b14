"""guidellm 0.8.1's client, `guidellm run`, as a peer of `cellbench perf compare`.

It is the pinned guidellm from the framework cache (`cellbench install guidellm`; never installed
from here), given the whole benchmark as one scenario file (`guidellm run -c`, the same schema its
command-line options fill): the openai_http backend on the chat completions endpoint, streaming,
`validate_backend` off (it would first GET /health, which the null server does not have), the
"concurrent" profile at `work.concurrency` streams (a closed loop), a `max_requests` constraint of
`work.requests`, and a JSON-lines file of exactly the requests given, in order (its data loader
does not shuffle by default; `shuffle: false` says so). `max_tokens` goes in twice: guidellm writes
it as `max_completion_tokens`, and the same number as `max_tokens` in the body's extras (beside
`work.extra`) keeps a server that reads only the older name to the same length. Its tokenizer is
`work.tokenizer`, a local folder, with the hub kept offline. No warm-up: guidellm's `warmup` is a
leading phase of the measured run whose requests are dropped from its figures, not one request
before it, and the comparison cancels start-up another way (N against 3N) and keeps the opening
round's TTFTs apart. `metrics.sample_size: null` keeps every request's text (its default; 0 or N
would strip or sample it); so `work.detail` changes nothing here: guidellm writes every request's
record whatever it is asked, and that writing is its own work, in its CPU figure. It runs as ten
worker processes (`max_worker_processes`, spawned) beside its main one and a few helpers, all
pinned with it to the one core.

Read back from its JSON output (`benchmarks[0]`): a request is ok when it is in
`requests.successful`, failed when `errored` or `incomplete`; its chunks are
`info.timings.token_iterations` (SSE lines that carried content); `duration_s` is the benchmark's
`duration`. Per request, in the order sent (`request_start_time`): `output`'s head and TTFT =
`time_to_first_token_ms` (first content line - request headers sent). guidellm keeps no time per
chunk, only the first and last content line's (`first_token_iteration`, `last_token_iteration`):
its own rate figures space the chunks between them evenly. So a guidellm timing has no gaps, its
ITL-error cell is "-", and `itl_p50_ms` is None: cellbench's ITL is every inter-chunk gap.

`reported`, in cellbench's meanings:
- `output_throughput_tps`: `metrics.output_tokens_per_second.successful.mean`, the mean of a rate
  over time weighted by its interval: the successful requests' output tokens over the benchmark's
  window, as cellbench's output tokens over its wall time;
- `ttft_p50_ms`: the median over the successful requests of `time_to_first_token_ms`;
- `tpot_p50_ms`: the median of each request's `inter_token_latency_ms` = (last content line -
  first) / (output tokens - 1), the nearest to cellbench's (E2EL - TTFT) / (n - 1), which counts to
  the stream's end instead of its last token. guidellm's own summary of it weights each request by
  its n - 1 tokens (equal to the plain median when every request has the same n, as here), and
  guidellm's "TPOT" (`time_per_output_token_ms`) divides from the request's start, first token
  included: it is not cellbench's TPOT.

CPU: `run_child`'s wait4 figure includes the workers, because guidellm's main process joins
(reaps) them before it exits. Checked on the 2-core development host with the child and its whole
tree in a cgroup v1 cpuacct group, 32 streams of 100 chunks from the unpaced null server:
200 requests, wait4 17.558 s against cpuacct 17.597 s; 600 requests, 20.398 s against 20.435 s
(0.2% apart, nothing left running in the group after it exited).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench.core.metrics import percentile
from bench.perf.clients import HEAD, ClientRun, Workload, requests_of, run_child
from bench.perf.peers import Peer
from bench.setup.installs.cache import Installation, cached
from bench.setup.installs.recipes import PipVenv

GUIDELLM = "guidellm"

RECIPE = PipVenv(framework=GUIDELLM, version="0.8.1", packages=("guidellm==0.8.1", "torch==2.13.0"),
                 executables=("guidellm",), report=("guidellm", "torch", "httpx", "transformers"))


def scenario(work: Workload, data: Path, results: Path) -> dict[str, Any]:
    """The `guidellm run -c` scenario of `work`: `data` (one request a line, in order) sent as
    described above, every request's record written to `results`."""
    if work.tokenizer is None:  # guidellm would look the model's name up on the hub
        raise ValueError("guidellm needs work.tokenizer, a local tokenizer folder")
    backend = {"kind": "openai_http", "target": work.base_url, "model": work.model,
               "request_format": "/v1/chat/completions", "validate_backend": False, "stream": True,
               "max_tokens": work.max_tokens, "extras": {"body": {**work.extra, "max_tokens": work.max_tokens}}}
    return {"spec": {
        "backend": backend,
        "profile": {"kind": "concurrent", "streams": work.concurrency},
        "constraints": [{"kind": "max_requests", "count": work.requests}],
        "tokenizer": {"kind": "huggingface_auto", "model": work.tokenizer},
        "data": [{"kind": "json_file", "path": str(data)}],
        "data_loader": {"kind": "pytorch", "shuffle": False},
        "outputs": [{"kind": "json", "path": str(results)}],
        "metrics": {"kind": "generative", "sample_size": None},
    }}


def guidellm_argv(install: Installation, scenario_file: Path) -> list[str]:
    """`guidellm run` on the scenario, its console tables and progress off (its log lines stay)."""
    return [install.executable(GUIDELLM), "run", "-c", str(scenario_file), "--disable-console"]


def run_guidellm(install: Installation, work: Workload, folder: Path, cpu: int | None,
                 timeout_s: float = 600.0) -> ClientRun:
    """guidellm's client on `work` in a child, read back from its JSON output."""
    data, spec, results = folder / "guidellm-data.jsonl", folder / "guidellm-scenario.json", folder / "guidellm.json"
    data.write_text("".join(json.dumps({"prompt": text}) + "\n" for text in requests_of(work)))
    spec.write_text(json.dumps(scenario(work, data, results), indent=1))
    results.unlink(missing_ok=True)
    log = folder / "guidellm.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # no hub is reachable
    rc, cpu_s, wall_s = run_child(guidellm_argv(install, spec), log, cpu, timeout_s, env=env)
    if rc != 0 or not results.is_file():
        raise RuntimeError(f"guidellm exited {rc}; log: {log}")
    return read_guidellm_result(json.loads(results.read_text()), cpu_s, wall_s)


def read_guidellm_result(data: dict[str, Any], cpu_s: float, wall_s: float) -> ClientRun:
    """guidellm's JSON output (its one benchmark) as a ClientRun, timings in the order sent."""
    (bench,) = data["benchmarks"]
    groups = bench["requests"]
    ok = sorted(groups.get("successful") or [], key=_started)
    failed = sorted([*(groups.get("errored") or []), *(groups.get("incomplete") or [])], key=_started)
    ttfts = [float(r["time_to_first_token_ms"]) for r in ok if r.get("time_to_first_token_ms") is not None]
    tpots = [float(r["inter_token_latency_ms"]) for r in ok if r.get("inter_token_latency_ms") is not None]
    return ClientRun(
        client=GUIDELLM, ok=len(ok), failed=len(failed),
        chunks=sum(int(r["info"]["timings"]["token_iterations"]) for r in ok),
        duration_s=float(bench["duration"]), cpu_s=cpu_s, wall_s=wall_s,
        # no gaps: guidellm times only a request's first and last content line
        timings=[(str(r.get("output") or "")[:HEAD], float(r["time_to_first_token_ms"]) / 1e3, [])
                 for r in ok if r.get("time_to_first_token_ms") is not None],
        reported={"output_throughput_tps": bench["metrics"]["output_tokens_per_second"]["successful"]["mean"],
                  "ttft_p50_ms": percentile(sorted(ttfts), 50), "tpot_p50_ms": percentile(sorted(tpots), 50),
                  "itl_p50_ms": None},
        errors=[str(r["info"].get("error") or r["info"]["status"]).strip() for r in failed][:3],
    )


def _started(record: dict[str, Any]) -> float:
    start = record.get("request_start_time")
    return float(start) if start is not None else float("inf")  # never sent: after every sent one


PEER = Peer(GUIDELLM, "cellbench install guidellm", find=lambda: cached(RECIPE), run=run_guidellm, recipe=RECIPE)
