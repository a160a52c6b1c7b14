"""The memory lens: how much memory the server held while a level ran (docs/metrics.md, The
server's memory and the GPUs).

From the resource sampler's readings over the level's measured phase (bench.host.resources, once a
second; a level shorter than that gets the first reading after it, and says so in `inside`):

- `peak_bytes`, the figure the reports plot against throughput and comparisons judge: the peak,
  over the readings, of the server's process tree's resident memory plus its GPU memory where the
  GPU source lists memory per process (NVML, nvidia-smi). On a CPU machine it is the tree's RSS.
- the parts and the context: the tree's RSS, the tree's GPU memory, all processes' GPU memory on
  the GPUs (on a Mac, metalstat's Metal allocation, which is the GPU's share of unified memory),
  and the machine's used memory (SiliconBench's `mem_used_gb` is this, from metalstat).

A peak sampled once a second can miss a shorter spike; `samples` says how many readings there were.
A framework that reserves memory up front (vLLM's KV cache pool, sized by
`gpu_memory_utilization` or on CPU `VLLM_CPU_KVCACHE_SPACE`; transformers' continuous batching)
shows its reservation in the peak, not what its cache held: the reservation is what the machine
could not give to anything else. Where the framework states the pool in its log (its adapter's
Reservation), `reserved_bytes` gives it beside the peak, so a pool sized up front is told apart
from what the model and its live cache use.
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from bench.core.crosswalk.entry import PeerMetric, none
from bench.core.figures.declare import Doc, LevelFigure, Row, Sampled, median_count, median_of_rounds, total
from bench.core.metrics.stats.blocks import Interval

MIB = 1024**2
_AIPERF = "aiperf/gpu_telemetry/constants.py"
_GUIDELLM = "guidellm/benchmark/schemas/metrics.py"
_VLLM = "vllm/benchmarks/serve.py"
_SILICONBENCH = "scripts/collect_results.py"


class _MemoryRequired(TypedDict):
    peak_bytes: Annotated[int | None, Doc(
        "The server's peak memory over the level: the largest, over the readings, of its process tree's resident "
        "memory plus its GPU memory where the GPU source lists memory per process (NVML, nvidia-smi); null "
        "without a reading of the tree.", minimum=0)]
    peak_rss_bytes: Annotated[int | None, Doc("The process tree's peak resident memory (RSS, summed over its "
                                              "processes).", minimum=0)]
    peak_gpu_bytes: Annotated[int | None, Doc("The process tree's peak GPU memory, summed over its processes and "
                                              "the GPUs; null where the GPU source gives no per-process figure.",
                                              minimum=0)]
    peak_gpu_device_bytes: Annotated[int | None, Doc(
        "The GPUs' peak used memory, every process's (NVML, nvidia-smi; on a Mac metalstat's Metal allocation); "
        "null without a GPU reading.", minimum=0)]
    peak_system_used_bytes: Annotated[int | None, Doc("The machine's peak used memory (total less available), "
                                                      "every process's.", minimum=0)]
    samples: Annotated[int, Doc("Readings the peaks are over; summed across rounds.", minimum=0)]
    inside: Annotated[bool, Doc("False where the level was shorter than the sampling interval and its peaks are "
                                "those of the first reading after it; across rounds, false when any round's was.")]


class Memory(_MemoryRequired, total=False):
    """The server's memory over the level's measured phase, from the resource sampler (bench.core.figures.memory)."""

    reserved_bytes: Annotated[int | None, Doc("Of the peak, what the framework stated in its log that it set aside "
                                              "as it started (a KV cache pool: the server's `reserved`); absent, or "
                                              "null once rounds are pooled, where it states none.", minimum=0)]
    ci95: Annotated[dict[str, Interval], Doc("Per peak of the server's own (peak_bytes, peak_rss_bytes, "
                                             "peak_gpu_bytes), its 95% interval across the rounds (two or more "
                                             "rounds only): the median's, as for a rate. The machine's peaks have "
                                             "none: what else ran moves them.")]


def _peak(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def watch(seen: Sampled) -> Memory | None:
    """The level's block, or None where the sampler read nothing of the server over it."""
    if not seen.memory:
        return None
    readings = seen.memory
    together = [None if m.tree_rss_bytes is None else m.tree_rss_bytes + (m.tree_gpu_bytes or 0) for m in readings]
    block: Memory = {"peak_bytes": _peak(together), "peak_rss_bytes": _peak([m.tree_rss_bytes for m in readings]),
                     "peak_gpu_bytes": _peak([m.tree_gpu_bytes for m in readings]),
                     "peak_gpu_device_bytes": _peak([m.gpu_used_bytes for m in readings]),
                     "peak_system_used_bytes": _peak([m.system_used_bytes for m in readings]),
                     "samples": len(readings), "inside": seen.inside}
    if seen.reserved_bytes is not None:
        block["reserved_bytes"] = seen.reserved_bytes
    return block


SERVER_PEAKS = ("peak_bytes", "peak_rss_bytes", "peak_gpu_bytes")  # the server's own: each with its interval
MACHINE_PEAKS = ("peak_gpu_device_bytes", "peak_system_used_bytes")  # every process's: what else ran moves them
_ROWS = (
    Row("peak_bytes", "Server peak memory", "bytes", digits=0, scale=1 / MIB, shown_unit="MiB", better="lower"),
    Row("reserved_bytes", "Of it, set aside at start", "bytes", digits=0, scale=1 / MIB, shown_unit="MiB"),
    Row("peak_gpu_device_bytes", "GPU memory used, all processes, peak", "bytes", digits=0, scale=1 / MIB,
        shown_unit="MiB"),
    Row("peak_system_used_bytes", "System memory used, peak", "bytes", digits=0, scale=1 / MIB, shown_unit="MiB"),
)
_SERVER, _RESERVED, _DEVICE, _SYSTEM = (f"memory.{row.field}" for row in _ROWS)

FIGURE = LevelFigure(
    key="memory",
    block=Memory,
    description=("The server's memory over the level, from the resource sampler's readings once a second: its "
                 "process tree's peak (RSS plus its GPU memory where listed per process), the GPUs' and the "
                 "machine's used memory at their peaks (bench.core.figures.memory)."),
    watch=watch,
    pool=median_of_rounds(SERVER_PEAKS, {**dict.fromkeys(MACHINE_PEAKS, median_count), "samples": total,
                                         "reserved_bytes": median_count,
                                         "inside": all}, rule=median_count),
    rows=_ROWS,
    peers={
        "vllm": (none(_SERVER, "no memory figure; its server's own metrics give the KV cache's use as a share",
                      _VLLM),
                 none(_RESERVED, "no figure; its server states the KV cache pool in its log", _VLLM),
                 none(_DEVICE, "no GPU memory figure", _VLLM), none(_SYSTEM, "no host memory figure", _VLLM)),
        "aiperf": (none(_SERVER, "its GPU telemetry (DCGM or pynvml) is per GPU, every process's, not per server "
                         "process; no host memory figure", _AIPERF),
                   none(_RESERVED, "no figure of a server's reservation", _AIPERF),
                   PeerMetric(_DEVICE, "NVIDIA GPU Memory Used", "nvidia_memory_used",
                              "DCGM_FI_DEV_FB_USED (or NVML's memory used) per GPU, its statistics over the run",
                              "close", "per GPU, in GB, over the whole profiling run, its max the peak; cellbench's "
                              "is the GPUs' sum over the level's measured phase, in bytes", _AIPERF),
                   none(_SYSTEM, "no host memory figure", _AIPERF)),
        "guidellm": (none(_SERVER, "no memory figure", _GUIDELLM), none(_RESERVED, "no memory figure", _GUIDELLM),
                     none(_DEVICE, "no GPU memory figure", _GUIDELLM),
                     none(_SYSTEM, "no memory figure", _GUIDELLM)),
        "siliconbench": (
            none(_SERVER, "only the machine's used memory (mem_used_gb), not the server's own", _SILICONBENCH),
            none(_RESERVED, "no figure of a server's reservation", _SILICONBENCH),
            none(_DEVICE, "metalstat's gpu_mem_allocated_gb is in its sidecar, but no result or report holds it",
                 _SILICONBENCH),
            PeerMetric(_SYSTEM, "mem_used_gb", "concurrency_results[].mem_used_gb",
                       "max over the level's metalstat trace of the system's used memory, compressed included",
                       "close", "metalstat counts compressed memory as used, to match Activity Monitor; cellbench "
                       "takes total less available (psutil); its trace spans the whole level, warm-up included, "
                       "in GiB to two decimals", _SILICONBENCH)),
    },
)
