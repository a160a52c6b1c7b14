"""AIPerf 0.13.0's names for cellbench's figures, read in its metric classes (aiperf/metrics/types/:
each class's `tag` is the export's key, its `header` the console's name) and in the chat endpoint's
parser, which decides what a content response is."""

from __future__ import annotations

from bench.core.crosswalk.entry import PeerMetric, none

VERSION = "0.13.0"
TYPES = "aiperf/metrics/types/"

_CONTENT = ("a content response is a chunk with text, reasoning or a tool call "
            "(aiperf/endpoints/openai_chat.py), as cellbench's output-bearing chunk")
_LAST = ("it ends at the last content response: the usage chunk and `[DONE]` do not count; cellbench's E2EL ends "
         "at `[DONE]` (or the close after a finish_reason)")
_TOKENS = ("output tokens come from its own tokenizer unless --use-server-token-count (then usage, reasoning "
           "included); cellbench's are usage, else output chunks")
_DURATION = ("the benchmark duration runs from the first request's start to the last content response; cellbench's "
             "wall time ends at the last `[DONE]`")

ENTRIES: tuple[PeerMetric, ...] = (
    PeerMetric("ttft_ms", "Time to First Token", "time_to_first_token",
               "first content response − request start", "same", _CONTENT, TYPES + "ttft_metric.py"),
    PeerMetric("ttfa_ms", "Time to First Output Token", "time_to_first_output_token",
               "first response with non-reasoning text or a tool call − request start", "same",
               "reasoning is not output to it, as cellbench's answer", TYPES + "time_to_first_output_token_metric.py"),
    PeerMetric("ttfb_ms", "HTTP Waiting (TTFB)", "http_req_waiting",
               "response_receive_start − request_send_end (with HTTP tracing only)", "different",
               "it starts when the request was fully sent; cellbench's TTFB starts when the send began, so the "
               "connect and the write are in it", TYPES + "http_trace_metrics.py"),
    PeerMetric("tpot_ms", "Inter Token Latency", "inter_token_latency",
               "(request_latency − TTFT) / (OSL − 1); OSL − the first chunk's tokens with --per-chunk-usage", "close",
               f"AIPerf's ITL is cellbench's TPOT, not its ITL; {_LAST}; {_TOKENS}",
               TYPES + "inter_token_latency_metric.py"),
    PeerMetric("itl_ms", "Inter Chunk Latency", "inter_chunk_latency",
               "every gap between consecutive content responses", "same",
               "AIPerf's ICL is cellbench's ITL: per chunk, so longer where a server bundles tokens",
               TYPES + "inter_chunk_latency_metric.py"),
    PeerMetric("e2el_ms", "Request Latency", "request_latency", "last content response − request start", "close",
               _LAST, TYPES + "request_latency_metric.py"),
    PeerMetric("decode_tps", "Output Token Throughput Per User", "output_token_throughput_per_user",
               "1 / ITL = (OSL − 1) / (last content response − first content response)", "close",
               f"the span is cellbench's (first to last output chunk); {_TOKENS}",
               TYPES + "output_token_throughput_metrics.py"),
    PeerMetric("schedule_lag_ms", "Replay Schedule Lag", "replay_sched_lag_p50",
               "p50/p90/p99 of (send time − intended time) − the least of them, in fixed-schedule replay only",
               "different", "it is relative to the least-late request, so a lateness every request shares does "
               "not show; cellbench's is each request's own lateness, in every level",
               TYPES + "replay_sched_lag_metrics.py"),
    none("queue_delay_ms", "no figure for the wait for a place under a concurrency cap", TYPES),
    PeerMetric("output_throughput_tps", "Output Token Throughput", "output_token_throughput",
               "total OSL / benchmark duration", "close", f"{_TOKENS}; {_DURATION}",
               TYPES + "output_token_throughput_metrics.py"),
    PeerMetric("input_throughput_tps", "Input Token Throughput", "input_token_throughput",
               "total ISL / benchmark duration", "close",
               "input tokens come from its tokenizer unless --use-server-token-count; cellbench's from usage only "
               f"(null unless every request reported them); {_DURATION}",
               TYPES + "input_token_throughput_metric.py"),
    PeerMetric("total_token_throughput_tps", "Total Token Throughput", "total_token_throughput",
               "(total ISL + total OSL) / benchmark duration", "close", f"{_TOKENS}; {_DURATION}",
               TYPES + "total_token_throughput.py"),
    PeerMetric("request_throughput_rps", "Request Throughput", "request_throughput",
               "valid request count / benchmark duration", "close", _DURATION,
               TYPES + "request_throughput_metric.py"),
    PeerMetric("goodput.goodput_rps", "Goodput", "goodput", "good request count / benchmark duration", "close",
               f"a good request met every SLO, as in cellbench; {_DURATION}", TYPES + "goodput_metric.py"),
    PeerMetric("wall_time_s", "Benchmark Duration", "benchmark_duration",
               "last content response − first request start", "close", _DURATION,
               TYPES + "benchmark_duration_metric.py"),
)
