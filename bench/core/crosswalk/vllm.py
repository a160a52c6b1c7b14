"""`vllm bench serve` 0.32's names for cellbench's figures, read in its source: the chat request
function (async_request_openai_chat_completions) stamps the times, `calculate_metrics` and
`benchmark` in serve.py make the figures."""

from __future__ import annotations

from bench.core.crosswalk.entry import PeerMetric, none

VERSION = "0.32.0"
REQ = "vllm/benchmarks/lib/endpoint_request_func.py"
SERVE = "vllm/benchmarks/serve.py"

# What every time below starts at and ends with, said once for the notes.
_FIRST = ("its first token is the first SSE message whose `choices` is non-empty, even when the delta is empty "
          "(a role-only opening message counts); cellbench's is the first delta with content, reasoning or a tool "
          "call")
_LAST = ("its latency ends at the last message with `choices`: the usage-only message after it and `[DONE]` do not "
         "count; cellbench's E2EL ends at `[DONE]` (or the close after a finish_reason)")
_DURATION = ("the duration runs from before the first request is issued to the end of the last task; cellbench's "
             "wall time from the first send to the last end")
_TOKENS = ("output tokens are usage.completion_tokens, else the tokenizer's count of the text; cellbench's, usage "
           "else output chunks")

ENTRIES: tuple[PeerMetric, ...] = (
    PeerMetric("ttft_ms", "TTFT", "mean_ttft_ms", "first message with non-empty choices − st (perf_counter before "
               "the POST)", "close", _FIRST, REQ),
    none("ttfa_ms", "no time to the first answer: reasoning and content are one stream to it", REQ),
    none("ttfb_ms", "no time to the first byte", REQ),
    PeerMetric("tpot_ms", "TPOT", "mean_tpot_ms", "(latency − ttft) / (output_len − 1), for output_len > 1",
               "close", f"the formula is cellbench's; {_LAST}; {_FIRST}; {_TOKENS}", SERVE),
    PeerMetric("itl_ms", "ITL", "mean_itl_ms", "every gap between consecutive messages with non-empty choices",
               "close", "a message whose delta is empty (a role-only opening, the finish_reason message) counts as "
               "a chunk; cellbench counts only output-bearing chunks", REQ),
    PeerMetric("e2el_ms", "E2EL", "mean_e2el_ms", "latency = last message with non-empty choices − st", "close",
               _LAST, REQ),
    none("decode_tps", "no per-request decode rate; 1000 / TPOT is the nearest", SERVE),
    none("schedule_lag_ms", "no measure of the client's own lateness", SERVE),
    PeerMetric("queue_delay_ms", "Client Queue Time", "mean_client_queue_time_ms",
               "start_time − request_arrival_time, with --max-concurrency only, over the successful requests",
               "close", "it starts when the arrival loop released the request (after its sleep), not at the "
               "scheduled time, and ends at the send: the client's own delay after the request got its place, "
               "which cellbench counts as schedule lag, is in it", SERVE),
    PeerMetric("output_throughput_tps", "Output token throughput", "output_throughput",
               "Σ output_len / benchmark_duration", "close", f"{_TOKENS}; {_DURATION}", SERVE),
    none("input_throughput_tps", "no input rate of its own: total_input_tokens / duration is the nearest", SERVE),
    PeerMetric("total_token_throughput_tps", "Total token throughput", "total_token_throughput",
               "(Σ prompt_len + Σ output_len) / benchmark_duration", "close",
               "prompt_len is usage.prompt_tokens when reported, else the dataset's token count, so it is never "
               f"null; cellbench's is null unless every request reported usage; {_DURATION}", SERVE),
    PeerMetric("request_throughput_rps", "Request throughput", "request_throughput",
               "completed / benchmark_duration", "close", _DURATION, SERVE),
    PeerMetric("goodput.goodput_rps", "Request goodput", "request_goodput",
               "requests within every --goodput limit (ttft, tpot, e2el) / benchmark_duration", "close",
               f"no ITL objective; a request with one output token has TPOT 0 and meets a TPOT limit, as in cellbench; "
               f"{_DURATION}", SERVE),
    PeerMetric("wall_time_s", "Benchmark duration", "duration",
               "perf_counter() after the last task − perf_counter() before the first request is issued", "close",
               _DURATION, SERVE),
)
