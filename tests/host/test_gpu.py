"""GPU readings as the resource sampler takes them: nvidia-smi's CSV, NVML through pynvml, metalstat.

There is no GPU on the machine these tests were written on. The nvidia-smi text below is
constructed in the format nvidia-smi documents for `--query-gpu=... --format=csv,noheader,nounits`
(comma and space between fields, MiB, MHz, watts with two decimals, the reasons as a 0x-prefixed
64-bit hex bitmask, `[N/A]` / `[Not Supported]` for a field it cannot read), not captured from a
machine. Its power, SM clock and memory figures are those of a real H200 run (81 W idle before the
cell, 125 W during it, an SM clock of 1,980 MHz, ~132 GB of device memory used); the utilisation,
the memory clock and the reason bitmasks are made up. The fake pynvml module has the real
nvidia-ml-py's function names, constants and return shapes (checked against nvidia-ml-py 13.615).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.host import gpu
from bench.host.gpu import THERMAL_OR_POWER, Gpu, decode_reasons, parse_metalstat, parse_nvidia_smi

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
