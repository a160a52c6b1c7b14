"""How to read a cell's numbers, beside its verdict (docs/verdicts.md): the annotations a result
carries (`annotations_for`), and why the client's own timing is in some levels' numbers
(`client_limited`: client-bound, client starved or client late). Neither ever changes a verdict;
bench.core.verdicts puts them in its reason and notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.core.figures import block_of
from bench.core.figures.gpu import IDLE_PERCENT
from bench.core.level_run import levels_text
from bench.core.metrics import STARVED_RUN_QUEUE_WAIT
from bench.core.metrics.audits import fired
from bench.core.result.model import Level


def annotations_for(levels: Sequence[Level]) -> tuple[str, ...]:
    """Notes on how to read the numbers; they never change the verdict. `chunk-bundling`: ITL is
    per chunk, not per token. `prompt-reuse`: a level repeated a prompt or ran on a server an
    earlier level (or someone else) warmed, so caches may have served part of it. `compressed`:
    the server compressed streams though asked not to; their times are the compressed bytes'.
    `token-accounting`, `short-output`: a level's audit fired; `cached`: --cache-audit's repeated
    prompts were answered at least 10% faster than their first time (bench.core.metrics.audits).
    `throttled`: heat or power held a GPU's clock down while a level ran; `gpu-idle`: a level kept the
    GPU of a server that holds GPU memory under 20% busy on average, so the GPU was not what bounded
    it (the client, the CPU or the server's scheduling was; bench.core.figures.gpu). `over-saturated`:
    a level's queue grew without bound and the level was stopped early; its figures are those of the
    requests that ended before the stop (bench.core.figures.saturation)."""
    notes = []
    if any(lv.get("itl_per_chunk") for lv in levels):
        notes.append("chunk-bundling")
    if any("prompt_reuse" in lv and lv["prompt_reuse"]["may_hit_cache"] for lv in levels):
        notes.append("prompt-reuse")
    if any(lv.get("content_encodings") for lv in levels):
        notes.append("compressed")
    if any(block_of(lv, "gpu").get("throttled") for lv in levels):
        notes.append("throttled")
    if any(_gpu_idle(lv) for lv in levels):
        notes.append("gpu-idle")
    if any("over_saturated" in lv for lv in levels):
        notes.append("over-saturated")
    return (*notes, *fired(levels))


def _gpu_idle(level: Level) -> bool:
    """The level's GPU under IDLE_PERCENT busy on average, its server holding GPU memory (or not known
    not to: NVML lists memory per process, other sources do not)."""
    mean = block_of(level, "gpu").get("util_mean_percent")
    return mean is not None and mean < IDLE_PERCENT and block_of(level, "memory").get("peak_gpu_bytes") != 0


def _client(level: Level) -> Mapping[str, Any]:
    """The level's client block; {} for an imported level, which has none."""
    return level.get("client") or {}


def _limited_by(level: Level) -> str | None:
    client = _client(level)
    return client.get("limited_by") or ("client" if client.get("client_bound") else None)


def client_limited(levels: Sequence[Level]) -> str | None:
    """Why the client's own timing is in the numbers of some levels, or None: saturated by its
    own work ("client-bound"), not let run by a busy host ("client starved", with the cure),
    or late for no reason the CPUs show ("client late")."""
    by_cause: dict[str, list[Level]] = {}
    for lv in levels:
        cause = _limited_by(lv)
        if cause is not None:
            by_cause.setdefault(cause, []).append(lv)
    reasons = [_CLIENT_REASONS[cause](by_cause[cause]) for cause in _CLIENT_REASONS if cause in by_cause]
    return "; ".join(reasons) or None


def _at(levels: list[Level]) -> str:
    return levels_text(levels)


def _lag(client: Mapping[str, Any]) -> str:
    """Both lags: a few long stalls show in the schedule lag p99 (one per request) long before the
    10 ms ticker's loop lag p99 (thousands of ticks) sees them."""
    lags = [f"{name} lag p99 {client[key]:.0f} ms" for name, key in (("schedule", "schedule_lag_p99_ms"),
                                                                      ("loop", "loop_lag_p99_ms"))
            if client.get(key) is not None]
    return ", ".join(lags) or "lag unknown"


def _worst(levels: list[Level]) -> Mapping[str, Any]:
    """The client block of the level whose client ran latest."""
    return max((_client(lv) for lv in levels),
               key=lambda c: max(c.get("loop_lag_p99_ms") or 0, c.get("schedule_lag_p99_ms") or 0))


def _busy(client: Mapping[str, Any]) -> str | None:
    """How busy the CPUs the client could use were: its own CPUs when pinned, else the host's."""
    if client.get("pinned") and client.get("cpus_busy") is not None:
        cpus = client.get("cpus") or ()
        return f"client's CPU{'s' if len(cpus) > 1 else ''} {','.join(map(str, cpus))} {client['cpus_busy']:.0%} busy"
    if client.get("host_cpu_busy") is not None:
        return f"host CPU {100 * client['host_cpu_busy']:.0f}% busy"
    return None


def _saturated(levels: list[Level]) -> str:
    busiest = max((_client(lv) for lv in levels), key=lambda c: c.get("cpu_share") or 0.0)
    procs = busiest.get("procs") or 1
    where = f" in the busiest of {procs} client processes" if procs > 1 else ""
    return (f"client-bound at {_at(levels)}: client CPU {busiest.get('cpu_share') or 0.0:.2f} of a core{where}: "
            f"numbers measure the client")


def _starved(levels: list[Level]) -> str:
    client = _worst(levels)
    evidence = [_busy(client), f"client CPU {client.get('cpu_share', 0.0):.2f} of a core", _lag(client)]
    wait = client.get("run_queue_wait_share")
    if wait is not None and wait >= STARVED_RUN_QUEUE_WAIT:
        evidence.append(f"waiting for a CPU {wait:.0%} of the time")
    cure = ("give the client a CPU nothing else uses (--client-cpus, --server-cpus)" if client.get("pinned")
            else "keep the client on its own core with --client-cpus")
    return (f"client starved at {_at(levels)}: {', '.join(e for e in evidence if e)}: "
            f"TTFT includes the client's wait; {cure}")


def _late(levels: list[Level]) -> str:
    client = _worst(levels)
    evidence = [_lag(client), f"client CPU {client.get('cpu_share', 0.0):.2f} of a core", _busy(client)]
    return (f"client late at {_at(levels)}: {', '.join(e for e in evidence if e)}: neither its own work nor a "
            f"busy host explains it (blocked on I/O, swapping, paused?); TTFT includes the delay")


_CLIENT_REASONS = {"client": _saturated, "host": _starved, "unknown": _late}
