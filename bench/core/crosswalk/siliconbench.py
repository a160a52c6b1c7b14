"""SiliconBench's names for cellbench's figures: the keys of its result files' `concurrency_results`
and the labels of its REPORT.md, as its client (scripts/benchmark.py of its repository; it has no
package) computes them in its newest form. Until 2026-08-22 its ITL and per-request throughput
counted chunks, not tokens; cellbench's importer (bench.imports.methods) tells the two apart."""

from __future__ import annotations

from bench.core.crosswalk.entry import PeerMetric, none

SOURCE = "scripts/benchmark.py"

_FIRST = ("its first token is the first content or reasoning chunk, never a tool-call delta (on the agent split an "
          "answer of tool calls alone fails there); cellbench's includes tool calls")
_RANK = "its percentiles are nearest-rank, upper (p99 of 100 is the maximum); cellbench's interpolate"
_SPAN = "first to last chunk, token-weighted over the level (Σ spans / Σ tokens), not a mean of per-request values"

ENTRIES: tuple[PeerMetric, ...] = (
    PeerMetric("ttft_ms", "TTFT", "ttft_avg_ms", "t_first − t_start (ttft_avg_ms, ttft_p50_ms, ttft_p99_ms)",
               "close", f"{_FIRST}; {_RANK}", SOURCE),
    none("ttfa_ms", "no time to the first answer: it sends enable_thinking false", SOURCE),
    none("ttfb_ms", "no time to the first byte", SOURCE),
    PeerMetric("tpot_ms", "ITL", "itl_avg_ms", "Σ (last chunk − first chunk) / Σ (n − 1) over the successful "
               "requests", "close", f"its ITL avg is per token, so cellbench's TPOT, but from {_SPAN}; before "
               "2026-08-22 it was the mean gap between chunks (cellbench's ITL); the importer keeps it under itl_ms",
               SOURCE),
    PeerMetric("itl_ms", "ITL", "itl_p50_ms",
               "median of the per-request (last chunk − first chunk) / (n − 1) above 0", "different",
               "a median of per-request figures, not of the gaps between chunks; per chunk where a server bundles "
               "tokens", SOURCE),
    PeerMetric("e2el_ms", "Latency", "latency_avg_s", "t_end − t_start, after the stream closed (latency_avg_s, "
               "latency_p50_s, latency_p99_s)", "close", _RANK, SOURCE),
    PeerMetric("decode_tps", "Throughput", "throughput_avg_tps",
               "per request (n − 1) / (t_end − t_first); the avg is Σ (n − 1) / Σ (last chunk − first chunk)",
               "different", "the per-request rate (its p50) runs to the end of the stream, not the last chunk, and "
               f"the avg is from {_SPAN}", SOURCE),
    none("schedule_lag_ms", "no measure of the client's own lateness", SOURCE),
    none("queue_delay_ms", "closed loop only: no arrivals, no queue", SOURCE),
    PeerMetric("output_throughput_tps", "Output throughput", "output_throughput_tps",
               "total_output_tokens / wall_time (usage when every request reported it, else chunks)", "same",
               "its wall time is the level's gather, first request to last", SOURCE),
    PeerMetric("input_throughput_tps", "Input throughput", "input_throughput_tps",
               "total_input_tokens / wall_time, null unless every request reported usage", "same", "", SOURCE),
    PeerMetric("total_token_throughput_tps", "Total token throughput", "total_token_throughput_tps",
               "(input + output tokens) / wall_time, null unless every request reported usage", "same", "",
               SOURCE),
    none("request_throughput_rps", "not in its files; cellbench's importer computes successful / wall_time_s",
         SOURCE),
    none("goodput.goodput_rps", "no SLOs, no goodput", SOURCE),
    PeerMetric("wall_time_s", "Wall time", "wall_time_s", "end − start of the level's asyncio.gather", "close",
               "it starts when the tasks are created, just before the first send; cellbench's at the first send",
               SOURCE),
)
