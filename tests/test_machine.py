"""Machine slugs scope the results tree; they must be stable and match SiliconBench's names."""

import pytest

from bench.machine import detect, machine_slug, slugify


@pytest.mark.parametrize(
    "name, slug",
    [
        ("Apple M5 Pro", "m5pro"),
        ("Apple M3 Ultra", "m3ultra"),
        ("Apple M2 Max", "m2max"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H200 NVL", "h200"),
        ("NVIDIA H100 80GB HBM3", "h10080gbhbm3"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Intel(R) Xeon(R) Processor", "intelxeonprocessor"),
        ("AMD EPYC 7B13 64-Core Processor", "amdepyc7b1364coreprocessor"),
        ("", "unknown"),
    ],
)
def test_slugify(name, slug):
    assert slugify(name) == slug


def test_gpu_wins_over_cpu_and_env_overrides(monkeypatch):
    monkeypatch.delenv("CELLBENCH_MACHINE", raising=False)
    assert machine_slug("AMD EPYC", None, ("NVIDIA H200",)) == "h200"
    assert machine_slug("Apple M5 Pro", "Apple M5 Pro", ()) == "m5pro"
    monkeypatch.setenv("CELLBENCH_MACHINE", "dgxspark")
    assert machine_slug("AMD EPYC", None, ("NVIDIA GB10",)) == "dgxspark"


def test_detect_describes_this_machine():
    m = detect()
    assert m.cores >= 1 and m.memory_gib > 0 and m.cpu and m.host
    assert m.slug and m.slug == m.slug.lower()
