"""Request traces (mooncake, BurstGPT) and prompts made to their token lengths (`--trace-file`)."""

from bench.setup.traces.parse import (
    BURSTGPT,
    MOONCAKE,
    Trace,
    TraceEntry,
    TraceError,
    load_trace,
    looks_like_trace,
)
from bench.setup.traces.synth import Synthesiser, TokenizerMissing, check_tokenizer, tokenizer_path, trace_prompts

__all__ = ["BURSTGPT", "MOONCAKE", "Synthesiser", "TokenizerMissing", "Trace", "TraceEntry", "TraceError",
           "check_tokenizer", "load_trace", "looks_like_trace", "tokenizer_path", "trace_prompts"]
