"""A resource sidecar for one server: what its process tree and the machine used, once a second.

`ResourceSampler(pid, path)` is a context manager running a daemon thread. Each sample is one
JSON line in `path`:

    {"t": 1.002, "wall": 1767000000.123,
     "tree": {"alive": true, "pids": 3, "cpu_percent": 187.5, "rss_bytes": 1234567,
              "gpu_mem_bytes": 128849018880},                       # NVML or nvidia-smi only
     "system": {"mem_total_bytes": ..., "mem_used_bytes": ..., "mem_available_bytes": ...},
     "pressure": {"some_avg10": 0.0, "full_avg10": 0.0},           # Linux PSI, when present
     "cgroup": {"usage_bytes": ...},                                 # under --memory-limit
     "gpu": [{"index": 0, "util_percent": 97.0, "mem_used_bytes": ..., "power_w": 301.2,
              "clock_mhz": 1980.0, "mem_clock_mhz": 2619.0, "throttle_reasons": ["sw_power_cap"]}],
     "cpu_energy": {"joules": 81234.5, "wall": 1767000000.125}}     # RAPL packages, where readable

`t` is monotonic seconds since the sampler started, `wall` epoch seconds. Keys whose source is
absent on this machine are left out. `tree.gpu_mem_bytes` is the GPU memory the tree's processes
hold, summed over the GPUs, as the driver accounts it per process (what a framework reserved
counts, used or not); a GPU's `mem_used_bytes` counts every process's and the driver's own. It is
null when the driver's pids cannot be matched to this tree, as in a container without the host's
PID namespace (bench.host.gpu.tree_gpu_bytes says why null, not 0).

`power`, `memory` and `gpu` hold the samples' readings in memory, as typed series for each
level's figures (bench.host.power, bench.host.samples). `peak` holds the peaks for the result
file (`tree_gpu_mem_bytes` the tree's, `gpu_mem_used_bytes` every process's on all GPUs) and
`summary()` the whole account (samples, peaks, errors).

It never raises into the benchmark: an error is recorded once per source (`errors`) and sampling
goes on; a server that exits mid-run gives `"alive": false` samples. `stop()` (or leaving the
`with`) returns within about a second even while a GPU query hangs: the thread is a daemon and the
GPU query has its own timeout.

GPU: bench.host.gpu (metalstat on macOS, else NVML or nvidia-smi); a GPU entry's keys are None
where its source cannot read them (`clock_mhz` the SM clock, `throttle_reasons` the active
clock-event reasons by NVIDIA's names, `[]` for none; metalstat has no memory clock or reasons).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, TypedDict

import psutil

from bench.base.doc import Doc
from bench.host.gpu import Gpu, tree_gpu_bytes
from bench.host.power import PowerSample, Rapl, readings
from bench.host.samples import GpuSample, MemorySample, gpu_samples, memory_sample

if TYPE_CHECKING:
    from bench.host.memory.memlimit import MemoryCgroup

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


class ServerResources(TypedDict):
    """Its process tree's resource use, sampled while it ran (bench.host.resources)."""

    path: Annotated[str, Doc("The samples file (JSON lines) beside the result, by name.")]
    interval_s: Annotated[float, Doc("Seconds between samples.")]
    samples: Annotated[int, Doc("Samples taken.", minimum=0)]
    peak: Annotated[dict[str, Any], Doc("Peaks over the samples: tree RSS, system memory used, GPU memory used (bytes;"
                                        " null when unknown).")]
    gpu_source: Annotated[str | None, Doc("Where GPU memory was read from; null without a GPU reading.")]
    errors: Annotated[list[str], Doc("Sampling errors, one line each (sampling never stops the cell).")]


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
        self.peak: dict = {"tree_rss_bytes": 0, "system_mem_used_bytes": 0, "gpu_mem_used_bytes": None,
                           "tree_gpu_mem_bytes": None}
        self._error_keys: set[str] = set()
        self._procs: dict[int, psutil.Process] = {}
        self._tree_pids: set[int] = set()  # the tree's pids as the last sample read them
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._gpu_wanted = gpu
        self._rapl: Rapl | None = None
        self.power: list[PowerSample] = []  # its power readings: energy per token (bench.core.lenses.energy)
        self.memory: list[MemorySample] = []  # one per sample (bench.host.samples)
        self.gpu: list[GpuSample] = []  # one per GPU per sample; the source that reads them is _gpu_source
        self._gpu_source: Gpu | None = None
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

    def stop(self, timeout_s: float = 1.0) -> ServerResources:
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

    def summary(self) -> ServerResources:
        return {
            "path": str(self.path),
            "interval_s": self.interval_s,
            "samples": self.samples,
            "peak": dict(self.peak),
            "gpu_source": self._gpu_source.kind if self._gpu_source is not None else None,
            "errors": list(self.errors),
        }

    # --- the thread ---

    def _run(self) -> None:
        self._rapl = Rapl()
        if self._gpu_wanted:
            try:
                self._gpu_source = Gpu()
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
        if self._gpu_source is not None:
            self._gpu_source.close()
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
        if "tree" in sample and "gpu" in sample:
            try:
                held = self._gpu_source.processes() if self._gpu_source is not None else None
            except Exception as exc:  # noqa: BLE001 - the device figures stand without it
                self._error("gpu_processes", exc)
            else:
                if held is not None:
                    sample["tree"]["gpu_mem_bytes"] = tree_gpu_bytes(held, self._tree_pids)
        self._update_peak(sample)
        self.power += readings(sample)
        self.memory.append(memory_sample(sample))
        self.gpu += gpu_samples(sample)
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
        if (held := sample.get("tree", {}).get("gpu_mem_bytes")) is not None:
            peak["tree_gpu_mem_bytes"] = max(peak["tree_gpu_mem_bytes"] or 0, held)

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
        self._tree_pids = set(procs)  # unreadable ones too (AccessDenied): they may hold GPU memory
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
        if self._gpu_source is None or self._gpu_source.kind is None:
            return None
        return self._gpu_source.read()
