"""Micro-benchmark of the per-event hot path: a 256-token vLLM-shaped stream, one event per read
(the realistic decode pattern: each token arrives in its own socket read)."""

from __future__ import annotations

import json

from bench.core.records import RequestRecord
from bench.core.sse import ChatStream

N_TOKENS = 256


def _event(delta: dict, finish: str | None = None, usage: dict | None = None, choices: bool = True) -> bytes:
    obj = {
        "id": "chatcmpl-8f2b1c9e4d7a4b0f9d3e6a1c2b5f7e90",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "Qwen/Qwen3-0.6B",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else [],
        "usage": usage,
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


READS = [
    _event({"role": "assistant", "content": ""}),
    *(_event({"content": f" tok{i}"}) for i in range(N_TOKENS)),
    _event({}, finish="length"),
    _event(
        {}, usage={"prompt_tokens": 42, "completion_tokens": N_TOKENS, "total_tokens": 42 + N_TOKENS}, choices=False
    ),
    b"data: [DONE]\n\n",
]


def parse_stream() -> RequestRecord:
    rec = RequestRecord(index=0, prompt_name="bench", t_send=0.0)
    stream = ChatStream(rec)
    t = 0.0
    for data in READS:
        t += 0.001
        stream.feed(data, t)
    stream.close(t)
    return rec


def test_sse_parser_throughput(benchmark):
    rec = benchmark(parse_stream)
    assert rec.ok and rec.done_marker
    assert rec.n_chunks == N_TOKENS and rec.usage_completion_tokens == N_TOKENS
    assert rec.t_first_token == 0.002 and rec.finish_reason == "length"
    if benchmark.stats is None:  # --benchmark-disable, or under xdist: ran once, not timed
        return
    per_event_us = benchmark.stats.stats.median / len(READS) * 1e6
    benchmark.extra_info["us_per_event_median"] = round(per_event_us, 2)
    assert per_event_us < 200  # ~6 µs here; 200 catches a quadratic or pathological path on a busy box
