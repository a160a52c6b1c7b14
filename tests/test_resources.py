"""The resource sidecar on real processes: samples, peaks, JSONL, prompt stop, never raising."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from bench.host.resources import ResourceSampler, parse_nvidia_smi, parse_pressure

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


def test_samples_a_live_process_tree(tmp_path, worker):
    proc = worker(30)
    time.sleep(0.5)  # let it allocate and spawn its child
    seen: dict[int, str] = {}
    path = tmp_path / "resources.jsonl"
    with ResourceSampler(proc.pid, path, on_tree=seen.update, gpu=False) as sampler:
        time.sleep(2.5)
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
    assert sampler.errors == []
    summary = sampler.summary()
    assert summary["samples"] == len(samples) and summary["peak"] == peak


def test_a_process_that_exits_midway_does_not_stop_sampling(tmp_path, worker):
    proc = worker(0.6)
    path = tmp_path / "r.jsonl"
    with ResourceSampler(proc.pid, path, interval_s=0.5, gpu=False) as sampler:
        proc.wait(timeout=10)
        time.sleep(1.6)
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


def test_parse_nvidia_smi():
    # Two GPUs, as `nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw
    # --format=csv,noheader,nounits` prints them; power is [N/A] on some boards.
    gpus = parse_nvidia_smi("97, 70123, 301.52\n0, 4, [N/A]\n")
    assert gpus == [
        {"index": 0, "util_percent": 97.0, "mem_used_bytes": 70123 << 20, "power_w": 301.52},
        {"index": 1, "util_percent": 0.0, "mem_used_bytes": 4 << 20, "power_w": None},
    ]
    with pytest.raises(ValueError):
        parse_nvidia_smi("garbage\n")


def test_gpu_peak_is_summed_over_gpus(tmp_path):
    sampler = ResourceSampler(None, tmp_path / "r.jsonl", gpu=False)
    sampler._update_peak({"gpu": parse_nvidia_smi("97, 100, 300\n50, 50, 200\n")})
    sampler._update_peak({"gpu": parse_nvidia_smi("97, 10, 300\n50, 10, 200\n")})
    assert sampler.peak["gpu_mem_used_bytes"] == 150 << 20
