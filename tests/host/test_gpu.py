"""GPU readings as the resource sampler takes them: nvidia-smi's CSV, NVML through pynvml, metalstat.

There is no GPU on the machine these tests were written on. The nvidia-smi text below is
constructed in the format nvidia-smi documents for `--query-gpu=... --format=csv,noheader,nounits`
(comma and space between fields, MiB, MHz, watts with two decimals, the reasons as a 0x-prefixed
64-bit hex bitmask, `[N/A]` / `[Not Supported]` for a field it cannot read), not captured from a
machine. Its power, SM clock and memory figures are those of a real H200 run (81 W idle before the
cell, 125 W during it, an SM clock of 1,980 MHz, ~132 GB of device memory used), set out as two
GPUs, one loaded and one idle, to have more than one line; the decimals, the utilisation, the
idle clock, the memory clock and the reason bitmasks are made up. The fake pynvml module has the real
nvidia-ml-py's function names, constants and return shapes (checked against nvidia-ml-py 13.615).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.host import gpu
from bench.host.gpu import (
    THERMAL_OR_POWER,
    Gpu,
    decode_reasons,
    parse_compute_apps,
    parse_metalstat,
    parse_nvidia_smi,
    tree_gpu_bytes,
)
from bench.host.resources import ResourceSampler
from bench.host.samples import GpuSample, MemorySample, gpu_samples, memory_sample

MIB = 1 << 20
LOADED_MIB = 125885  # 132.0 GB (10^9 bytes) in MiB, the device memory a transformers server reserved

# Newer drivers (535 on): --query-gpu=utilization.gpu,memory.used,power.draw,clocks.sm,clocks.mem,
# clocks_event_reasons.active. GPU 0 under load, power-capped; GPU 1 idle.
SMI_LOADED = f"97, {LOADED_MIB}, 125.40, 1980, 2619, 0x0000000000000004\n0, 4, 81.02, 345, 2619, 0x0000000000000001\n"
# A board that reads neither power nor the reasons, and one whose memory clock is not supported.
SMI_GAPS = "12, 1024, [N/A], 1410, [Not Supported], [N/A]\n"


def test_nvidia_smi_lines_become_gpu_entries():
    loaded, idle = parse_nvidia_smi(SMI_LOADED)
    assert loaded == {"index": 0, "util_percent": 97.0, "mem_used_bytes": LOADED_MIB * MIB, "power_w": 125.4,
                      "clock_mhz": 1980.0, "mem_clock_mhz": 2619.0, "throttle_reasons": ["sw_power_cap"]}
    assert round(loaded["mem_used_bytes"] / 1e9) == 132
    assert (idle["index"], idle["power_w"], idle["clock_mhz"], idle["throttle_reasons"]) == (1, 81.02, 345.0,
                                                                                          ["gpu_idle"])
    (gaps,) = parse_nvidia_smi(SMI_GAPS)
    assert gaps["power_w"] is None and gaps["mem_clock_mhz"] is None and gaps["throttle_reasons"] is None
    assert gaps["clock_mhz"] == 1410.0 and gaps["mem_used_bytes"] == 1024 * MIB


def test_the_old_three_field_line_still_parses_with_the_new_readings_unknown():
    (entry,) = parse_nvidia_smi("97, 70123, 301.52\n")
    assert entry["power_w"] == 301.52 and entry["clock_mhz"] is None and entry["throttle_reasons"] is None
    with pytest.raises(ValueError):
        parse_nvidia_smi("garbage\n")


def test_reason_bits_decode_to_nvidias_names():
    assert decode_reasons(0) == []  # the clock as high as it may go
    assert decode_reasons(None) is None
    assert decode_reasons(0x0000000000000004) == ["sw_power_cap"]
    assert decode_reasons(0x1FF) == [
        "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"]
    assert decode_reasons(0x800 | 0x40) == ["hw_thermal_slowdown", "0x800"], "an unnamed bit keeps its value"
    held = {name for name in decode_reasons(0x1FF) or [] if name in THERMAL_OR_POWER}
    assert held == {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown"}


# ---------------------------------------------------------------- nvidia-smi as a program


def fake_nvidia_smi(tmp_path: Path, monkeypatch, *, knows_event_reasons: bool, gpus: str = SMI_LOADED,
                    apps: str = "") -> Path:
    """An `nvidia-smi` on PATH (a shell script: fast to start) that answers --query-gpu with `gpus`
    and --query-compute-apps with `apps`, logs its arguments, and, as a driver older than 535 does,
    rejects `clocks_event_reasons.active` unless `knows_event_reasons`. NVML is made unimportable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "gpus.csv").write_text(gpus)
    (tmp_path / "apps.csv").write_text(apps)
    log = tmp_path / "calls.log"
    reject = "" if knows_event_reasons else (
        '  *clocks_event_reasons.active*) echo \'Field "clocks_event_reasons.active" is not a valid field to query.\';'
        ' exit 2;;\n')
    script = bin_dir / "nvidia-smi"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\ncase "$1" in\n{reject}'
                      f'  --query-gpu=*) cat {tmp_path / "gpus.csv"};;\n'
                      f'  --query-compute-apps=*) cat {tmp_path / "apps.csv"};;\n'
                      '  *) echo "unexpected arguments: $*" >&2; exit 9;;\nesac\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpu, "PLATFORM", "linux")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    return log


def test_an_older_nvidia_smi_is_asked_by_the_old_reasons_name_from_the_second_read_on(tmp_path, monkeypatch):
    log = fake_nvidia_smi(tmp_path, monkeypatch, knows_event_reasons=False)
    source = Gpu()
    assert source.kind == "nvidia-smi"
    first, second = source.read(), source.read()
    assert first == second == parse_nvidia_smi(SMI_LOADED)
    calls = log.read_text().splitlines()
    assert [("clocks_event_reasons" in c, "clocks_throttle_reasons" in c) for c in calls] == [
        (True, False), (False, True), (False, True)], "the new name once, then the old one it took"


def test_a_newer_nvidia_smi_is_asked_once_per_read(tmp_path, monkeypatch):
    log = fake_nvidia_smi(tmp_path, monkeypatch, knows_event_reasons=True)
    source = Gpu()
    assert source.read() == parse_nvidia_smi(SMI_LOADED) and source.read()
    assert all("clocks_event_reasons.active" in c for c in log.read_text().splitlines())
    assert len(log.read_text().splitlines()) == 2


def test_nvidia_smi_failing_otherwise_is_not_retried_by_the_old_name(tmp_path, monkeypatch):
    log = fake_nvidia_smi(tmp_path, monkeypatch, knows_event_reasons=True)
    (tmp_path / "bin" / "nvidia-smi").write_text(
        f'#!/bin/sh\necho "$*" >> {log}\necho "NVIDIA-SMI has failed because it could not communicate with the'
        ' NVIDIA driver." >&2\nexit 9\n')
    with pytest.raises(RuntimeError, match="exit code 9: NVIDIA-SMI has failed"):
        Gpu().read()
    assert len(log.read_text().splitlines()) == 1


# ---------------------------------------------------------------- NVML through pynvml


class NVMLError(Exception):
    """pynvml.NVMLError: raised with the return code (NVML_ERROR_NOT_SUPPORTED = 3, FUNCTION_NOT_FOUND = 13)."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def fake_pynvml(gpus: list[dict], *, event_reasons: bool = True) -> SimpleNamespace:
    """A module object with nvidia-ml-py's names and shapes: handles from nvmlDeviceGetHandleByIndex,
    nvmlDeviceGetUtilizationRates(h).gpu (%), nvmlDeviceGetMemoryInfo(h).used (bytes),
    nvmlDeviceGetPowerUsage(h) (mW), nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM or NVML_CLOCK_MEM) (MHz),
    the reasons' bitmask (an int) and the running processes (objects with pid and usedGpuMemory,
    None where the driver cannot say). Each GPU's dict: util, used, power_mw, sm, mem, reasons, procs;
    a value that is an int error code raises NVMLError(code). Without `event_reasons` the driver is
    older than 535: nvmlDeviceGetCurrentClocksEventReasons raises FUNCTION_NOT_FOUND."""

    def value(h: int, key: str):
        v = gpus[h][key]
        if isinstance(v, NVMLError):
            raise v
        return v

    def event_reasons_fn(h: int) -> int:
        if not event_reasons:
            raise NVMLError(13)
        return value(h, "reasons")

    return SimpleNamespace(
        NVMLError=NVMLError, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2,
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=value(h, "util"), memory=0),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=143771 * MIB, free=143771 * MIB - value(h, "used"),
                                                          used=value(h, "used")),
        nvmlDeviceGetPowerUsage=lambda h: value(h, "power_mw"),
        nvmlDeviceGetClockInfo=lambda h, kind: value(h, {1: "sm", 2: "mem"}[kind]),
        nvmlDeviceGetCurrentClocksEventReasons=event_reasons_fn,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: value(h, "reasons"),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=p, usedGpuMemory=m, gpuInstanceId=None,
                                                                        computeInstanceId=None)
                                                        for p, m in value(h, "procs")],
        nvmlDeviceGetGraphicsRunningProcesses=lambda h: [],
    )


H200_LOADED = {"util": 97, "used": LOADED_MIB * MIB, "power_mw": 125_400, "sm": 1980, "mem": 2619, "reasons": 0x4,
               "procs": []}
H200_IDLE = {"util": 0, "used": 4 * MIB, "power_mw": 81_020, "sm": 345, "mem": 2619, "reasons": 0x1, "procs": []}


def nvml_gpu(monkeypatch, module: SimpleNamespace) -> Gpu:
    monkeypatch.setattr(gpu, "PLATFORM", "linux")
    monkeypatch.setitem(sys.modules, "pynvml", module)
    source = Gpu()
    assert source.kind == "nvml"
    return source


def test_nvml_gives_clocks_and_reasons(monkeypatch):
    source = nvml_gpu(monkeypatch, fake_pynvml([H200_LOADED, H200_IDLE]))
    assert source.read() == [
        {"index": 0, "util_percent": 97.0, "mem_used_bytes": LOADED_MIB * MIB, "power_w": 125.4, "clock_mhz": 1980.0,
         "mem_clock_mhz": 2619.0, "throttle_reasons": ["sw_power_cap"]},
        {"index": 1, "util_percent": 0.0, "mem_used_bytes": 4 * MIB, "power_w": 81.02, "clock_mhz": 345.0,
         "mem_clock_mhz": 2619.0, "throttle_reasons": ["gpu_idle"]},
    ]


def test_an_older_driver_gives_the_reasons_through_the_throttle_function(monkeypatch):
    module = fake_pynvml([H200_LOADED], event_reasons=False)
    source = nvml_gpu(monkeypatch, module)
    assert source.read()[0]["throttle_reasons"] == ["sw_power_cap"]
    module.nvmlDeviceGetCurrentClocksEventReasons = lambda h: pytest.fail("asked again after it failed")
    assert source.read()[0]["throttle_reasons"] == ["sw_power_cap"]


def test_readings_a_board_does_not_support_are_none(monkeypatch):
    unsupported = NVMLError(3)
    board = H200_LOADED | {"power_mw": unsupported, "mem": unsupported, "reasons": unsupported}
    (entry,) = nvml_gpu(monkeypatch, fake_pynvml([board])).read() or []
    assert entry["power_w"] is None and entry["mem_clock_mhz"] is None and entry["throttle_reasons"] is None
    assert entry["clock_mhz"] == 1980.0


# ---------------------------------------------------------------- metalstat


def test_metalstat_gives_its_frequency_as_the_clock_and_no_memory_clock_or_reasons():
    line = json.dumps({"gpu_util": 97.5, "gpu_freq_mhz": 1398.0, "gpu_w": 18.7, "gpu_mem_allocated_gb": 1.5,
                       "mem_pressure_pct": 38.0, "mem_pressure_level": "green"})
    entry = parse_metalstat(line)
    assert entry["clock_mhz"] == entry["freq_mhz"] == 1398.0
    assert entry["mem_clock_mhz"] is None and entry["throttle_reasons"] is None


# ---------------------------------------------------------------- the server's own GPU memory

NO_SUCH_PID = 2**22 + 1  # above the largest pid_max Linux allows: never a process here


def test_compute_apps_are_summed_per_pid_over_the_gpus():
    # --query-compute-apps=pid,used_memory --format=csv,noheader,nounits: a process on two GPUs,
    # one on one, and one whose figure the driver cannot give.
    held = parse_compute_apps("4242, 120000\n4243, 512\n4242, 5300\n4244, [N/A]\n")
    assert held == {4242: 125300 * MIB, 4243: 512 * MIB, 4244: None}
    assert parse_compute_apps("") == {}
    with pytest.raises(ValueError):
        parse_compute_apps("pid, used_memory [MiB]\n")  # a header: the query asked for none


def test_the_tree_holds_what_its_listed_pids_hold():
    held = {100: 120 * MIB, 101: 5 * MIB, 200: 7 * MIB}
    assert tree_gpu_bytes(held, {100, 101, 102}, known=lambda pid: True) == 125 * MIB
    assert tree_gpu_bytes(held, {300}, known=lambda pid: True) == 0, "others hold memory, this tree none"
    assert tree_gpu_bytes({100: None, 200: 7}, {100}, known=lambda pid: True) is None, "its own figure unknown"


def test_pids_from_another_pid_namespace_give_no_figure_rather_than_zero():
    # A container without the host's PID namespace: the driver lists host pids, none of them here.
    assert tree_gpu_bytes({NO_SUCH_PID: 120 * MIB}, {os.getpid()}) is None
    assert tree_gpu_bytes({}, {os.getpid()}) is None, "an empty listing cannot tell a container from an idle GPU"
    assert tree_gpu_bytes({NO_SUCH_PID: 120 * MIB, os.getppid(): 0}, {os.getpid()}) == 0, "one pid known here"


def test_nvml_processes_are_summed_over_the_gpus_once_each(monkeypatch):
    module = fake_pynvml([H200_LOADED | {"procs": [(4242, 120 * MIB), (4243, None)]},
                          H200_IDLE | {"procs": [(4242, 5 * MIB)]}])
    module.nvmlDeviceGetGraphicsRunningProcesses = lambda h: (  # 4242 has a graphics context on GPU 0 too
        [SimpleNamespace(pid=4242, usedGpuMemory=120 * MIB)] if h == 0 else [])
    assert nvml_gpu(monkeypatch, module).processes() == {4242: 125 * MIB, 4243: None}


def test_no_gpu_has_no_per_process_figures(monkeypatch):
    monkeypatch.setattr(gpu, "PLATFORM", "linux")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", "/nonexistent")
    source = Gpu()
    assert source.kind is None and source.processes() is None and source.read() is None


def sample_with_fake_nvidia_smi(tmp_path: Path, monkeypatch, apps: str) -> tuple[list[dict], ResourceSampler]:
    """Samples of this test's own process tree by a ResourceSampler reading the fake nvidia-smi:
    (the sidecar's samples, the stopped sampler)."""
    fake_nvidia_smi(tmp_path, monkeypatch, knows_event_reasons=True, apps=apps)
    path = tmp_path / "r.jsonl"
    with ResourceSampler(os.getpid(), path, interval_s=0.2) as sampler:
        deadline = time.monotonic() + 20
        while sampler.samples < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert sampler.errors == [] and sampler.summary()["gpu_source"] == "nvidia-smi"
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(samples) == sampler.samples >= 2
    return samples, sampler


def test_the_sampler_records_the_trees_gpu_memory_beside_the_devices(tmp_path, monkeypatch):
    # This process holds 122 GiB of the 132 GB in use; another process (pid 1, known here) 2 GiB.
    samples, sampler = sample_with_fake_nvidia_smi(tmp_path, monkeypatch, f"{os.getpid()}, 124928\n1, 2048\n")
    assert all(s["tree"]["gpu_mem_bytes"] == 124928 * MIB for s in samples)
    assert all(s["gpu"][0]["clock_mhz"] == 1980.0 and s["gpu"][0]["throttle_reasons"] == ["sw_power_cap"]
               for s in samples)
    assert sampler.peak["tree_gpu_mem_bytes"] == 124928 * MIB
    assert sampler.peak["gpu_mem_used_bytes"] == (LOADED_MIB + 4) * MIB, "every process on both GPUs, as before"


def test_the_sampler_writes_null_when_the_drivers_pids_are_not_this_hosts(tmp_path, monkeypatch):
    samples, sampler = sample_with_fake_nvidia_smi(tmp_path, monkeypatch, f"{NO_SUCH_PID}, 124928\n")
    assert all(s["tree"]["gpu_mem_bytes"] is None for s in samples)
    assert sampler.peak["tree_gpu_mem_bytes"] is None and sampler.peak["gpu_mem_used_bytes"] == (LOADED_MIB + 4) * MIB
    assert {m.tree_gpu_bytes for m in sampler.memory} == {None}


# ---------------------------------------------------------------- the series for per-level figures


def test_the_sampler_keeps_a_memory_sample_per_sample_and_a_gpu_sample_per_gpu(tmp_path, monkeypatch):
    samples, sampler = sample_with_fake_nvidia_smi(tmp_path, monkeypatch, f"{os.getpid()}, 124928\n")
    assert [m.wall for m in sampler.memory] == [s["wall"] for s in samples]
    assert all(m == MemorySample(wall=s["wall"], tree_rss_bytes=s["tree"]["rss_bytes"],
                                 system_used_bytes=s["system"]["mem_used_bytes"],
                                 gpu_used_bytes=(LOADED_MIB + 4) * MIB, tree_gpu_bytes=124928 * MIB)
               for m, s in zip(sampler.memory, samples, strict=True))
    assert all(m.tree_rss_bytes and m.tree_rss_bytes > 0 for m in sampler.memory)
    assert len(sampler.gpu) == 2 * len(samples)
    assert sampler.gpu[:2] == [
        GpuSample(wall=samples[0]["wall"], index=0, util_percent=97.0, clock_mhz=1980.0, mem_clock_mhz=2619.0,
                  throttle_reasons=("sw_power_cap",)),
        GpuSample(wall=samples[0]["wall"], index=1, util_percent=0.0, clock_mhz=345.0, mem_clock_mhz=2619.0,
                  throttle_reasons=("gpu_idle",))]


def test_a_sample_without_a_gpu_or_tree_gives_none_and_no_gpu_samples():
    sample = {"t": 0.0, "wall": 100.0, "system": {"mem_total_bytes": 8, "mem_used_bytes": 5, "mem_available_bytes": 3}}
    assert memory_sample(sample) == MemorySample(100.0, None, 5, None, None)
    assert gpu_samples(sample) == []
    metal = sample | {"gpu": [{"index": 0, "util_percent": 50.0, "clock_mhz": 1398.0, "mem_clock_mhz": None,
                               "throttle_reasons": None, "mem_used_bytes": None}]}
    assert memory_sample(metal).gpu_used_bytes is None
    assert gpu_samples(metal) == [GpuSample(100.0, 0, 50.0, 1398.0, None, None)]
    idle = metal | {"gpu": [metal["gpu"][0] | {"throttle_reasons": []}]}
    assert gpu_samples(idle)[0].throttle_reasons == ()
