"""guidellm 0.8.1's names for cellbench's figures, read in its per-request statistics
(guidellm/schemas/base/request_stats.py), the HTTP backend that stamps the times
(guidellm/backends/openai/http.py: time.time() per SSE line) and the benchmark's summary
(guidellm/benchmark/schemas/metrics.py). A name is its console table's (group and column:
"Output Tokens Per Sec") where the console shows the figure (guidellm/benchmark/outputs/console.py),
else its field's."""

from __future__ import annotations

from bench.core.crosswalk.entry import PeerMetric, none

VERSION = "0.8.1"
STATS = "guidellm/schemas/base/request_stats.py"
HTTP = "guidellm/backends/openai/http.py"
SUMMARY = "guidellm/benchmark/schemas/metrics.py"

_FIRST = ("its first token is the first SSE line with reasoning, content or tool_calls "
          "(guidellm/backends/openai/request_handlers.py), as cellbench's output-bearing chunk")
_TOKENS = ("output tokens are usage's, else the number of SSE lines that carried a token; cellbench's, usage else "
           "output chunks")
_WINDOW = ("a rate over the measurement window (its time-weighted mean is the count over the window); cellbench's "
           "divides by the wall time, first send to last end")

ENTRIES: tuple[PeerMetric, ...] = (
    PeerMetric("ttft_ms", "TTFT", "time_to_first_token_ms", "first_token_iteration − request_start", "same",
               _FIRST, STATS),
    PeerMetric("ttfa_ms", "TTFOT", "time_to_first_output_token_ms",
               "first_output_token_iteration − request_start (the first line with content or tool_calls)", "same",
               "reasoning is not output to it, as cellbench's answer", STATS),
    none("ttfb_ms", "no time to the first byte in its metrics (it stamps the first line, first_request_iteration, "
         "but reports no figure of it)", HTTP),
    PeerMetric("tpot_ms", "ITL", "inter_token_latency_ms",
               "(last_token_iteration − first_token_iteration) / (output_tokens − 1)", "close",
               "guidellm's ITL is cellbench's TPOT, ending at the last token's line instead of `[DONE]`; "
               f"guidellm's own TPOT (time_per_output_token_ms) is (last token − request start) / output tokens, "
               f"the first token included, and matches no cellbench figure; {_TOKENS}", STATS),
    none("itl_ms", "no gaps between chunks: its ITL is one mean per request (cellbench's TPOT)", STATS),
    PeerMetric("e2el_ms", "Request Latency", "request_latency", "request_end − request_start (s)", "same",
               "request_end is stamped after the stream ends at `[DONE]` (guidellm/backends/openai/http.py), as "
               "cellbench's t_end", STATS),
    none("decode_tps", "no per-request decode rate: its per-request output_tokens_per_second is output tokens / "
         "request latency, TTFT included; 1000 / ITL is the nearest", STATS),
    PeerMetric("schedule_lag_ms", "Request dispatch delay", "request_dispatch_delay",
               "request_start − targeted_start, for rate strategies (constant, poisson, trace) only", "different",
               "it includes the wait for a place under a concurrency limit, which cellbench reports apart as "
               "the queueing delay", STATS),
    PeerMetric("queue_delay_ms", "Request dispatch delay", "request_dispatch_delay",
               "request_start − targeted_start, for rate strategies (constant, poisson, trace) only", "different",
               "it includes the client's own lateness, which cellbench reports apart as the schedule lag", STATS),
    PeerMetric("output_throughput_tps", "Output Tokens Per Sec", "output_tokens_per_second",
               "rate of output tokens over the window: each request's first token at its line, the rest spread "
               "evenly from there to its last token", "close", f"{_WINDOW}; {_TOKENS}", SUMMARY),
    PeerMetric("input_throughput_tps", "Input Tokens Per Sec", "prompt_tokens_per_second",
               "rate of prompt tokens over the window, counted at each request's first token", "close", _WINDOW,
               SUMMARY),
    PeerMetric("total_token_throughput_tps", "Total Tokens Per Sec", "tokens_per_second",
               "rate of prompt and output tokens over the window", "close", f"{_WINDOW}; {_TOKENS}", SUMMARY),
    PeerMetric("request_throughput_rps", "Requests Per Sec", "requests_per_second",
               "rate of request ends over the window", "close", _WINDOW, SUMMARY),
    PeerMetric("goodput.goodput_rps", "Goodput Per Sec", "request_goodput",
               "rate over the window of the successful requests within every objective (ttft_ms, tpot_ms, e2el_ms)",
               "close", "its tpot_ms objective is compared with its ITL (cellbench's TPOT, to the last token); "
               f"{_WINDOW}", SUMMARY),
    PeerMetric("wall_time_s", "Timings Dur", "duration", "measure_end_time − measure_start_time", "close",
               "the measurement window, warm-up and cool-down left out, is set by the scheduler, not by the "
               "requests; cellbench's wall time is the measured requests' first send to last end",
               "guidellm/benchmark/schemas/benchmark.py"),
)
