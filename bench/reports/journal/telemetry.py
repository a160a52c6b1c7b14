"""What a failed cell's own evidence says about how it died, in one line for the journal: the
kernel's OOM evidence, how each server exited, and the resource sidecar's trajectory.

The runbook reads these to tell three failures apart that look alike in a server's log: a crash
(the process tree is gone while the levels still ran), memory pressure (available memory near
zero, Linux PSI stalls, macOS memory pressure yellow or red) and throttling (the GPU's clock
falling while it is busy; bench.run.cell_result.gpu_reading, the reading a suspicious cell gets).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.host.memory.oom import describe_oom
from bench.run.cell_result import gpu_reading, resource_samples

LOW_AVAILABLE = 0.10  # under a tenth of the machine's memory available: pressure
PSI_STALL = 10.0  # percent of the last 10 s some task stalled on memory (PSI `some avg10`)


def _memory(samples: list[dict[str, Any]]) -> str | None:
    shares = [s["system"]["mem_available_bytes"] / s["system"]["mem_total_bytes"] for s in samples
              if (s.get("system") or {}).get("mem_total_bytes")]
    stalls = [p["some_avg10"] for s in samples if (p := s.get("pressure")) and p.get("some_avg10") is not None]
    levels = {g.get("mem_pressure_level") for s in samples for g in s.get("gpu", ()) if g.get("mem_pressure_level")}
    rss = max((s["tree"]["rss_bytes"] for s in samples if (s.get("tree") or {}).get("rss_bytes")), default=None)
    said = []
    if shares and min(shares) < LOW_AVAILABLE:
        said.append(f"available memory fell to {min(shares):.0%}")
    if stalls and max(stalls) >= PSI_STALL:
        said.append(f"PSI memory stalls up to {max(stalls):.0f}%")
    if levels & {"yellow", "red"}:
        said.append(f"macOS memory pressure {'red' if 'red' in levels else 'yellow'}")
    peak = f"peak server RSS {rss / 2**30:.2f} GiB" if rss else None
    if said:
        return "memory pressure: " + ", ".join(said) + (f" ({peak})" if peak else "")
    if shares:
        return f"memory: at least {min(shares):.0%} available throughout" + (f", {peak}" if peak else "")
    return peak


def _tree(samples: list[dict[str, Any]]) -> str | None:
    dead = next((s for s in samples if (s.get("tree") or {}).get("alive") is False), None)
    if dead is None:
        return None
    return f"the server's process tree was gone at {dead.get('t', 0):.0f} s of sampling (a crash, or killed)"


def _exits(result: dict[str, Any], with_oom: bool) -> list[str]:
    said = []
    for server in result.get("servers", []):
        oom = server.get("oom") or (server.get("exit") or {}).get("oom")
        end = server.get("exit") or {}
        if oom:
            said += [describe_oom(oom)] if with_oom else []
        elif end and not end.get("stopped_by_us") and (end.get("signal") or end.get("returncode") not in (None, 0)):
            how = end.get("signal") or f"code {end.get('returncode')}"
            said.append(f"server exited by itself ({how})")
        if end.get("oom_check_error"):
            said.append(f"OOM check undecided: {end['oom_check_error']}")
    return list(dict.fromkeys(said))


def failure_reading(result_path: str | Path | None, *, with_oom: bool = True) -> str | None:
    """The line for a failed cell's journal entry, or None when it wrote no result. An `oom`
    cell's reason already quotes the OOM evidence: `with_oom=False` leaves it out here."""
    if not result_path:
        return None
    path = Path(result_path)
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    samples = resource_samples(path.parent, result, after_ready=False)
    parts = [*_exits(result, with_oom), *filter(None, (_tree(samples), _memory(samples)))]
    gpu = gpu_reading(path.parent, result) if samples else None
    if gpu:
        parts.append(gpu)
    if not samples:
        parts.append("no resource samples recorded for its servers")
    return "; ".join(parts)


def _clock(iso: str | None, fmt: str = "%H:%M:%S") -> str | None:
    """A result's UTC timestamp as this machine's local time (the journal's own times are local)."""
    try:
        return datetime.fromisoformat(str(iso)).astimezone().strftime(fmt) if iso else None
    except ValueError:
        return None


def oom_block(result_path: str | Path | None, split: str) -> dict[str, str]:
    """An oom cell's run window, likely cause and mitigation, read from its result (the OOM Cells
    block: bench.reports.journal.blocks); {} when it wrote none."""
    try:
        result = json.loads(Path(result_path).read_text()) if result_path else None
    except (OSError, ValueError):
        result = None
    if not isinstance(result, dict):
        return {}
    start, end = _clock(result.get("started_at")), _clock(result.get("finished_at"))
    killed = [s for s in result.get("servers", []) if s.get("oom") or (s.get("exit") or {}).get("oom")]
    died = [lv for s in killed for lv in s.get("levels", [])]
    done = [lv["concurrency"] for lv in result.get("levels", []) if lv.get("concurrency") is not None]
    at = f"c={died[-1]}" if died else "its start"
    day = _clock(result.get("started_at"), "%Y-%m-%d")
    window = f"{start}–{end} ({day}), killed at {at}" if start and end else "unknown"
    samples = resource_samples(Path(str(result_path)).parent, result, after_ready=False)
    memory = _memory(samples)
    limits = [((s.get("exit") or {}).get("memory") or {}).get("limit_bytes")
              or ((s.get("oom") or (s.get("exit") or {}).get("oom") or {}).get("cgroup") or {}).get("limit_bytes")
              for s in killed]
    limit = next((f"; it ran under a {lim / 2**20:.0f} MiB memory limit (--memory-limit)" for lim in limits if lim), "")
    machine = (result.get("machine") or {}).get("memory_gib")
    starting = any(s.get("start_error") for s in killed)  # killed while loading, before it answered
    what = ("loading the model" if not died else f"loading the model for {at} (it was killed while starting)"
            if starting else f"the model's weights plus the KV cache of {at}")
    cause = (f"{what} on the {split} split needed more memory than was free"
             + (f" on this {machine} GiB machine" if machine and not limit else "") + limit
             + (f" ({memory})" if memory else ""))
    lower = [c for c in done if not died or c < died[-1]]
    mitigation = (f"run it at a lower concurrency (`--concurrency {','.join(map(str, lower))}`: the levels it "
                  "finished), " if lower else "") + "pick a smaller model, or run it on a machine with more memory"
    return {"window": window, "cause": cause, "mitigation": mitigation}
