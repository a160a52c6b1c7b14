"""The metrics of docs/metrics.md: per-request definitions, the metric table, statistics and a
level's summary, each defined once, with its formula.

- `requests`: the per-request functions (TTFT, TPOT, ITL, ...), a formula each;
- `table`: the per-request distribution metrics a level reports, one declarative row each;
- `stats/`: how sure a figure is. `stats.statistics`: a Stats block (mean, min, max, stdev,
  percentiles) and rates of arrivals; `stats.intervals`: each percentile's distribution-free 95%
  interval, the block's `ci95` (ITL's from its gaps' effective number: a request's gaps move
  together); `stats.change`: whether a difference between two runs is real;
- `level`: `summarize_level`, a level's `Level` block, and the blocks beside the stats;
- `audits`: a level's token accounting and output length audits, and the annotations they give;
- `client`: the load generator's health over a level; `reasoning`: a reasoning model's thinking;
- `blocks`: the TypedDicts of a level of the result document.

The names below are the ones the rest of the suite uses; import them from here.
"""

from bench.core.metrics.audits import DIVERGENCE_BAND, DIVERGENCE_WARN_FRACTION, audit_lines, level_audits
from bench.core.metrics.client import STARVED_CPUS_BUSY, STARVED_RUN_QUEUE_WAIT, client_health
from bench.core.metrics.level import (
    BUNDLING_TOKENS_PER_CHUNK,
    ERROR_SAMPLES_PER_TYPE,
    chunk_divergence,
    dominant_error,
    error_counts,
    error_samples,
    input_tokens_total,
    level_identity,
    open_loop_block,
    output_tokens_total,
    prompt_reuse,
    summarize_level,
    tokens_per_chunk,
    usage_available,
    wall_span,
    warmup_summary,
)
from bench.core.metrics.requests import (
    decode_rate,
    e2el,
    input_tokens,
    itl,
    output_tokens,
    queue_delay,
    schedule_lag,
    tpot,
    ttfa,
    ttfb,
    ttft,
)
from bench.core.metrics.stats.statistics import PERCENTILES, Stats, arrival_rate, percentile, stats_block

__all__ = [
    "BUNDLING_TOKENS_PER_CHUNK", "DIVERGENCE_BAND", "DIVERGENCE_WARN_FRACTION", "ERROR_SAMPLES_PER_TYPE",
    "PERCENTILES", "STARVED_CPUS_BUSY", "STARVED_RUN_QUEUE_WAIT", "Stats", "arrival_rate", "audit_lines",
    "chunk_divergence", "client_health", "decode_rate", "dominant_error", "e2el", "error_counts", "error_samples",
    "input_tokens", "input_tokens_total", "itl", "level_audits", "level_identity", "open_loop_block", "output_tokens",
    "output_tokens_total",
    "percentile", "prompt_reuse", "queue_delay", "schedule_lag", "stats_block", "summarize_level",
    "tokens_per_chunk", "tpot", "ttfa", "ttfb", "ttft", "usage_available", "wall_span", "warmup_summary",
]
