"""The machine's GPUs as the resource sampler reads them (bench.host.resources), each sample
`{"index", "util_percent", "mem_used_bytes", "power_w", "clock_mhz", "mem_clock_mhz",
"throttle_reasons", ...}`; None where a reading is unavailable.

`clock_mhz` is the graphics (SM) clock now, `mem_clock_mhz` the memory clock, `throttle_reasons`
the names of the clock-event reasons active now (`CLOCK_EVENT_REASONS`: why the clock is below its
maximum; `gpu_idle` alone is a GPU with nothing to do, `THERMAL_OR_POWER` the ones that mean heat or
power held it down), `[]` for none.

On macOS, `metalstat --jsonl -i 1 --show-all` (the package SiliconBench's sidecar uses; no
sudo) runs beside the sampler and each sample takes its newest line: GPU utilisation, frequency,
power, Metal memory allocated and the memory pressure, as
`{"index": 0, "util_percent", "freq_mhz", "clock_mhz", "mem_clock_mhz": None, "throttle_reasons":
None, "power_w", "mem_used_bytes", "mem_pressure_pct", "mem_pressure_level"}` (`green`/`yellow`/`red`;
`freq_mhz` and `clock_mhz` are both its `gpu_freq_mhz`: bench.run.cell_result reads `freq_mhz`).
Elsewhere NVML through `pynvml` when importable (clocks from nvmlDeviceGetClockInfo, reasons from
nvmlDeviceGetCurrentClocksEventReasons, or the older ...ThrottleReasons), else `nvidia-smi
--query-gpu=...` (`clocks_event_reasons.active`, or `clocks_throttle_reasons.active` where the
driver's nvidia-smi predates that name and rejects it: tried once, then remembered).

`Gpu.processes()` is the GPU memory each process holds (NVML's running processes, nvidia-smi's
`--query-compute-apps`), and `tree_gpu_bytes` what of it a process tree holds.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Collection
from typing import Any

import psutil

NVIDIA_SMI_FIELDS = "utilization.gpu,memory.used,power.draw,clocks.sm,clocks.mem"
# The active clock-event reasons' bitmask: named so since driver 535, clocks_throttle_reasons before.
NVIDIA_SMI_REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
CSV = "--format=csv,noheader,nounits"
NVIDIA_SMI_APPS = ["--query-compute-apps=pid,used_memory", CSV]  # one line per (process, GPU), MiB
METALSTAT = ["--jsonl", "-i", "1", "--show-all"]
GPU_TIMEOUT_S = 0.8
GIB = 1024**3
PLATFORM = sys.platform  # a module attribute, so tests on Linux can take the macOS path


# NVML's clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*; the
# bitmask nvidia-smi prints), as nvml.h defines them; board_limit and reliability are the newer
# headers' (their values as nvidia-ml-py 13.615 defines them).
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting", 0x200: "board_limit", 0x400: "reliability",
}
# The reasons that mean heat or power held the clock down (power cap, thermal or power-brake slowdown).
THERMAL_OR_POWER = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake_slowdown"})


def decode_reasons(mask: int | None) -> list[str] | None:
    """The names of the bits set in a clock-event reasons bitmask, lowest bit first (`[]`: none, the
    clock as high as it may go); a bit NVML has not named reads as its hex value, e.g. `0x800`."""
    if mask is None:
        return None
    return [CLOCK_EVENT_REASONS.get(1 << bit, hex(1 << bit)) for bit in range(mask.bit_length()) if mask >> bit & 1]


def nvidia_smi_query(reasons: str) -> list[str]:
    """The `nvidia-smi` arguments of one GPU sample, asking for the reasons' bitmask by `reasons`."""
    return [f"--query-gpu={NVIDIA_SMI_FIELDS},{reasons}", CSV]


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
            "clock_mhz": number("gpu_freq_mhz"), "mem_clock_mhz": None, "throttle_reasons": None,
            "power_w": number("gpu_w"), "mem_used_bytes": None if allocated is None else int(allocated * GIB),
            "mem_pressure_pct": number("mem_pressure_pct"), "mem_pressure_level": data.get("mem_pressure_level")}


def parse_nvidia_smi(text: str) -> list[dict]:
    """GPUs from `nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw,clocks.sm,clocks.mem,
    clocks_event_reasons.active --format=csv,noheader,nounits` (or `clocks_throttle_reasons.active`),
    one line per GPU in index order.

    memory.used is MiB, the clocks MHz, the reasons a hex bitmask (`0x0000000000000004`); a field
    nvidia-smi cannot read (`[N/A]`, `[Not Supported]`, e.g. power on some boards) becomes None, and
    so does a field missing at the end of a line.
    """

    def num(field: str) -> float | None:
        try:
            return float(field)
        except ValueError:
            return None

    def mask(field: str) -> int | None:
        try:
            return int(field, 16) if field.lower().startswith("0x") else None
        except ValueError:
            return None

    gpus = []
    for index, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3:
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        fields += [""] * (6 - len(fields))
        util, mem_mib, power, clock, mem_clock = (num(f) for f in fields[:5])
        gpus.append({
            "index": index,
            "util_percent": util,
            "mem_used_bytes": int(mem_mib * (1 << 20)) if mem_mib is not None else None,
            "power_w": power,
            "clock_mhz": clock,
            "mem_clock_mhz": mem_clock,
            "throttle_reasons": decode_reasons(mask(fields[5])),
        })
    return gpus


def parse_compute_apps(text: str) -> dict[int, int | None]:
    """GPU memory per pid, summed over the GPUs, from `nvidia-smi --query-compute-apps=pid,used_memory
    --format=csv,noheader,nounits` (one line per process and GPU, MiB; `[N/A]` where the driver cannot
    say, which makes that pid's figure None). No line: no process holds a compute context."""
    held: dict[int, int | None] = {}
    for line in text.splitlines():
        if not line.strip() or line.strip().lower().startswith("no running"):
            continue
        pid_field, _, mem_field = (f.strip() for f in line.partition(","))
        try:
            pid = int(pid_field)
        except ValueError:
            raise ValueError(f"unexpected nvidia-smi compute-apps line: {line!r}") from None
        try:
            mib: float | None = float(mem_field)
        except ValueError:
            mib = None
        add_held(held, pid, None if mib is None else int(mib * (1 << 20)))
    return held


def add_held(held: dict[int, int | None], pid: int, nbytes: int | None) -> None:
    """Add one (process, GPU) figure to `pid`'s sum; unknown on any GPU makes the sum unknown."""
    before = held.get(pid, 0)
    held[pid] = None if before is None or nbytes is None else before + nbytes


def tree_gpu_bytes(held: dict[int, int | None], tree: Collection[int],
                   known: Callable[[int], bool] = psutil.pid_exists) -> int | None:
    """The GPU memory the pids of `tree` hold, from the GPUs' per-process figures `held`
    (`Gpu.processes()`): 0 when the tree holds none, None when that cannot be told.

    The driver does not know PID namespaces: in a container without the host's (`docker run`
    without `--pid=host`) NVML and nvidia-smi list the host's pids, which are not this tree's,
    and a summed 0 would say the server holds no GPU memory while it may hold most of it. So the
    figure counts only when at least one listed pid is known here (is in the tree, or exists in
    this PID namespace); otherwise, an empty listing included (nvidia-smi leaves out pids it
    cannot see, so a container's listing can be empty while a server holds memory), it is None.
    A tree pid listed with no figure (`[N/A]`, NVML's not-available) makes it None too. A host
    pid that happens to be a live pid of the container's namespace would pass for known: rare,
    and not ruled out here."""
    if not any(pid in tree or known(pid) for pid in held):
        return None
    mine = [held[pid] for pid in tree if pid in held]
    return None if any(b is None for b in mine) else sum(b for b in mine if b is not None)


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
        self._nvml_reasons: Any = None  # the pynvml function that read the reasons, once one has
        self._smi_reasons: str | None = None  # the reasons' field name this nvidia-smi took, once it has
        self._metal: Metalstat | None = None
        self._smi: str | None = None
        if PLATFORM == "darwin" and (metalstat := shutil.which("metalstat")):
            self._metal, self.kind = Metalstat(metalstat), "metalstat"
            return
        try:
            import pynvml  # type: ignore[import-not-found]

            self._use_nvml(pynvml)
            return
        except Exception:  # noqa: BLE001 - no NVML (not installed, no driver): try nvidia-smi
            self._nvml = None
        self._smi = shutil.which("nvidia-smi")
        if self._smi:
            self.kind = "nvidia-smi"

    def _use_nvml(self, nv: Any) -> None:
        nv.nvmlInit()
        self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        self._nvml, self.kind = nv, "nvml"

    def close(self) -> None:
        if self._metal is not None:
            self._metal.close()

    def read(self) -> list[dict] | None:
        if self._metal is not None:
            return None if self._metal.latest is None else [parse_metalstat(self._metal.latest)]
        if self.kind == "nvml":
            return [self._nvml_entry(i, h) for i, h in enumerate(self._handles)]
        if self.kind == "nvidia-smi" and self._smi:
            return parse_nvidia_smi(self._smi_gpus())
        return None

    def processes(self) -> dict[int, int | None] | None:
        """GPU memory per pid (bytes, summed over the GPUs; None for a pid whose figure the driver
        cannot give) of the processes that hold a GPU context now: NVML's compute and graphics
        processes, or nvidia-smi's compute apps. None where the source has no per-process figures
        (metalstat, no GPU)."""
        if self.kind == "nvml":
            held: dict[int, int | None] = {}
            for handle in self._handles:
                on_this_gpu: set[int] = set()
                for read in (self._nvml.nvmlDeviceGetComputeRunningProcesses,
                             self._nvml.nvmlDeviceGetGraphicsRunningProcesses):
                    for proc in read(handle):
                        if proc.pid not in on_this_gpu:  # a process with both contexts is listed twice
                            on_this_gpu.add(proc.pid)
                            add_held(held, int(proc.pid), None if proc.usedGpuMemory is None
                                     else int(proc.usedGpuMemory))
            return held
        if self.kind == "nvidia-smi" and self._smi:
            done = self._run_smi(NVIDIA_SMI_APPS)
            if done.returncode != 0:
                raise RuntimeError(f"nvidia-smi exit code {done.returncode}: {done.stderr.strip()[:200]}")
            return parse_compute_apps(done.stdout)
        return None

    def _nvml_entry(self, index: int, handle: Any) -> dict:
        nv = self._nvml

        def optional(read: Callable[[], Any]) -> Any:
            try:
                return read()
            except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin: this board has no such reading
                return None

        return {
            "index": index,
            "util_percent": float(nv.nvmlDeviceGetUtilizationRates(handle).gpu),
            "mem_used_bytes": int(nv.nvmlDeviceGetMemoryInfo(handle).used),
            "power_w": optional(lambda: nv.nvmlDeviceGetPowerUsage(handle) / 1000.0),  # mW
            "clock_mhz": optional(lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))),
            "mem_clock_mhz": optional(lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))),
            "throttle_reasons": decode_reasons(optional(lambda: self._reasons(handle))),
        }

    def _reasons(self, handle: Any) -> int:
        """The active clock-event reasons' bitmask: through nvmlDeviceGetCurrentClocksEventReasons
        (driver 535 on), else the older nvmlDeviceGetCurrentClocksThrottleReasons (deprecated, to go
        in CUDA 14); whichever answered first is asked from then on."""
        if self._nvml_reasons is not None:
            return int(self._nvml_reasons(handle))
        error: Exception = RuntimeError("pynvml has no clock-event reasons function")
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if (read := getattr(self._nvml, name, None)) is None:
                continue
            try:
                mask = int(read(handle))
            except Exception as exc:  # noqa: BLE001 - e.g. NVMLError_FunctionNotFound from an older driver
                error = exc
                continue
            self._nvml_reasons = read
            return mask
        raise error

    def _run_smi(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        assert self._smi is not None
        return subprocess.run([self._smi, *args], check=False, capture_output=True, text=True, timeout=GPU_TIMEOUT_S)

    def _smi_gpus(self) -> str:
        """nvidia-smi's GPU lines, asking for the reasons by the name it took before, or by the new
        name and, when it rejects that field (`Field "..." is not a valid field to query.`), once
        by the old one."""
        names = [self._smi_reasons] if self._smi_reasons else list(NVIDIA_SMI_REASONS)
        for name in names:
            done = self._run_smi(nvidia_smi_query(name))
            if done.returncode == 0:
                self._smi_reasons = name
                return done.stdout
            if f'"{name}"' not in done.stdout + done.stderr:  # failed for another reason: the old name would too
                break
        message = (done.stderr or done.stdout).strip()[:200]
        raise RuntimeError(f"nvidia-smi exit code {done.returncode}: {message}")
