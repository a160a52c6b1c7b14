"""The power sources the resource sampler reads once a second, for a level's energy (bench.core.energy).

- **GPU power**: the watts of every GPU, summed, as the sampler's GPU entries hold them (NVML,
  `nvidia-smi --query-gpu=power.draw`, or metalstat on Apple).
- **CPU package energy**: Linux RAPL, the cumulative `energy_uj` counter of every package domain
  under /sys/class/powercap (`intel-rapl:N`; AMD's packages appear there too), its wrap-around
  (`max_energy_range_uj`) undone. Readable by root only on kernels with the fix for
  CVE-2020-8694, so often absent; a CPU VM usually has neither.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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
