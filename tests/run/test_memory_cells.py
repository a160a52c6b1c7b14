"""The memory lens on real servers: llama-server given a KV cache twice as large (`-c`, the context
its slots share) holds more memory, and `cellbench compare` calls that a memory regression.

The built-in tiny model's KV cache is 1 KiB a token (2 layers, 2 KV heads of 64, K and V in f16),
so 131,072 tokens are 128 MiB and 262,144 are 256 MiB: llama-server clears the buffer as it starts,
so all of it is resident, and the peak moves by about that much whatever else the host runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.core.figures.memory import MIB
from bench.core.result.files import new_run_id
from bench.run.cell import CellConfig, CellOutcome, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.setup.tinymodel import ensure_tiny_model
from tests.support.busy import TEST_TIMEOUT_S
from tests.support.llama_profile import llama_profile

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]



def cell(tmp_path, launch, llama_server: str, ctx: int) -> CellOutcome:
    profile = llama_profile(tmp_path, f"tiny-kv{ctx}", llama_server, ensure_tiny_model().gguf_path, "-c", str(ctx))
    cfg = CellConfig(framework="openai", split="chat", profile=profile,
                     results_root=tmp_path / "results", run_id=new_run_id(), server=ServerSettings(port=0),
                     load=LoadSettings(concurrency=(1,), requests=2, warmup=0, rounds=3))
    return run_cell(cfg, launch)


def test_a_kv_cache_twice_as_large_is_a_memory_regression(tmp_path, server_launcher, llama_server):
    small = cell(tmp_path, server_launcher, llama_server, 131072)
    large = cell(tmp_path, server_launcher, llama_server, 262144)
    assert small.result_path is not None and large.result_path is not None
    peaks = [out.result["levels"][0]["memory"]["peak_bytes"] for out in (small, large)]
    assert peaks[1] - peaks[0] > 100 * MIB, peaks  # the second 128 MiB of KV cache, resident
    compared = subprocess.run([sys.executable, "-m", "bench.cli", "compare", str(small.result_path),
                               str(large.result_path), "--json"], capture_output=True, text=True, timeout=120)
    assert compared.returncode == 1, compared.stdout[-2000:] + compared.stderr[-2000:]  # 1: a regression
    (memory,) = [c for c in json.loads(compared.stdout)["changes"] if c["figure"] == "memory.peak_bytes"]
    assert memory["decision"] == "regression" and memory["basis"] == "3 rounds", memory
    assert memory["low"] > 0.3, memory  # the whole interval of the change says more memory, not just its middle
