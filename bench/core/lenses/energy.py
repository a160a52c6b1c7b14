"""Energy per output token of a level, from the power the resource sampler read while it ran
(bench.host.power: GPU watts, CPU package joules).

GPU: the level's joules are the integral of the GPUs' summed power over the level's wall window,
the power taken as piecewise linear between samples and interpolated at both ends. CPU (RAPL):
the package counters' difference, interpolated at both ends. A source counts for a level only
when its samples bracket the window (one at or before its start, one at or after its end): the
sampler reads once as it starts and once as it stops, so every level of a server is bracketed.
Each entry says the sampling interval and how many samples fell inside the window: a 2 s level
of 1 s samples is an estimate, a 60 s level a good one. Where no source exists the block says so
in `note` and has no entries.

Above idle: where the machine's power was read idle before the server started
(bench.host.power.idle_power, `servers[].idle_power`), each source also gives the level's energy
less that idle power over the level's wall time, and that per output token: what serving added,
without the GPU's (or the packages') floor, which a busy machine and an idle one both pay.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

from bench.core.level_run import LevelRun
from bench.core.metrics.blocks import Level
from bench.core.metrics.server_view import Energy, EnergySource
from bench.host.power import Device, IdlePower, PowerSample

NO_SOURCE = ("no power source: no GPU power reading (NVML, nvidia-smi, metalstat) and no readable RAPL "
             "energy counter under /sys/class/powercap")


def wall_span(run: LevelRun) -> tuple[float, float]:
    """The level's measured phase (perf_counter) on the wall clock, as the sampler stamps its power."""
    to_wall = time.time() - time.perf_counter()
    return run.t_start + to_wall, run.t_end + to_wall


def with_energy(windows: Sequence[tuple[Level, float, float]], samples: Sequence[PowerSample],
                gpu_source: str | None, interval_s: float, idle: Sequence[IdlePower] = ()) -> None:
    """Each level of `windows` (a level and its wall_span) gets its `energy` block."""
    for level, start, end in windows:
        level["energy"] = level_energy(samples, start, end, level["output_tokens_total"], gpu_source=gpu_source,
                                       interval_s=interval_s, idle=idle)


def level_energy(samples: Sequence[PowerSample], start: float, end: float, output_tokens: int, *,
                 gpu_source: str | None, interval_s: float, idle: Sequence[IdlePower] = ()) -> Energy:
    """The `energy` block of a level whose measured phase ran over wall times [start, end], with its
    energy above the `idle` power of each device read idle."""
    idle_w = {i["device"]: i["watts"] for i in idle}
    sources: list[EnergySource] = []
    unbracketed: list[str] = []
    kinds: tuple[tuple[Device, str | None], ...] = (("gpu", gpu_source), ("cpu", "rapl"))
    for device, source in kinds:
        points = [(s.wall, s.value) for s in samples if s.device == device]
        if not points:
            continue
        if not points[0][0] <= start <= end <= points[-1][0]:
            unbracketed.append(device)
            continue
        joules = _integral(points, start, end) if device == "gpu" else _at(points, end) - _at(points, start)
        wall = end - start
        entry: EnergySource = {
            "device": device, "source": source or "unknown", "interval_s": interval_s,
            "samples": sum(start <= t <= end for t, _ in points), "wall_s": wall, "joules": joules,
            "avg_w": joules / wall if wall > 0 else None, "output_tokens": output_tokens,
            "j_per_output_token": joules / output_tokens if output_tokens else None}
        if device in idle_w:
            _add_above(entry, entry["joules"] - idle_w[device] * wall)
        sources.append(entry)
    if sources:
        return {"sources": sources}
    return {"sources": [], "note": f"no {' or '.join(unbracketed)} power sample after the level's end" if unbracketed
            else NO_SOURCE}


def combined(blocks: Sequence[Energy]) -> Energy:
    """The rounds' blocks as one: per source, joules, wall time, samples and tokens summed."""
    by_source: dict[tuple[str, str], list[EnergySource]] = {}
    for block in blocks:
        for found in block["sources"]:
            by_source.setdefault((found["device"], found["source"]), []).append(found)
    sources: list[EnergySource] = []
    for entries in by_source.values():
        joules, wall = sum(e["joules"] for e in entries), sum(e["wall_s"] for e in entries)
        tokens = sum(e["output_tokens"] for e in entries)
        first = entries[0]
        entry: EnergySource = {
            "device": first["device"], "source": first["source"], "interval_s": first["interval_s"],
            "samples": sum(e["samples"] for e in entries), "wall_s": wall, "joules": joules,
            "avg_w": joules / wall if wall > 0 else None, "output_tokens": tokens,
            "j_per_output_token": joules / tokens if tokens else None}
        if all("joules_above_idle" in e for e in entries):  # each round over its own server's idle reading
            _add_above(entry, sum(e["joules_above_idle"] for e in entries))
        sources.append(entry)
    return {"sources": sources} if sources else {"sources": [], "note": blocks[0].get("note", NO_SOURCE)}


def _add_above(entry: EnergySource, above: float) -> None:
    """`entry` with its energy above idle, `above` joules; its idle_w the power that leaves (rounds:
    their idle readings weighted by their wall times); nothing over no wall time."""
    if entry["wall_s"] <= 0:
        return
    entry["idle_w"] = (entry["joules"] - above) / entry["wall_s"]
    entry["joules_above_idle"] = above
    entry["j_per_output_token_above_idle"] = above / entry["output_tokens"] if entry["output_tokens"] else None


def cell_text(block: Energy) -> str:
    """The block in a report's table cell: "0.512 (gpu nvml, 301.2 W)" per source, with
    "; 0.198 above 81.0 W idle" where the idle power was read, or why none."""
    if not block["sources"]:
        return "none: no power source" if block.get("note") == NO_SOURCE else f"none: {block.get('note')}"
    return "; ".join(_source_text(e) for e in block["sources"])


def _source_text(e: EnergySource) -> str:
    if e["j_per_output_token"] is None or e["avg_w"] is None:
        return f"N/A ({e['device']} {e['source']}: no output tokens)"
    above = e.get("j_per_output_token_above_idle")
    idle = f", {above:.4g} above {e['idle_w']:.1f} W idle" if above is not None and "idle_w" in e else ""
    return f"{e['j_per_output_token']:.4g} ({e['device']} {e['source']}, {e['avg_w']:.1f} W{idle})"


def _at(points: Sequence[tuple[float, float]], t: float) -> float:
    """The piecewise-linear value of `points` (time-ordered) at `t`, within their span."""
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return points[-1][1] if t >= points[-1][0] else points[0][1]


def _integral(points: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """The integral over [start, end] of the piecewise-linear curve through `points` (trapezoids)."""
    knots = [(start, _at(points, start)), *((t, v) for t, v in points if start < t < end), (end, _at(points, end))]
    return sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in itertools.pairwise(knots))
