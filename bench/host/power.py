"""The power sources the resource sampler reads once a second, for a level's energy (bench.core.lenses.energy).

- **GPU power**: the watts of every GPU, summed, as the sampler's GPU entries hold them (NVML,
  `nvidia-smi --query-gpu=power.draw`, or metalstat on Apple).
- **CPU package energy**: Linux RAPL, the cumulative `energy_uj` counter of every package domain
  under /sys/class/powercap (`intel-rapl:N`; AMD's packages appear there too), its wrap-around
  (`max_energy_range_uj`) undone. Readable by root only on kernels with the fix for
  CVE-2020-8694, so often absent; a CPU VM usually has neither.

`idle_power()` reads the same sources for a few seconds, before a server starts, for the idle
baseline a level's power can be set against: what the devices draw with nothing of ours running.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from bench.base.doc import Doc
from bench.host.gpu import Gpu

POWERCAP = Path("/sys/class/powercap")
Device = Literal["gpu", "cpu"]  # the GPUs' power, or the CPU packages' energy counters
PACKAGE = re.compile(r"intel-rapl:\d+")  # a package domain; intel-rapl:N:M are its sub-domains


@dataclass(frozen=True)
class PowerSample:
    """One reading of one source: the GPUs' watts summed (`gpu`), or the CPU packages' joules
    since the counters' origin (`cpu`), at wall time `wall`."""

    device: Device
    wall: float
    value: float


class Rapl:
    """The package domains' energy counters, unwrapped: `joules()` only grows."""

    def __init__(self, root: Path | None = None) -> None:
        root = root or POWERCAP
        self._domains: list[tuple[Path, float]] = []  # (energy_uj, its range in uJ)
        for domain in sorted(root.glob("intel-rapl:*")) if root.is_dir() else []:
            try:
                if PACKAGE.fullmatch(domain.name):
                    int((domain / "energy_uj").read_text())
                    self._domains.append((domain / "energy_uj", float((domain / "max_energy_range_uj").read_text())))
            except (OSError, ValueError):  # unreadable (not root): not a source
                continue
        self._last: list[float] = []
        self._wraps: list[int] = []

    def __bool__(self) -> bool:
        return bool(self._domains)

    def read(self) -> dict[str, float]:
        """The counters now, as the sampler stores them: {"joules", "wall"} (the time of the read:
        the sample's own stamp is taken before its other sources are read)."""
        joules = self.joules()
        return {"joules": joules, "wall": time.time()}

    def joules(self) -> float:
        now = [float(path.read_text()) for path, _ in self._domains]
        if not self._last:
            self._wraps = [0] * len(now)
        for i, (value, last) in enumerate(zip(now, self._last or now, strict=True)):
            self._wraps[i] += value < last  # the counter wrapped at its range since the last read
        self._last = now
        return sum(v + w * r for v, w, (_, r) in zip(now, self._wraps, self._domains, strict=True)) / 1e6


def readings(sample: dict) -> list[PowerSample]:
    """The power in one resource sample (bench.host.resources): GPU watts at the sample's stamp,
    the CPU counters at their own read."""
    watts = [g["power_w"] for g in sample.get("gpu", ()) if g.get("power_w") is not None]
    cpu = sample.get("cpu_energy")
    return ([PowerSample("gpu", sample["wall"], sum(watts))] if watts else []) + (
        [PowerSample("cpu", cpu["wall"], cpu["joules"])] if cpu else [])


class IdlePower(TypedDict):
    """A device's power with nothing of the benchmark's running, before a server starts (bench.host.power)."""

    device: Annotated[Device, Doc("`gpu`: the GPUs' power summed; `cpu`: the CPU packages' (RAPL).")]
    source: Annotated[str, Doc("Where it was read: `nvml`, `nvidia-smi`, `metalstat` or `rapl`.")]
    watts: Annotated[float, Doc("Mean watts over the span: the readings' mean (GPU), the counters' joules over"
                                " the seconds between their first and last read (RAPL).", minimum=0)]
    samples: Annotated[int, Doc("Readings taken.", minimum=1)]
    seconds: Annotated[float, Doc("Seconds from the first reading to the last.", minimum=0)]


def idle_power(seconds: float = 3.0, interval_s: float = 0.5) -> list[IdlePower]:
    """Each power source's mean over `seconds`, read every `interval_s`: the GPUs' watts summed
    through bench.host.gpu.Gpu (as the sampler reads them) and the RAPL packages' energy as a rate.

    Call it before a server starts: nothing of the benchmark's runs on the GPU then, so the GPU
    figure is its idle draw (another user's work on a shared GPU would count too); the CPU figure
    includes this process and whatever else the machine runs. `[]` at once, without waiting, on a
    machine with no power source (a CPU VM: no GPU, no readable RAPL). A source that fails is
    dropped, keeping its readings so far, and this never raises. A GPU entry needs one reading
    with power, a CPU entry two (a rate)."""
    gpu: Gpu | None = None
    try:
        gpu = Gpu()
    except Exception:  # noqa: BLE001 - no GPU power then
        gpu = None
    rapl = Rapl()
    try:
        if (gpu is None or gpu.kind is None) and not rapl:
            return []
        return _measure(gpu if gpu is not None and gpu.kind else None, rapl or None, seconds, interval_s)
    finally:
        if gpu is not None:
            with contextlib.suppress(Exception):
                gpu.close()


def _measure(gpu: Gpu | None, rapl: Rapl | None, seconds: float, interval_s: float) -> list[IdlePower]:
    source = gpu.kind if gpu is not None else None
    gpu_reads: list[tuple[float, float]] = []  # (monotonic, the GPUs' watts summed)
    cpu_reads: list[tuple[float, float]] = []  # (monotonic, the packages' joules)
    t0 = time.monotonic()
    k = 0
    while True:
        if gpu is not None:
            try:
                watts = [g["power_w"] for g in gpu.read() or () if g.get("power_w") is not None]
            except Exception:  # noqa: BLE001 - an unreadable source is left out, never raised
                gpu = None
            else:
                gpu_reads += [(time.monotonic(), sum(watts))] if watts else []
        if rapl is not None:
            try:
                cpu_reads.append((time.monotonic(), rapl.joules()))
            except (OSError, ValueError):
                rapl = None
        k += 1
        due = t0 + k * interval_s  # the k-th reading's time, phase kept
        if (gpu is None and rapl is None) or due > t0 + seconds:  # no source left, or the span is over
            break
        time.sleep(max(0.0, due - time.monotonic()))
    found: list[IdlePower] = []
    if gpu_reads and source:
        found.append({"device": "gpu", "source": source, "samples": len(gpu_reads),
                      "watts": round(sum(w for _, w in gpu_reads) / len(gpu_reads), 3),
                      "seconds": round(gpu_reads[-1][0] - gpu_reads[0][0], 3)})
    if len(cpu_reads) >= 2 and (span := cpu_reads[-1][0] - cpu_reads[0][0]) > 0:
        found.append({"device": "cpu", "source": "rapl", "samples": len(cpu_reads),
                      "watts": round((cpu_reads[-1][1] - cpu_reads[0][1]) / span, 3), "seconds": round(span, 3)})
    return found
