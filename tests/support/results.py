"""Synthetic cell results for tests of the reports, the comparison and the store: no server.

`synthetic_result` builds a Result the way a cell does, from requests instead of a server:
deterministic request records (closed loop at each level's concurrency, TTFT and per-token
gaps that grow with concurrency, some HTTP 500s when asked), summarised by
bench.core.metrics.summarize_level and judged by bench.core.verdicts.classify, so the levels,
the verdict and its reason agree as in a real result. `write_cell` writes it where a cell
would (validated by bench.core.result.files.write_result), with its per-request sidecar and server
logs, so the plots can read the requests back.
"""

from __future__ import annotations

import copy
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bench.core.level_run import ClientHealth, LevelConfig, LevelRun
from bench.core.metrics import summarize_level
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.core.result.files import SCHEMA_VERSION, cell_paths, validate, write_result
from bench.core.result.model import Level, MachineBlock, Result, Server
from bench.core.verdicts import Evidence, Identity, classify
from bench.host.cpus.usage import CpuUse

MACHINE: MachineBlock = {
    "slug": "intelxeonprocessor", "host": "vm", "os": "Linux 6.18.44", "cpu": "Intel(R) Xeon(R) Processor",
    "chip": None, "gpus": [], "cores": 2, "memory_gib": 23.6, "gpu_probe_error": None,
}
# Per framework: TTFT at c=1 (s), seconds per output token at c=1, tokens per streamed chunk.
SPEEDS: dict[str, tuple[float, float, int]] = {
    "llamacpp": (0.035, 0.0014, 1),
    "vllm": (0.050, 0.0011, 1),
    "mlx_lm": (0.080, 0.0030, 1),
    "sglang": (0.045, 0.0012, 4),  # bundles tokens: ITL per chunk
    "ollama": (0.060, 0.0020, 1),
}


@dataclass(frozen=True)
class Spec:
    """What a synthetic cell measured; every field has a realistic default."""

    framework: str = "llamacpp"
    run_id: str = "20261130T100000Z-aaaa"
    split: str = "chat"
    model: str = "tiny"
    levels: tuple[int, ...] = (1, 2)
    requests: int = 8
    warmup: int = 2
    failed: int = 0  # per level, HTTP 500s
    speed: float = 1.0  # >1: faster than the framework's usual
    share_server: bool = False
    finished_at: str = "2026-11-30T10:00:30+00:00"
    commit: str | None = "5eed" * 10  # the harness commit; None: not a git checkout


def level_records(spec: Spec, concurrency: int) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """(measured, warm-up) records of one level: a closed loop of `concurrency` slots."""
    ttft0, gap0, per_chunk = SPEEDS.get(spec.framework, SPEEDS["llamacpp"])
    rng = random.Random(f"{spec.framework} {spec.run_id} {concurrency}")
    load = 1 + 0.15 * (concurrency - 1)
    slots = [0.0] * concurrency
    records = []
    for i in range(spec.requests):
        slot = i % concurrency
        t = slots[slot]
        name = f"{spec.split}-{i:03d}"
        if i < spec.failed:
            end = t + 0.004
            records.append(RequestRecord(index=i, prompt_name=name, t_sched=t, t_send=t + 0.0002, t_end=end,
                                         http_status=500,
                                         error=RequestError(ErrorType.HTTP_5XX, "HTTP 500: engine overloaded", 500,
                                                            '{"error": "engine overloaded"}')))
            slots[slot] = end
            continue
        tokens = 96 + rng.randrange(0, 96)
        ttft = ttft0 * load * rng.uniform(0.8, 1.3) / spec.speed
        gap = gap0 * load * rng.uniform(0.9, 1.1) / spec.speed
        first = t + 0.0002 + ttft
        chunks = [first + k * gap * per_chunk for k in range((tokens + per_chunk - 1) // per_chunk)]
        records.append(RequestRecord(
            index=i, prompt_name=name, t_sched=t, t_send=t + 0.0002, t_first_byte=first - 0.001, t_first_token=first,
            t_first_answer=first, t_end=chunks[-1] + 0.0005, chunk_times=chunks, usage_completion_tokens=tokens,
            usage_prompt_tokens=400 + 17 * (i % 6), finish_reason="length", served_model=spec.model, http_status=200,
            done_marker=True, output_text_head="The quick brown fox"))
        slots[slot] = chunks[-1] + 0.0005
    warmup = [RequestRecord(index=j, prompt_name=f"warmup-{j}", warmup=True, t_sched=-1.0 + 0.3 * j,
                            t_send=-1.0 + 0.3 * j, t_first_byte=-0.95 + 0.3 * j, t_first_token=-0.95 + 0.3 * j,
                            t_end=-0.8 + 0.3 * j, chunk_times=[-0.95 + 0.3 * j + 0.01 * k for k in range(16)],
                            usage_completion_tokens=16, usage_prompt_tokens=380, finish_reason="length",
                            served_model=spec.model, http_status=200, done_marker=True)
              for j in range(spec.warmup)]
    return records, warmup


def _level(spec: Spec, concurrency: int, started_at: float) -> Level:
    records, warmup = level_records(spec, concurrency)
    sent = [r for r in records if r.t_send is not None]
    t_start = min(r.t_send for r in sent if r.t_send is not None)
    t_end = max(r.t_end for r in sent if r.t_end is not None)
    host = CpuUse(cpu_share=0.08 + 0.02 * concurrency, host_cpus=2, host_busy=1.2, client_cpus=(0, 1),
                  client_cpus_busy=0.6, run_queue_wait_share=0.01, involuntary_switches=3, cpu_pressure_some=0.02)
    run = LevelRun(LevelConfig("http://127.0.0.1:8001", spec.model, concurrency, spec.requests, spec.warmup),
                   records, warmup, t_start, t_end, started_at, False, None,
                   ClientHealth(host.cpu_share, 1.4, 0.3, host=host))
    return summarize_level(run)


def _server(spec: Spec, levels: tuple[int, ...], log: str) -> Server:
    return {"levels": list(levels), "port": 8001,
            "command": {"argv": [f"/opt/{spec.framework}/bin/server", "--port", "8001", "--alias", spec.model],
                        "env": {}, "cwd": None},
            "log": log, "ready_after_s": 1.25,
            "exit": {"returncode": 0, "signal": None, "stopped_by_us": True}}


def _log_name(spec: Spec, levels: tuple[int, ...]) -> str:
    label = "shared" if len(levels) > 1 else f"c{levels[0]}"
    return f"logs/{spec.framework}_{spec.run_id}_{label}.server.log"


def synthetic_result(spec: Spec = Spec(), *, machine: MachineBlock = MACHINE, **changes: Any) -> Result:
    """A schema-valid Result of `spec` (with `changes` applied to it) on `machine`."""
    if changes:
        spec = Spec(**{**spec.__dict__, **changes})
    levels = [_level(spec, c, 1_796_000_000.0 + 60 * k) for k, c in enumerate(spec.levels)]
    groups = [spec.levels] if spec.share_server else [(c,) for c in spec.levels]
    verdict = classify(Evidence(levels=tuple(levels), identity=Identity(spec.model, (spec.model,), (spec.model,))))
    result: Result = {
        "schema_version": SCHEMA_VERSION,
        "run_id": spec.run_id,
        "harness": {"commit": spec.commit, "dirty": None if spec.commit is None else False},
        "framework": {"name": spec.framework, "platform": "linux-x86_64", "version": "1.0.0", "install_source": "cache",
                      "install": {"install_seconds": 42.0}},
        "split": spec.split,
        "model": {"profile": spec.model, "results_name": spec.model, "format": "gguf",
                  "path": f"/models/{spec.model}.gguf", "requested": spec.model,
                  "served": {"listed": [spec.model], "responses": [spec.model]}},
        "machine": machine,
        "run_config": {"levels": list(spec.levels), "requests_per_level": spec.requests, "warmup": spec.warmup,
                       "levels_share_server": spec.share_server, "request_timeout_s": 300.0,
                       "request_extras": {"temperature": 1.0, "stream_options": {"include_usage": True}},
                       "cpu_affinity": {"client": None, "server": None, "how": "auto: off with 2 CPUs"},
                       "unique_prompts": False,
                       "prompts": {"source": f"prompts/{spec.split}.json", "format": "cellbench", "count": 100,
                                   "tools_param": False}},
        "servers": [_server(spec, g, _log_name(spec, g)) for g in groups],
        "started_at": "2026-11-30T10:00:00+00:00",
        "finished_at": spec.finished_at,
        "duration_s": 30.0,
        "levels": levels,
        "verdict": verdict.to_json(),
        "requests_file": f"{spec.framework}_{spec.run_id}.requests.jsonl",
    }
    validate(result)
    return result


def write_cell(results_root: Path, spec: Spec = Spec(), *, machine: MachineBlock = MACHINE, folder: str | None = None,
               **changes: Any) -> Path:
    """Write a synthetic cell as a cell writes one: the result (validated), its per-request
    sidecar and its server logs, under `<results_root>/<model>/<machine>/<split>/` (`folder` ""
    for SiliconBench's legacy tree, `<model>/<split>/`); returns the result's path."""
    if changes:
        spec = Spec(**{**spec.__dict__, **changes})
    result = synthetic_result(spec, machine=machine)
    paths = cell_paths(results_root, spec.model, machine["slug"] if folder is None else folder, spec.split,
                       spec.framework, spec.run_id)
    for server in result["servers"]:
        log = paths.split_dir / server["log"]
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("main: server is listening on http://127.0.0.1:8001\n")
        server["log"] = str(log)
    paths.split_dir.mkdir(parents=True, exist_ok=True)
    with paths.requests.open("w") as sidecar:
        for c in spec.levels:
            measured, warmup = level_records(spec, c)
            for record in [*warmup, *measured]:
                sidecar.write(json.dumps({"concurrency": c, **record.to_json()}) + "\n")
    write_result(paths.result, result)
    return paths.result


def variant(template: Result, *, framework: str | None = None, run_id: str | None = None,
            finished_at: str | None = None, machine: str | None = None, split: str | None = None,
            scale: float = 1.0, levels: list[int] | None = None, share_server: bool | None = None) -> Result:
    """A schema-valid copy of `template` with the given differences; `scale` multiplies every
    level's output throughput, `levels` copies the nearest level for a level it lacks."""
    r = copy.deepcopy(template)
    r["framework"]["name"] = framework or r["framework"]["name"]
    r["run_id"] = run_id or r["run_id"]
    r["finished_at"] = finished_at or r["finished_at"]
    r["split"] = split or r["split"]
    if machine:
        r["machine"]["slug"], r["machine"]["host"] = machine, f"{machine}-host"
        r["machine"]["gpus"] = [f"NVIDIA {machine.upper()}"]
    if levels:
        by_level = {lv["concurrency"]: lv for lv in r["levels"]}
        last = r["levels"][-1]
        r["levels"] = [cast(Level, dict(copy.deepcopy(by_level.get(c, last)), concurrency=c)) for c in levels]
        r["run_config"]["levels"] = list(levels)
    if share_server is not None:
        r["run_config"]["levels_share_server"] = share_server
    for lv in r["levels"]:
        lv["output_throughput_tps"] = (lv["output_throughput_tps"] or 0.0) * scale
    r["requests_file"] = f"{r['framework']['name']}_{r['run_id']}.requests.jsonl"
    validate(r)
    return r


def put(split_dir: Path, result: Result, *, mtime: float | None = None) -> Path:
    """Write `result` under its canonical name (as JSON, unvalidated), optionally with a chosen mtime."""
    split_dir.mkdir(parents=True, exist_ok=True)
    path = split_dir / f"{result['framework']['name']}_{result['run_id']}.json"
    path.write_text(json.dumps(result))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def cell_dir(root: Path, template: Result, split: str | None = None) -> Path:
    """`<root>/<model>/<machine>/<split>/` for the template's cell."""
    return root / template["model"]["results_name"] / template["machine"]["slug"] / (split or template["split"])
