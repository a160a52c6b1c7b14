"""A resource sidecar for one server: what its process tree and the machine used, once a second.

`ResourceSampler(pid, path)` is a context manager running a daemon thread. Each sample is one
JSON line in `path`:

    {"t": 1.002, "wall": 1767000000.123,
     "tree": {"alive": true, "pids": 3, "cpu_percent": 187.5, "rss_bytes": 1234567},
     "system": {"mem_total_bytes": ..., "mem_used_bytes": ..., "mem_available_bytes": ...},
     "pressure": {"some_avg10": 0.0, "full_avg10": 0.0},           # Linux PSI, when present
     "cgroup": {"usage_bytes": ...},                                 # under --memory-limit
     "gpu": [{"index": 0, "util_percent": 97.0, "mem_used_bytes": ..., "power_w": 301.2}],
     "cpu_energy": {"joules": 81234.5, "wall": 1767000000.125}}     # RAPL packages, where readable

`t` is monotonic seconds since the sampler started, `wall` epoch seconds. Keys whose source is
absent on this machine are left out. `peak` holds the peaks for the result file and `summary()`
the whole account (samples, peaks, errors).

It never raises into the benchmark: an error is recorded once per source (`errors`) and sampling
goes on; a server that exits mid-run gives `"alive": false` samples. `stop()` (or leaving the
`with`) returns within about a second even while a GPU query hangs: the thread is a daemon and the
GPU query has its own timeout.

GPU: on macOS, `metalstat --jsonl -i 1 --show-all` (the package SiliconBench's sidecar uses; no
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import psutil

from bench.host.power import PowerSample, Rapl, readings

if TYPE_CHECKING:
    from bench.host.memlimit import MemoryCgroup

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


def parse_pressure(text: str) -> dict:
    """`some avg10=0.12 ...` / `full avg10=...` from /proc/pressure/memory -> {some_avg10, full_avg10}."""
    out = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        for part in rest.split():
            key, _, value = part.partition("=")
            if key == "avg10" and kind in ("some", "full"):
                out[f"{kind}_avg10"] = float(value)
    return out


class _Metalstat:
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


class _Gpu:
    """metalstat on macOS, else NVML when importable, else nvidia-smi; `None` from `read()` when
    there is no GPU (or no sample yet)."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self._nvml: Any = None  # the pynvml module, once it has initialised
        self._handles: list = []
        self._metal: _Metalstat | None = None
        if PLATFORM == "darwin" and (metalstat := shutil.which("metalstat")):
            self._metal, self.kind = _Metalstat(metalstat), "metalstat"
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


class ResourceSampler:
    """Sample `pid`'s process tree and the machine every `interval_s` into JSONL at `path`."""

    def __init__(
        self,
        pid: int | None,
        path: Path,
        *,
        interval_s: float = 1.0,
        cgroup: MemoryCgroup | None = None,
        on_tree: Callable[[dict[int, str]], None] | None = None,
        gpu: bool = True,
    ):
        self.pid = pid
        self.path = Path(path)
        self.interval_s = interval_s
        self.cgroup = cgroup
        self.on_tree = on_tree  # e.g. ServerProcess.note_tree: the pids seen, for OOM evidence
        self.samples = 0
        self.errors: list[str] = []
        self.peak: dict = {"tree_rss_bytes": 0, "system_mem_used_bytes": 0, "gpu_mem_used_bytes": None}
        self._error_keys: set[str] = set()
        self._procs: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._gpu_wanted = gpu
        self._rapl: Rapl | None = None
        self.power: list[PowerSample] = []  # the samples' power readings, for energy per token (bench.core.energy)
        self._gpu: _Gpu | None = None
        self._out: IO[str] | None = None
        self._lock = threading.Lock()

    # --- lifecycle ---

    def start(self) -> ResourceSampler:
        if self._thread is not None:
            return self
        self._t0 = time.monotonic()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._out = self.path.open("w", buffering=1)
        except OSError as exc:
            self._error("output", exc)
        self._thread = threading.Thread(target=self._run, name=f"resources-{self.pid}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 1.0) -> dict:
        """Stop sampling (returns within about `timeout_s`) and return `summary()`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with self._lock:
            if self._out is not None and (self._thread is None or not self._thread.is_alive()):
                with contextlib.suppress(OSError):
                    self._out.close()
                self._out = None
        return self.summary()

    def __enter__(self) -> ResourceSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def summary(self) -> dict:
        return {
            "path": str(self.path),
            "interval_s": self.interval_s,
            "samples": self.samples,
            "peak": dict(self.peak),
            "gpu_source": self._gpu.kind if self._gpu is not None else None,
            "errors": list(self.errors),
        }

    # --- the thread ---

    def _run(self) -> None:
        self._rapl = Rapl()
        if self._gpu_wanted:
            try:
                self._gpu = _Gpu()
            except Exception as exc:  # noqa: BLE001 - never into the benchmark
                self._error("gpu", exc)
        while True:
            try:
                self._sample_once()
            except Exception as exc:  # noqa: BLE001 - never into the benchmark; noted once, on we go
                self._error("sample", exc)
            # Keep the phase: sample k is due at t0 + k * interval.
            due = self.interval_s - ((time.monotonic() - self._t0) % self.interval_s)
            if self._stop.wait(due):
                break
        with contextlib.suppress(Exception):  # a last one as it stops, so the last level's end is bracketed
            self._sample_once()
        if self._gpu is not None:
            self._gpu.close()
        with self._lock:
            if self._out is not None:
                with contextlib.suppress(OSError):
                    self._out.close()
                self._out = None

    def _error(self, source: str, exc: BaseException) -> None:
        key = f"{source}:{type(exc).__name__}"
        if key not in self._error_keys:
            self._error_keys.add(key)
            self.errors.append(f"{source}: {type(exc).__name__}: {exc}"[:300])

    def _sample_once(self) -> None:
        now = time.monotonic()
        sample: dict = {"t": round(now - self._t0, 3), "wall": round(time.time(), 3)}
        for key, read in (("tree", self._tree), ("system", self._system), ("pressure", self._pressure),
                          ("cgroup", self._cgroup), ("gpu", self._gpus), ("cpu_energy", self._cpu_energy)):
            try:
                value = read()
            except Exception as exc:  # noqa: BLE001 - one source failing leaves the others
                self._error(key, exc)
                continue
            if value is not None:
                sample[key] = value
        self._update_peak(sample)
        self.power += readings(sample)
        self.samples += 1
        with self._lock:
            if self._out is not None:
                try:
                    self._out.write(json.dumps(sample) + "\n")
                except (OSError, ValueError) as exc:
                    self._error("output", exc)

    def _update_peak(self, sample: dict) -> None:
        peak = self.peak
        if "tree" in sample:
            peak["tree_rss_bytes"] = max(peak["tree_rss_bytes"], sample["tree"]["rss_bytes"])
        if "system" in sample:
            peak["system_mem_used_bytes"] = max(peak["system_mem_used_bytes"], sample["system"]["mem_used_bytes"])
        if "cgroup" in sample and sample["cgroup"].get("usage_bytes") is not None:
            peak["cgroup_usage_bytes"] = max(peak.get("cgroup_usage_bytes", 0), sample["cgroup"]["usage_bytes"])
        used = [g["mem_used_bytes"] for g in sample.get("gpu", ()) if g.get("mem_used_bytes") is not None]
        if used:
            peak["gpu_mem_used_bytes"] = max(peak["gpu_mem_used_bytes"] or 0, sum(used))

    # --- sources ---

    def _tree(self) -> dict | None:
        if self.pid is None:
            return None
        try:
            leader = self._procs.get(self.pid) or psutil.Process(self.pid)
            current = [leader, *leader.children(recursive=True)]
            if leader.status() == psutil.STATUS_ZOMBIE:
                current = current[1:]
        except psutil.Error:
            current = []
        # Reuse Process objects: cpu_percent() measures since the previous call on the same object.
        procs = {}
        for p in current:
            procs[p.pid] = self._procs.get(p.pid, p)
        self._procs = procs
        cpu = rss = 0.0
        names: dict[int, str] = {}
        for pid, p in procs.items():
            try:
                with p.oneshot():
                    cpu += p.cpu_percent(None)
                    rss += p.memory_info().rss
                    names[pid] = p.name()
            except psutil.Error:
                continue
        if self.on_tree is not None and names:
            try:
                self.on_tree(names)
            except Exception as exc:  # noqa: BLE001 - the caller's callback must not stop sampling
                self._error("on_tree", exc)
        return {"alive": bool(names) and self.pid in names, "pids": len(names),
                "cpu_percent": round(cpu, 1), "rss_bytes": int(rss)}

    @staticmethod
    def _system() -> dict:
        vm = psutil.virtual_memory()
        return {"mem_total_bytes": vm.total, "mem_used_bytes": vm.total - vm.available,
                "mem_available_bytes": vm.available}

    @staticmethod
    def _pressure() -> dict | None:
        try:
            text = Path("/proc/pressure/memory").read_text()
        except OSError:  # absent, or PSI compiled in but disabled (EOPNOTSUPP)
            return None
        return parse_pressure(text) or None

    def _cgroup(self) -> dict | None:
        if self.cgroup is None:
            return None
        return {"usage_bytes": self.cgroup.usage_bytes()}

    def _cpu_energy(self) -> dict[str, float] | None:
        return self._rapl.read() if self._rapl else None

    def _gpus(self) -> list[dict] | None:
        if self._gpu is None or self._gpu.kind is None:
            return None
        return self._gpu.read()
