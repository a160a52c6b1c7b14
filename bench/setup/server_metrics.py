"""What a framework's server says about itself on Prometheus's /metrics, as an adapter declares it.

An adapter names, for the concepts below that its server has, the sample that carries it; the
cell scrapes the path around and during each level (bench.run.scrape) and stores each concept
under its cellbench name, so that vLLM's `vllm:num_requests_waiting`, SGLang's
`sglang:num_queue_reqs` and llama-server's `llamacpp:requests_deferred` all read `waiting`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

COUNTERS = {"generated_tokens": "output tokens the server generated",
            "prompt_tokens": "prompt tokens it processed (llama-server: excluding those it reused from its cache)",
            "prefix_cache_hits": "prompt tokens served from its prefix cache",
            "prefix_cache_queries": "prompt tokens looked up in its prefix cache"}
GAUGES = {"running": "requests it was running", "waiting": "requests queued in it, not yet running",
          "kv_cache_usage": "the share of its KV cache in use (0-1)",
          "prefix_cache_hit_rate": "its own prefix-cache hit rate (0-1)"}
HISTOGRAMS = {"ttft": "its time to first token", "itl": "its time between output tokens",
              "queue": "time requests waited in its queue", "e2e": "its end-to-end request latency"}


@dataclass(frozen=True)
class ServerMetrics:
    """Where a server's metrics are and which sample is which concept (COUNTERS, GAUGES, HISTOGRAMS:
    a counter's or gauge's sample name, a histogram's base name, its `_sum` and `_count` read)."""

    flags: tuple[str, ...] = ()  # the serve flags that turn the endpoint on (llama-server --metrics)
    path: str = "/metrics"
    counters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    gauges: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    histograms: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for named, known in ((self.counters, COUNTERS), (self.gauges, GAUGES), (self.histograms, HISTOGRAMS)):
            if unknown := set(named) - set(known):
                raise ValueError(f"not a server metric cellbench knows: {sorted(unknown)}")
