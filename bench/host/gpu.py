"""The machine's GPUs as the resource sampler reads them (bench.host.resources), each sample
`{"index", "util_percent", "mem_used_bytes", "power_w", ...}`.

On macOS, `metalstat --jsonl -i 1 --show-all` (the package SiliconBench's sidecar uses; no
sudo) runs beside the sampler and each sample takes its newest line: GPU utilisation, frequency,
power, Metal memory allocated and the memory pressure, as
`{"index": 0, "util_percent", "freq_mhz", "power_w", "mem_used_bytes", "mem_pressure_pct",
"mem_pressure_level"}` (`green`/`yellow`/`red`). Elsewhere NVML through `pynvml` when importable,
else `nvidia-smi --query-gpu=...`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import threading
from typing import Any

NVIDIA_SMI_QUERY = ["--query-gpu=utilization.gpu,memory.used,power.draw", "--format=csv,noheader,nounits"]
METALSTAT = ["--jsonl", "-i", "1", "--show-all"]
GPU_TIMEOUT_S = 0.8
GIB = 1024**3
PLATFORM = sys.platform  # a module attribute, so tests on Linux can take the macOS path


def parse_metalstat(line: str) -> dict:
    """One `metalstat --jsonl` sample (a flat object; null where unavailable; `_gb` in GiB) as a
    GPU entry of ours; ValueError for a line that is not one."""
    data = json.loads(line)
    if not isinstance(data, dict) or "gpu_util" not in data:
        raise ValueError(f"not a metalstat sample: {line[:120]!r}")

    def number(key: str) -> float | None:
        value = data.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    allocated = number("gpu_mem_allocated_gb")
    return {"index": 0, "util_percent": number("gpu_util"), "freq_mhz": number("gpu_freq_mhz"),
            "power_w": number("gpu_w"), "mem_used_bytes": None if allocated is None else int(allocated * GIB),
            "mem_pressure_pct": number("mem_pressure_pct"), "mem_pressure_level": data.get("mem_pressure_level")}


def parse_nvidia_smi(text: str) -> list[dict]:
    """GPUs from `nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw --format=csv,noheader,nounits`.

    memory.used is MiB; `[N/A]` (e.g. power on some boards) becomes None.
    """

    def num(field: str) -> float | None:
        try:
            return float(field.strip())
        except ValueError:
            return None

    gpus = []
    for index, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3:
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        util, mem_mib, power = (num(f) for f in fields[:3])
        gpus.append({
            "index": index,
            "util_percent": util,
            "mem_used_bytes": int(mem_mib * (1 << 20)) if mem_mib is not None else None,
            "power_w": power,
        })
    return gpus


class Metalstat:
    """`metalstat --jsonl` running beside the sampler; `latest` is its newest sample line."""

    def __init__(self, executable: str) -> None:
        self.latest: str | None = None
        self._proc = subprocess.Popen([executable, *METALSTAT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        threading.Thread(target=self._follow, name="metalstat", daemon=True).start()

    def _follow(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.strip():
                self.latest = line

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


class Gpu:
    """metalstat on macOS, else NVML when importable, else nvidia-smi; `None` from `read()` when
    there is no GPU (or no sample yet)."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self._nvml: Any = None  # the pynvml module, once it has initialised
        self._handles: list = []
        self._metal: Metalstat | None = None
        if PLATFORM == "darwin" and (metalstat := shutil.which("metalstat")):
            self._metal, self.kind = Metalstat(metalstat), "metalstat"
            return
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self._nvml, self.kind = pynvml, "nvml"
            return
        except Exception:  # noqa: BLE001 - no NVML (not installed, no driver): try nvidia-smi
            self._nvml = None
        self._smi: str | None = shutil.which("nvidia-smi")
        if self._smi:
            self.kind = "nvidia-smi"

    def close(self) -> None:
        if self._metal is not None:
            self._metal.close()

    def read(self) -> list[dict] | None:
        if self._metal is not None:
            return None if self._metal.latest is None else [parse_metalstat(self._metal.latest)]
        if self.kind == "nvml":
            nv = self._nvml
            gpus = []
            for i, h in enumerate(self._handles):
                power = None
                with contextlib.suppress(Exception):
                    power = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
                gpus.append({
                    "index": i,
                    "util_percent": float(nv.nvmlDeviceGetUtilizationRates(h).gpu),
                    "mem_used_bytes": int(nv.nvmlDeviceGetMemoryInfo(h).used),
                    "power_w": power,
                })
            return gpus
        if self.kind == "nvidia-smi" and self._smi:
            done = subprocess.run(
                [self._smi, *NVIDIA_SMI_QUERY], check=False, capture_output=True, text=True, timeout=GPU_TIMEOUT_S
            )
            if done.returncode != 0:
                raise RuntimeError(f"nvidia-smi exit code {done.returncode}: {done.stderr.strip()[:200]}")
            return parse_nvidia_smi(done.stdout)
        return None
