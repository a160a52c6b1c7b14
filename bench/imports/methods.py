"""How SiliconBench derived each metric it records, against cellbench's definitions (docs/metrics.md).

Written into every imported result as `imported.methods`, so the reports, the suspicious check
and the journal (bench.core.result.imported) compare only what means the same on both sides. The
differences, from SiliconBench's `scripts/benchmark.py`:

- Percentiles are nearest-rank, upper (`sorted(x)[min(int(n*p/100), n-1)]`: p99 of 100 samples
  is the maximum); cellbench interpolates linearly. Means are means on both sides.
- Its ITL comes from chunk timestamps: until 2026-08-22 the mean gap between SSE chunks of each
  request (per chunk), later the first-to-last chunk span per token for the average while the
  median stays per chunk. cellbench's ITL is every gap between chunks.
- Its per-request throughput (our decode rate) runs to the end of the stream, not to the last
  chunk, and its average is token-weighted (Σ decode tokens / Σ decode spans), not a mean.
- It counts a chunk as output only for content or reasoning, never `delta.tool_calls`, and fails
  a request with no such chunk ("silent failure"): on the agent split an answer made only of
  tool calls is a failure there and output here, so failures, chunks and TTFT do not compare.
- Output tokens are server usage when every successful request reported it, else SSE chunks; the
  aggregate output tok/s is those tokens over the level's wall time, as cellbench's.
"""

from __future__ import annotations

from bench.core.result.model import MetricMethod

CHUNK_ITL_UNTIL = "2026-08-22"  # SiliconBench's ITL and per-request rate were chunk-counted before this day
AGENT_SPLIT = "agent"

NEAREST_RANK = "SiliconBench's percentiles are nearest-rank"
TOOL_CALLS = "SiliconBench does not count tool-call deltas as output"


def _same(note: str) -> MetricMethod:
    return {"comparable": True, "note": note}


def _differs(note: str) -> MetricMethod:
    return {"comparable": False, "note": note}


def siliconbench_methods(split: str, timestamp: str) -> dict[str, MetricMethod]:
    """`imported.methods` of a SiliconBench result of `split` run at `timestamp` (ISO, its own)."""
    chunk_era = timestamp[:10] < CHUNK_ITL_UNTIL
    agent = split == AGENT_SPLIT

    def output_counted(note: str) -> MetricMethod:
        return _differs(TOOL_CALLS) if agent else _same(note)

    return {
        "output_throughput_tps": _same(
            "output tokens of the successful requests (server usage when every request reported it, else SSE "
            "chunks) per level wall second"
            + ("; an answer made only of tool calls is a failure there" if agent else "")),
        "input_throughput_tps": _same("prompt tokens from server usage per wall second; null unless all reported"),
        "total_token_throughput_tps": _same("prompt plus output tokens per wall second; null unless all reported"),
        "request_throughput_rps": _same("successful requests per wall second, computed on import"),
        "output_tokens_total": _same("server usage when every successful request reported it, else SSE chunks"),
        "input_tokens_total": _same("server usage prompt tokens; null unless every request reported them"),
        "usage_available": _same("every successful request reported usage.completion_tokens"),
        "wall_time_s": _same("the level's measured requests, first start to last end"),
        "chunks_total": output_counted("SSE events with content or reasoning"),
        "tokens_per_chunk": output_counted("output tokens per SSE chunk"),
        "itl_per_chunk": output_counted("tokens per chunk above cellbench's bundling threshold, computed on import"),
        "chunk_divergence": _same("share of requests whose usage tokens and chunks differ by over 5%, read from "
                                  "SiliconBench's warning; absent when it gave none"),
        "failed": _differs(TOOL_CALLS + ", and fails an answer without content") if agent else _same(
            "any exception, HTTP error, 300 s timeout, or an answer without content"),
        "errors": _differs("SiliconBench records a failure count and up to 5 messages, no error types"),
        "ttft_ms.mean": output_counted("first content or reasoning chunk after the request was sent"),
        "ttft_ms.p50": _differs(NEAREST_RANK),
        "ttft_ms.p99": _differs(NEAREST_RANK),
        "e2el_ms.mean": _same("request sent to stream closed"),
        "e2el_ms.p50": _differs(NEAREST_RANK),
        "e2el_ms.p99": _differs(NEAREST_RANK),
        "itl_ms.mean": _differs("SiliconBench's is per chunk, averaged per request" if chunk_era
                                else "SiliconBench's avg is the first-to-last chunk span per token"),
        "itl_ms.p50": _differs("SiliconBench's is per chunk, the median of per-request means"),
        "decode_tps.mean": _differs("SiliconBench's avg is token-weighted, not a mean of per-request rates"),
        "decode_tps.p50": _differs("SiliconBench's per-request rate runs to the end of the stream"
                                   + (" and counts chunks" if chunk_era else "")),
    }
