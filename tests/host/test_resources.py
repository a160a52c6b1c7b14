"""The resource sidecar on real processes: samples, peaks, JSONL, prompt stop, never raising."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from bench.host import gpu, resources
from bench.host.gpu import parse_nvidia_smi
from bench.host.resources import ResourceSampler, parse_pressure

# Holds ~64 MiB (touched), spawns a child, and burns a little CPU; argv[1] = seconds to live.
WORKER = textwrap.dedent(
    """
    import subprocess, sys, time
    b = bytearray(64 << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        sum(range(10000)); time.sleep(0.01)
    child.kill()
    """
)


@pytest.fixture
def worker():
    procs = []

    def start(seconds: float) -> subprocess.Popen:
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, str(seconds)]))
        return procs[-1]

    yield start
    for p in procs:
        p.kill()
        p.wait()


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def wait_until(condition, what: str, timeout_s: float = 30.0) -> None:
    """Poll `condition` every 20 ms until it holds; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.02)


def written(path) -> list[dict]:
    """The samples a running sampler has written so far (whole lines only)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def test_samples_a_live_process_tree(tmp_path, worker):
    proc = worker(30)
    # it allocates, then spawns its child
    wait_until(lambda: psutil.Process(proc.pid).children(), "the worker's child")
    seen: dict[int, str] = {}
    path = tmp_path / "resources.jsonl"
    with ResourceSampler(proc.pid, path, on_tree=seen.update, gpu=False) as sampler:
        # a sample a whole interval after the first that saw the tree's CPU time grow
        wait_until(lambda: any(s["tree"]["cpu_percent"] > 0 for s in written(path)[1:]), "a sample with CPU")
        t0 = time.monotonic()
    stopped_in = time.monotonic() - t0
    assert stopped_in < 1.5, f"stop took {stopped_in:.2f} s"

    samples = read_jsonl(path)
    assert len(samples) >= 2 and sampler.samples == len(samples)
    assert all(s["tree"]["alive"] and s["tree"]["rss_bytes"] > 64 << 20 for s in samples)
    assert samples[-1]["tree"]["pids"] == 2, "the worker and its child"
    assert any(s["tree"]["cpu_percent"] > 0 for s in samples[1:])
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
    assert all(abs(s["wall"] - time.time()) < 60 for s in samples)
    assert all(s["system"]["mem_available_bytes"] > 0 for s in samples)
    peak = sampler.peak
    assert all(peak["tree_rss_bytes"] >= s["tree"]["rss_bytes"] for s in samples)
    assert all(peak["system_mem_used_bytes"] >= s["system"]["mem_used_bytes"] for s in samples)
    assert proc.pid in seen and len(seen) == 2, "the tree was reported for OOM evidence"
    assert [(m.tree_rss_bytes, m.system_used_bytes) for m in sampler.memory] == [
        (s["tree"]["rss_bytes"], s["system"]["mem_used_bytes"]) for s in samples]
    assert {(m.gpu_used_bytes, m.tree_gpu_bytes) for m in sampler.memory} == {(None, None)} and sampler.gpu == []
    assert not any("gpu_mem_bytes" in s["tree"] for s in samples), "no GPU source: the key is left out"
    assert sampler.errors == []
    summary = sampler.summary()
    assert summary["samples"] == len(samples) and summary["peak"] == peak


def test_a_process_that_exits_midway_does_not_stop_sampling(tmp_path, worker):
    proc = worker(0.6)
    path = tmp_path / "r.jsonl"
    with ResourceSampler(proc.pid, path, interval_s=0.5, gpu=False) as sampler:
        proc.wait(timeout=10)
        # the thread samples on after the exit (the sample `stop` takes last would not show that)
        wait_until(lambda: any(not s["tree"]["alive"] for s in written(path)), "a sample after the exit")
    samples = read_jsonl(path)
    assert samples[0]["tree"]["alive"] and not samples[-1]["tree"]["alive"]
    assert samples[-1]["tree"]["rss_bytes"] == 0 and "system" in samples[-1]
    assert sampler.peak["tree_rss_bytes"] > 64 << 20, "the peak survives the exit"


def test_never_raises_and_records_an_error_once(tmp_path, worker):
    proc = worker(30)

    def broken(_pids):
        raise RuntimeError("callback exploded")

    blocked = tmp_path / "file"
    blocked.write_text("")
    with ResourceSampler(proc.pid, blocked / "r.jsonl", interval_s=0.2, on_tree=broken, gpu=False) as sampler:
        time.sleep(0.7)
    assert sampler.samples >= 3, "sampling went on"
    assert len([e for e in sampler.errors if "callback exploded" in e]) == 1
    assert any(e.startswith("output:") for e in sampler.errors)


def test_no_such_process(tmp_path):
    with ResourceSampler(2**22 + 12345, tmp_path / "r.jsonl", interval_s=0.2, gpu=False) as sampler:
        time.sleep(0.3)
    samples = read_jsonl(tmp_path / "r.jsonl")
    assert samples and samples[0]["tree"] == {"alive": False, "pids": 0, "cpu_percent": 0.0, "rss_bytes": 0}
    assert sampler.errors == []


def test_memory_pressure_when_the_kernel_has_psi(tmp_path):
    try:
        open("/proc/pressure/memory").close()
    except OSError:
        pytest.skip("no /proc/pressure/memory (PSI) here")
    with ResourceSampler(None, tmp_path / "r.jsonl", gpu=False):
        time.sleep(0.1)
    sample = read_jsonl(tmp_path / "r.jsonl")[0]
    assert set(sample["pressure"]) == {"some_avg10", "full_avg10"} and "tree" not in sample


def test_parse_pressure():
    text = "some avg10=1.25 avg60=0.50 avg300=0.10 total=12345\nfull avg10=0.75 avg60=0.20 avg300=0.00 total=678\n"
    assert parse_pressure(text) == {"some_avg10": 1.25, "full_avg10": 0.75}


def test_gpu_peak_is_summed_over_gpus(tmp_path):
    sampler = ResourceSampler(None, tmp_path / "r.jsonl", gpu=False)
    sampler._update_peak({"gpu": parse_nvidia_smi("97, 100, 300\n50, 50, 200\n")})
    sampler._update_peak({"gpu": parse_nvidia_smi("97, 10, 300\n50, 10, 200\n")})
    assert sampler.peak["gpu_mem_used_bytes"] == 150 << 20


# One `metalstat --jsonl -i 1 --show-all` line as it appears on an Apple Silicon Mac (the keys
# metalstat writes; the values made up), and what the sampler keeps of it.
METALSTAT_LINE = ('{"t": 1767000000.5, "elapsed_s": 3.0, "gpu_util": 97.5, "gpu_freq_mhz": 1398.0, "cpu_util": 31.2, '
                  '"cpu_p_util": 40.0, "cpu_e_util": 12.0, "mem_used_gb": 41.5, "mem_wired_gb": 6.1, '
                  '"mem_active_gb": 20.2, "mem_inactive_gb": 10.0, "mem_compressed_gb": 2.5, "mem_pressure_pct": 38.0, '
                  '"mem_pressure_level": "green", "gpu_mem_allocated_gb": 1.5, "swap_used_gb": 0.0, "cpu_w": 4.2, '
                  '"gpu_w": 18.7, "ane_w": null, "dram_w": 1.1, "pkg_w": 24.0}')


def test_a_metalstat_sample_becomes_a_gpu_entry():
    assert gpu.parse_metalstat(METALSTAT_LINE) == {
        "index": 0, "util_percent": 97.5, "freq_mhz": 1398.0, "clock_mhz": 1398.0, "mem_clock_mhz": None,
        "throttle_reasons": None, "power_w": 18.7, "mem_used_bytes": int(1.5 * 2**30),
        "mem_pressure_pct": 38.0, "mem_pressure_level": "green"}
    unavailable = json.loads(METALSTAT_LINE) | {"gpu_freq_mhz": None, "gpu_mem_allocated_gb": None}
    entry = gpu.parse_metalstat(json.dumps(unavailable))
    assert entry["freq_mhz"] is None and entry["mem_used_bytes"] is None
    with pytest.raises(ValueError):
        gpu.parse_metalstat('{"cpu_util": 3}')


def test_the_sampler_reads_metalstat_beside_it_on_macos_and_stops_it(tmp_path, monkeypatch):
    """On Linux, with a stand-in `metalstat` on PATH replaying recorded lines: each sample takes
    the newest line, the peak takes Metal's allocation, and the sidecar process ends with the sampler."""
    fake = tmp_path / "bin" / "metalstat"
    fake.parent.mkdir()
    lines = [json.dumps(json.loads(METALSTAT_LINE) | {"gpu_util": u, "gpu_mem_allocated_gb": g})
             for u, g in ((10.0, 1.0), (95.0, 2.0), (96.0, 1.5))]
    (tmp_path / "recorded.jsonl").write_text("\n".join(lines) + "\n")
    fake.write_text(f"#!{sys.executable}\n"
                    "import os, sys, time\n"
                    f"open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n"
                    f"assert sys.argv[1:] == {gpu.METALSTAT!r}, sys.argv\n"
                    f"for line in open({str(tmp_path / 'recorded.jsonl')!r}):\n"
                    "    print(line, end='', flush=True)\n    time.sleep(0.3)\n"
                    "time.sleep(600)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpu, "PLATFORM", "darwin")
    path = tmp_path / "s.jsonl"
    with resources.ResourceSampler(os.getpid(), path, interval_s=0.2) as sampler:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sampler.peak["gpu_mem_used_bytes"] != 2 * 2**30:
            time.sleep(0.1)
        time.sleep(0.5)
    summary = sampler.summary()
    assert summary["gpu_source"] == "metalstat" and not summary["errors"], summary
    gpus = [json.loads(line)["gpu"][0] for line in path.read_text().splitlines() if '"gpu"' in line]
    assert {g["util_percent"] for g in gpus} >= {10.0, 95.0} and gpus[-1]["freq_mhz"] == 1398.0
    assert summary["peak"]["gpu_mem_used_bytes"] == 2 * 2**30
    assert not any("gpu_mem_bytes" in json.loads(line)["tree"] for line in path.read_text().splitlines()), (
        "metalstat has no per-process figures: the key is left out")
    assert summary["peak"]["tree_gpu_mem_bytes"] is None
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie":
        time.sleep(0.1)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie", "metalstat outlived the sampler"


# ---------------------------------------------------------------- what a suspicious cell's GPU says


def _gpu_samples(utils: list[float], freqs: list[float | None] | None = None) -> list[dict]:
    freqs = freqs or [1400.0] * len(utils)
    return [{"t": float(i), "gpu": [{"index": 0, "util_percent": u, "freq_mhz": f}]}
            for i, (u, f) in enumerate(zip(utils, freqs, strict=True))]


def test_the_three_readings_of_a_slower_cell():
    from bench.run.cell_result import gpu_case

    assert gpu_case(_gpu_samples([3.0, 5.0, 0.0, 4.0])) == (
        "GPU mostly idle during the levels (mean utilisation 3%): a serving or client problem, not the GPU")
    assert gpu_case(_gpu_samples([95.0] * 6, [1400.0, 1400.0, 1300.0, 1100.0, 1000.0, 1000.0])) == (
        "GPU frequency fell from 1400 to 1000 MHz while busy (mean utilisation 95%): throttling")
    assert gpu_case(_gpu_samples([92.0, 96.0, 95.0, 97.0])) == (
        "GPU busy during the levels (mean utilisation 95%): the slowdown looks real")
    assert gpu_case(_gpu_samples([90.0, 91.0])) is None, "too few samples to say"
    assert gpu_case([{"t": 1.0, "tree": {}}] * 5) is None, "no GPU sampled"


def test_the_reading_uses_each_servers_samples_after_it_was_ready(tmp_path):
    from bench.run.cell_result import gpu_reading

    loading = _gpu_samples([0.0] * 30)  # loading the model: the GPU is idle, and that says nothing
    measuring = [s | {"t": 30.0 + s["t"]} for s in _gpu_samples([97.0] * 10)]
    (tmp_path / "llamacpp.shared.resources.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in loading + measuring) + "not json\n")
    result = {"servers": [{"levels": [1, 8], "ready_after_s": 30.0,
                           "resources": {"path": "llamacpp.shared.resources.jsonl"}},
                          {"levels": [16], "start_error": "port held"}]}
    assert gpu_reading(tmp_path, result) == "GPU busy during the levels (mean utilisation 97%): the slowdown looks real"
    assert gpu_reading(tmp_path, {"servers": [{"levels": [1]}]}) is None
