"""How busy the GPUs were while a level ran, and whether their clocks were held down
(docs/metrics.md, The server's memory and the GPUs).

From the resource sampler's GPU readings over the level's measured phase (bench.host.gpu: NVML or
nvidia-smi, metalstat on a Mac; once a second): utilisation's mean and maximum over the readings
of every GPU, the graphics (SM) clock's range, and the clock-event reasons NVIDIA reported active.

`throttled` is true where a reading had a reason that means heat or power held the clock down
(bench.host.gpu.THERMAL_OR_POWER: power cap, hardware slowdown, thermal slowdowns, power brake).
Where the source gives no reasons (metalstat), it is true when, among the readings at least
LOADED percent busy, the lowest clock is more than DROP below the highest: the GPU was working
and its clock fell, the sign of throttling SiliconBench's notes name. The reports annotate such a
level `throttled`, and one whose GPU was under IDLE_PERCENT busy on average `gpu-idle`
(bench.core.annotations).
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from bench.core.crosswalk.entry import PeerMetric, none
from bench.core.figures.declare import Doc, LevelFigure, Row, Sampled, by_field, highest, lowest, median, total
from bench.host.gpu import THERMAL_OR_POWER

LOADED = 80.0  # percent busy: a reading taken while the GPU worked
DROP = 0.2  # the clock's fall, as a share of its highest under load, that counts as throttled without reasons
IDLE_PERCENT = 20.0  # a level's mean utilisation under this: `gpu-idle`
_AIPERF = "aiperf/gpu_telemetry/constants.py"
_GUIDELLM = "guidellm/benchmark/schemas/metrics.py"
_VLLM = "vllm/benchmarks/serve.py"
_SILICONBENCH = "scripts/benchmark.py"


class GpuUse(TypedDict):
    """The GPUs over the level's measured phase, from the resource sampler (bench.core.figures.gpu)."""

    util_mean_percent: Annotated[float | None, Doc("Utilisation's mean over the readings of every GPU; across "
                                                   "rounds, their median.", minimum=0, maximum=100)]
    util_max_percent: Annotated[float | None, Doc("Utilisation's largest reading.", minimum=0, maximum=100)]
    clock_min_mhz: Annotated[float | None, Doc("The graphics (SM) clock's lowest reading; null where the source "
                                               "gives none.", minimum=0)]
    clock_max_mhz: Annotated[float | None, Doc("The graphics (SM) clock's highest reading.", minimum=0)]
    throttle_reasons: Annotated[list[str] | None, Doc(
        "The clock-event reasons some reading had active, the idle one left out (NVML's names: sw_power_cap, "
        "hw_slowdown, sw_thermal_slowdown, ...); null where the source reports none (metalstat).")]
    throttled: Annotated[bool, Doc("A heat or power reason was active, or, without reasons, the clock fell more than "
                                   "20% under load (bench.core.figures.gpu).")]
    gpus: Annotated[int, Doc("GPUs read.", minimum=1)]
    samples: Annotated[int, Doc("Readings per GPU; summed across rounds.", minimum=0)]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def throttled(readings: list[tuple[float | None, float | None, tuple[str, ...] | None]]) -> bool:
    """(utilisation, clock, reasons) of each reading: a heat or power reason, or without any reasons
    a clock under load that fell more than DROP below its highest under load."""
    if any(reasons is not None for _, _, reasons in readings):
        return any(set(reasons or ()) & set(THERMAL_OR_POWER) for _, _, reasons in readings)
    loaded = [clock for util, clock, _ in readings if util is not None and util >= LOADED and clock is not None]
    return bool(loaded) and min(loaded) < (1 - DROP) * max(loaded)


def watch(seen: Sampled) -> GpuUse | None:
    """The level's block, or None where the sampler read no GPU over it."""
    if not seen.gpu:
        return None
    utils = [g.util_percent for g in seen.gpu if g.util_percent is not None]
    clocks = [g.clock_mhz for g in seen.gpu if g.clock_mhz is not None]
    known = [g.throttle_reasons for g in seen.gpu if g.throttle_reasons is not None]
    reasons = sorted({r for rs in known for r in rs if r != "gpu_idle"}) if known else None
    indices = {g.index for g in seen.gpu}
    return {"util_mean_percent": _mean(utils), "util_max_percent": max(utils) if utils else None,
            "clock_min_mhz": min(clocks) if clocks else None, "clock_max_mhz": max(clocks) if clocks else None,
            "throttle_reasons": reasons,
            "throttled": throttled([(g.util_percent, g.clock_mhz, g.throttle_reasons) for g in seen.gpu]),
            "gpus": len(indices), "samples": len(seen.gpu) // len(indices)}


def _union(values: list[list[str] | None]) -> list[str] | None:
    known = [v for v in values if v is not None]
    return sorted({r for v in known for r in v}) if known else None


_ROWS = (
    Row("util_mean_percent", "GPU utilisation, mean", "%", digits=0),
    Row("util_max_percent", "GPU utilisation, max", "%", digits=0),
    Row("clock_min_mhz", "GPU clock, lowest", "MHz", digits=0),
)
_MEAN, _MAX, _CLOCK = (f"gpu.{row.field}" for row in _ROWS)

FIGURE = LevelFigure(
    key="gpu",
    block=GpuUse,
    description=("The GPUs while the level ran, from the resource sampler's readings once a second: utilisation's "
                 "mean and maximum, the graphics clock's range and the clock-event reasons active, and whether heat "
                 "or power held the clock down (bench.core.figures.gpu)."),
    watch=watch,
    pool=by_field({"util_mean_percent": median, "util_max_percent": highest, "clock_min_mhz": lowest,
                   "clock_max_mhz": highest, "throttle_reasons": _union, "throttled": any, "gpus": highest,
                   "samples": total}),
    rows=_ROWS,
    peers={
        "vllm": tuple(none(k, "no GPU telemetry", _VLLM) for k in (_MEAN, _MAX, _CLOCK)),
        "aiperf": (
            PeerMetric(_MEAN, "NVIDIA GPU Utilization", "nvidia_gpu_utilization",
                       "DCGM_FI_DEV_GPU_UTIL (or NVML's) per GPU, its average over the run", "close",
                       "per GPU and over the whole profiling run, from a DCGM exporter or pynvml; cellbench's is "
                       "every GPU's readings over the level's measured phase", _AIPERF),
            PeerMetric(_MAX, "NVIDIA GPU Utilization", "nvidia_gpu_utilization",
                       "DCGM_FI_DEV_GPU_UTIL per GPU, its max over the run", "close", "per GPU, over the whole run",
                       _AIPERF),
            none(_CLOCK, "its default telemetry has no clock; a DCGM exporter's SM clock field can be added to its "
                 "metrics file", _AIPERF)),
        "guidellm": tuple(none(k, "no GPU telemetry", _GUIDELLM) for k in (_MEAN, _MAX, _CLOCK)),
        "siliconbench": tuple(none(k, "metalstat's gpu_util and gpu_freq_mhz are in its sidecar, but no result or "
                                   "report holds them", _SILICONBENCH) for k in (_MEAN, _MAX, _CLOCK)),
    },
)
