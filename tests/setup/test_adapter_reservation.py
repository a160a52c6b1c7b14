"""An adapter's Reservation reads the memory a framework states it set aside, from log lines as the
framework writes them (vLLM 0.32.0's, recorded on this project's CPU machine and from its CUDA worker's
source)."""

from __future__ import annotations

from adapters.vllm import ADAPTER as VLLM

CPU_LOG = """\
(EngineCore pid=7726) INFO 12-06 02:32:42 [utils.py:347] Using LBHNC KV cache layout.
(Worker pid=7797) INFO 12-06 02:33:15 [cpu_worker.py:260] Explicitly set (1.0/23.59) GiB for KV cache on node 0.
(EngineCore pid=7726) INFO 12-06 02:33:15 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum \
concurrency for 4,096 tokens per request: 256.00x
"""

TWO_WORKERS = """\
(Worker_TP0 pid=101) INFO 12-06 02:33:15 [gpu_worker.py:760] Available KV cache memory: 35.62 GiB
(Worker_TP1 pid=102) INFO 12-06 02:33:15 [gpu_worker.py:760] Available KV cache memory: 35.5 GiB
"""


def test_vllm_on_cpu_states_the_kv_space_it_was_given():
    assert VLLM.reservation is not None
    found = VLLM.reservation.read(CPU_LOG)
    assert found is not None and found[0] == 2**30 and "Explicitly set (1.0/23.59) GiB" in found[1]


def test_each_tensor_parallel_worker_s_pool_is_counted_once():
    assert VLLM.reservation is not None
    found = VLLM.reservation.read(TWO_WORKERS + TWO_WORKERS.replace("35.5 GiB", "36.0 GiB"))
    assert found is not None and found[0] == round(35.62 * 2**30) + round(36.0 * 2**30)  # each one's last line
    assert VLLM.reservation.read("(APIServer pid=1) INFO nothing about memory\n") is None
