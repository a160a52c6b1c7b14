"""The resource sampler's samples as typed series, for figures per level: memory and each GPU over time.

`ResourceSampler.memory` holds one `MemorySample` per sample and `ResourceSampler.gpu` one
`GpuSample` per GPU per sample (bench.host.resources), beside `ResourceSampler.power`
(bench.host.power). Each is taken from the sample as written to the sidecar: None where that
sample had no such reading.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemorySample:
    """Memory at wall time `wall` (epoch seconds), in bytes."""

    wall: float
    tree_rss_bytes: int | None  # the server's process tree's resident memory; None without a tree to sample
    system_used_bytes: int | None  # the machine's memory in use (total - available)
    gpu_used_bytes: int | None  # all GPUs, any process, summed; None without a GPU memory reading
    tree_gpu_bytes: int | None  # the server's tree's GPU memory, None when unknown (bench.host.gpu.tree_gpu_bytes)


@dataclass(frozen=True)
class GpuSample:
    """One GPU at wall time `wall` (epoch seconds); None where its source could not read it."""

    wall: float
    index: int
    util_percent: float | None
    clock_mhz: float | None  # the graphics (SM) clock
    mem_clock_mhz: float | None
    throttle_reasons: tuple[str, ...] | None  # the active clock-event reasons (bench.host.gpu); () for none


def memory_sample(sample: dict) -> MemorySample:
    """The memory figures of one resource sample."""
    tree, system = sample.get("tree") or {}, sample.get("system") or {}
    used = [g["mem_used_bytes"] for g in sample.get("gpu", ()) if g.get("mem_used_bytes") is not None]
    return MemorySample(wall=sample["wall"], tree_rss_bytes=tree.get("rss_bytes"),
                        system_used_bytes=system.get("mem_used_bytes"), gpu_used_bytes=sum(used) if used else None,
                        tree_gpu_bytes=tree.get("gpu_mem_bytes"))


def gpu_samples(sample: dict) -> list[GpuSample]:
    """One `GpuSample` per GPU entry of one resource sample; none without a GPU reading."""
    return [GpuSample(wall=sample["wall"], index=g["index"], util_percent=g.get("util_percent"),
                      clock_mhz=g.get("clock_mhz"), mem_clock_mhz=g.get("mem_clock_mhz"),
                      throttle_reasons=None if (reasons := g.get("throttle_reasons")) is None else tuple(reasons))
            for g in sample.get("gpu", ())]
