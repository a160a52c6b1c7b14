"""One SiliconBench result file -> one cellbench result, labelled `imported`.

SiliconBench's `scripts/benchmark.py` writes one JSON per framework run: `framework`, `model`,
`endpoint`, `timestamp` (local time, no zone) and `concurrency_results`, one summary per level
(counts, token totals, TTFT/ITL/latency averages and nearest-rank percentiles, throughputs,
`error_samples`, `sanity_warnings`). Newer files add `machine` (host, chip, os),
`framework_version`, `run_config` and `total_duration_s`. A level that never ran is written as
all failed with an `error` ("skipped (previous level too slow)", "server crashed: ...").

`convert` (of a file bench.imports.siliconbench_file read and checked) keeps SiliconBench's
numbers in cellbench's fields where one exists, leaves out what it never recorded (the client's
health, warm-up, TTFB, TPOT, servers, request records), and labels every metric with how
SiliconBench derived it (bench.imports.methods). The verdict is cellbench's rules
(bench.core.verdicts.classify) over the converted levels.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.core.metrics import BUNDLING_TOKENS_PER_CHUNK, DIVERGENCE_WARN_FRACTION
from bench.core.result.files import SCHEMA_VERSION
from bench.core.result.model import (
    DominantError,
    ErrorSample,
    Framework,
    Level,
    MachineBlock,
    Model,
    Result,
    RunConfig,
    Stats,
    VerdictBlock,
)
from bench.core.verdicts import Evidence, classify
from bench.imports.methods import siliconbench_methods
from bench.imports.siliconbench_file import SiliconBenchFile, number

TOOL, LABEL = "siliconbench", "SiliconBench"
REQUEST_TIMEOUT_S = 300.0  # aiohttp ClientTimeout(total=300) per request, in every benchmark.py version
UNCLASSIFIED = "unclassified"  # SiliconBench's failures carry messages, never types
DIVERGENCE = re.compile(r"(\d+)/(\d+) requests had server completion_tokens diverging")
PROMPT = re.compile(r"for prompt '([^']+)'")
HTTP_STATUS = re.compile(r"^(\d{3}), message=")


def _utc(timestamp: str) -> datetime:
    """SiliconBench's local, zone-less time, as this machine's local time, in UTC."""
    moment = datetime.fromisoformat(timestamp)
    return (moment if moment.tzinfo else moment.astimezone()).astimezone(timezone.utc)


def _stats(n: int, mean: Any = None, p50: Any = None, p99: Any = None, scale: float = 1.0) -> Stats:
    """A stats block from SiliconBench's mean and percentiles; what it never recorded is null."""
    def value(v: Any) -> float | None:
        return float(v) * scale if n and number(v) else None
    known = n if any(number(v) for v in (mean, p50, p99)) else 0
    return {"n": known, "mean": value(mean), "min": None, "max": None, "stdev": None,
            "p50": value(p50), "p90": None, "p95": None, "p99": value(p99)}


def _samples(raw: dict[str, Any]) -> list[ErrorSample]:
    messages = [m for m in raw.get("error_samples") or [] if isinstance(m, str)]
    if not messages and isinstance(raw.get("error"), str) and raw["error"].startswith("server crashed"):
        messages = [raw["error"]]
    samples: list[ErrorSample] = []
    for message in messages[:5]:
        sample: ErrorSample = {"message": message or "(empty message: SiliconBench records a timeout so)"}
        if prompt := PROMPT.search(message):
            sample["prompt_name"] = prompt[1]
        if status := HTTP_STATUS.match(message):
            sample["http_status"] = int(status[1])
        samples.append(sample)
    return samples


def _dominant(failed: int, samples: list[ErrorSample]) -> DominantError | None:
    if not failed:
        return None
    statuses = {s.get("http_status") for s in samples}
    status = statuses.pop() if len(statuses) == 1 else None
    return {"type": UNCLASSIFIED, "http_status": status, "count": failed}


def convert_level(raw: dict[str, Any]) -> Level:
    """One of SiliconBench's `concurrency_results` as a cellbench level (measured-only keys left out)."""
    error = raw.get("error") if isinstance(raw.get("error"), str) else None
    skipped = bool(error and error.startswith("skipped"))
    stopped = skipped or bool(error and error.startswith("server crashed"))  # the level did not run to its end
    ok, failed, sent = (0, 0, 0) if skipped else (raw["successful"], raw["failed"], raw["num_requests"])
    wall = float(raw["wall_time_s"])
    timed = wall > 0 and sent > 0
    out_tokens = int(raw.get("total_output_tokens") or 0) if ok else 0
    chunks = int(raw.get("total_tokens_generated") or 0) if ok else 0
    in_tokens = raw.get("total_input_tokens") if ok and isinstance(raw.get("total_input_tokens"), int) else None
    per_chunk = out_tokens / chunks if chunks else None
    samples = _samples(raw)

    def rate(key: str) -> float | None:
        return float(raw[key]) if ok and number(raw.get(key)) else None

    level: Level = {
        "concurrency": raw["concurrency"], "num_requests": sent, "successful": ok, "failed": failed,
        "partial": skipped, "stop_reason": f"SiliconBench: {error}" if stopped else None,
        "wall_time_s": wall, "output_tokens_total": out_tokens, "input_tokens_total": in_tokens,
        "chunks_total": chunks,
        "output_throughput_tps": rate("output_throughput_tps") if ok else (0.0 if timed else None),
        "request_throughput_rps": ok / wall if timed else None,
        "input_throughput_tps": rate("input_throughput_tps"),
        "total_token_throughput_tps": rate("total_token_throughput_tps"),
        "tokens_per_chunk": per_chunk, "usage_available": bool(raw.get("server_usage_available")),
        "itl_per_chunk": per_chunk is not None and per_chunk > BUNDLING_TOKENS_PER_CHUNK,
        "ttft_ms": _stats(ok, raw.get("ttft_avg_ms"), raw.get("ttft_p50_ms"), raw.get("ttft_p99_ms")),
        "itl_ms": _stats(ok, raw.get("itl_avg_ms"), raw.get("itl_p50_ms")),
        "e2el_ms": _stats(ok, raw.get("latency_avg_s"), raw.get("latency_p50_s"), raw.get("latency_p99_s"), 1000.0),
        "decode_tps": _stats(ok, raw.get("throughput_avg_tps"), raw.get("throughput_p50_tps")),
        "errors": {UNCLASSIFIED: failed} if failed else {},
        "error_samples": {UNCLASSIFIED: samples} if failed and samples else {},
        "dominant_error": _dominant(failed, samples),
    }
    for warning in raw.get("sanity_warnings") or ():
        if isinstance(warning, str) and (share := DIVERGENCE.search(warning)) and int(share[2]):
            fraction = int(share[1]) / int(share[2])
            level["chunk_divergence"] = {"fraction": fraction, "warning": fraction > DIVERGENCE_WARN_FRACTION}
    return level


def _verdict(raws: list[dict[str, Any]], levels: list[Level]) -> VerdictBlock:
    """cellbench's rules over the converted levels: a crashed level is a server that exited, a
    skipped one a cap (SiliconBench's wall-time limit), then the failure shares decide."""
    def at(prefix: str) -> list[tuple[int, str]]:
        return [(r["concurrency"], r["error"]) for r in raws if str(r.get("error") or "").startswith(prefix)]
    crashed, skipped = at("server crashed"), at("skipped")
    evidence = Evidence(
        levels=tuple(levels),
        server_exit="; ".join(f"SiliconBench: {e} at c={c}" for c, e in crashed) or None,
        capped=(f"SiliconBench skipped c={', '.join(str(c) for c, _ in skipped)} "
                f"({skipped[0][1].removeprefix('skipped').strip(' ()') or 'no reason given'})" if skipped else None),
    )
    verdict = classify(evidence).to_json()
    verdict["reason"] = f"imported from {LABEL}: {verdict['reason']}"
    verdict["annotations"] = ["imported", *verdict["annotations"]]
    return verdict


def _framework(data: dict[str, Any]) -> Framework:
    recorded = data.get("framework_version") or {}
    version = recorded.get("version")
    install: dict[str, Any] = {"recorded_by": LABEL, **recorded}
    serve_env = (data.get("run_config") or {}).get("serve_env")
    if serve_env:
        install["serve_env"] = serve_env
    return {"name": data["framework"], "version": version if isinstance(version, str) and version else "unknown",
            "install_source": TOOL, "install": install}


def _run_config(data: dict[str, Any], raws: list[dict[str, Any]]) -> tuple[RunConfig, list[str]]:
    recorded = data.get("run_config") or {}
    levels, per_level = recorded.get("concurrency_levels"), recorded.get("requests_per_level")
    config: RunConfig = {
        "levels": levels if isinstance(levels, list) and levels else [r["concurrency"] for r in raws],
        "requests_per_level": per_level if isinstance(per_level, int) and per_level >= 1
        else max(1, *(r["num_requests"] for r in raws)),
        "request_timeout_s": REQUEST_TIMEOUT_S,
    }
    notes = []
    if isinstance(recorded.get("warmup"), int):
        config["warmup"] = recorded["warmup"]
    if isinstance(recorded.get("levels_share_server"), bool):
        config["levels_share_server"] = recorded["levels_share_server"]
    else:  # only its merge of one-server-per-level runs writes the key
        config["levels_share_server"] = True
        notes.append("levels_share_server: not recorded; SiliconBench files without it come from its orchestrator "
                     "that ran every level on one server")
    return config, notes


def _machine(slug: str, recorded: dict[str, Any]) -> MachineBlock:
    """--machine's slug, and what the file says of its machine (host, chip, os), nothing guessed."""
    block: MachineBlock = {"slug": slug}
    if isinstance(recorded.get("host"), str):
        block["host"] = recorded["host"]
    if isinstance(recorded.get("os"), str):
        block["os"] = recorded["os"]
    if isinstance(recorded.get("chip"), str):
        block["chip"] = recorded["chip"]
    return block


def convert(source: SiliconBenchFile, *, machine: str, results_name: str, profile: str, split: str, model_format: str,
            imported_at: str) -> Result:
    """`source` as a cellbench result of `split` on `machine` (a slug), filed under `results_name`.

    Its run id is the file's start time (UTC) and the first hex digits of its sha256, so the same
    file always converts to the same name."""
    data = source.data
    raws: list[dict[str, Any]] = data["concurrency_results"]  # SiliconBench's own levels, read field by field
    levels = [convert_level(raw) for raw in raws]
    started = _utc(data["timestamp"])
    total = data.get("total_duration_s")
    duration = float(total) if isinstance(total, int | float) else sum(float(r["wall_time_s"]) for r in raws)
    run_config, notes = _run_config(data, raws)
    model_str = data["model"]
    model: Model = {"profile": profile, "results_name": results_name, "format": model_format,
                    "path": model_str if model_str.startswith(("/", "~")) or model_str.endswith(".gguf") else None,
                    "requested": model_str}
    recorded_machine = data.get("machine")
    machine_block = _machine(machine, recorded_machine or {})
    warnings = [f"c={r['concurrency']}: {w}" for r in raws
                for w in r.get("sanity_warnings") or () if isinstance(w, str)]
    if isinstance(data.get("config_note"), str):
        warnings.append(f"config_note: {data['config_note']}")
    if datetime.fromisoformat(data["timestamp"]).tzinfo is None:
        notes.append("timestamp: recorded without a zone; read as the importing machine's local time")
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": f"{started:%Y%m%dT%H%M%SZ}-{source.sha256[:4]}",
        "imported": {
            "tool": TOOL, "label": LABEL, "file": str(source.path), "sha256": source.sha256,
            "timestamp": data["timestamp"], "imported_at": imported_at,
            "source_machine": recorded_machine if isinstance(recorded_machine, dict) else None,
            "methods": siliconbench_methods(split, data["timestamp"]), "warnings": [*warnings, *notes],
        },
        "framework": _framework(data),
        "split": split,
        "model": model,
        "machine": machine_block,
        "run_config": run_config,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": (started + timedelta(seconds=duration)).isoformat(timespec="seconds"),
        "duration_s": round(duration, 3),
        "levels": levels,
        "verdict": _verdict(raws, levels),
    }
