"""A level's summary: the `Level` block of the result, built from the records of a `LevelRun`.

Counts, throughputs, the stats blocks of the metric table (bench.core.metrics.table), errors,
client health (bench.core.metrics.client), prompt reuse, warm-up and, for a reasoning model,
its reasoning (bench.core.metrics.reasoning); formulas in docs/metrics.md. Latency statistics
use successful requests only (each metric's `over` says).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from bench.core import figures
from bench.core.level_run import LevelRun, rate_json
from bench.core.metrics.audits import DIVERGENCE_WARN_FRACTION, NOT_SENT, compared, diverges, level_audits
from bench.core.metrics.blocks import (
    ChunkDivergence,
    DominantError,
    DurationBlock,
    Level,
    LevelIdentity,
    OpenLoopBlock,
    PromptReuse,
    ThroughputIntervals,
    Uncertainty,
    Warmup,
)
from bench.core.metrics.client import client_health
from bench.core.metrics.reasoning import reasoning_summary
from bench.core.metrics.requests import queue_delay
from bench.core.metrics.stats.blocks import Interval
from bench.core.metrics.stats.intervals import MIN_WINDOWS, window_rates, windows_interval
from bench.core.metrics.stats.statistics import arrival_rate
from bench.core.metrics.table import level_stats
from bench.core.records import ErrorSample, RequestRecord, content_encodings

BUNDLING_TOKENS_PER_CHUNK = 1.05  # above: a chunk carries several tokens, ITL is per chunk
ERROR_SAMPLES_PER_TYPE = 5
WINDOWS = 8  # time windows of a level's within-run throughput interval
REQUESTS_PER_WINDOW = 2  # fewer windows for a short level: on average this many finished requests in each


# ---------------------------------------------------------------- per level


def wall_span(records: Iterable[RequestRecord]) -> tuple[float, float] | None:
    """(first t_send, last t_end) over the records that have them; None when none was sent."""
    sends = [r.t_send for r in records if r.t_send is not None]
    ends = [r.t_end for r in records if r.t_end is not None]
    if not sends or not ends:
        return None
    return min(sends), max(ends)


def _rate(amount: float | None, wall: float) -> float | None:
    return amount / wall if amount is not None and wall > 0 else None


def open_loop_block(run: LevelRun) -> OpenLoopBlock:
    """An open-loop level's schedule and how it went: offered_rate_rps = `arrival_rate` of the
    schedule's offsets (every measured request asked for: the rate the seeded schedule really
    offers, not the nominal one), achieved_rate_rps = `arrival_rate` of the measured requests'
    t_send; queued = requests that waited for a place under the cap (the level's queue_delay_ms
    is over every measured request sent: a failed one waited as well); peak_in_flight = the most
    requests in flight at once (never above max_concurrency)."""
    ol = run.config.open_loop
    assert ol is not None, "an open-loop level"
    sent = [r for r in run.records if r.t_send is not None]
    block: OpenLoopBlock = {
        "arrivals": ol.arrivals,
        "burstiness": ol.burstiness,
        "max_concurrency": ol.max_concurrency,
        "seed": ol.seed,
        "offered_rate_rps": arrival_rate(run.schedule),
        "achieved_rate_rps": arrival_rate([r.t_send for r in sent if r.t_send is not None]),
        "queued": sum(1 for r in sent if (d := queue_delay(r)) is not None and d > 0),
        "peak_in_flight": run.peak_in_flight,
    }
    if ol.ramp is not None:
        block["ramp"] = {"shape": ol.ramp.shape, "start_rps": ol.ramp.start_rate}
    if (trace := ol.trace) is not None:
        block["trace"] = {"file": trace.file, "sha256": trace.sha256, "format": trace.format,
                          "entries": len(trace.offsets), "sent": len(run.records), "skipped": trace.skipped}
    return block


def duration_block(run: LevelRun) -> DurationBlock | None:
    """--duration's bound on the level and what ended it; None without --duration."""
    if run.config.duration_s is None or run.ended_by is None:
        return None
    return {"limit_s": run.config.duration_s, "ended_by": run.ended_by, "sent": len(run.records),
            "asked": run.config.requests}


def level_identity(run: LevelRun) -> LevelIdentity:
    """What the level was: {"concurrency": N} (closed loop), or {"request_rate": R or "inf",
    "open_loop": `open_loop_block`}."""
    ol = run.config.open_loop
    if ol is None:
        return {"concurrency": run.config.concurrency}
    return {"request_rate": rate_json(ol.rate), "open_loop": open_loop_block(run)}


def output_tokens_total(ok: Sequence[RequestRecord]) -> int:
    """Σ output tokens of successful requests (usage where reported, chunks otherwise)."""
    return sum(r.output_tokens for r in ok)


def input_tokens_total(ok: Sequence[RequestRecord]) -> int | None:
    """Σ usage.prompt_tokens, None unless every successful request reported it."""
    counts = [r.usage_prompt_tokens for r in ok]
    if not counts or any(c is None for c in counts):
        return None
    return sum(counts)  # type: ignore[arg-type]


def tokens_per_chunk(ok: Sequence[RequestRecord]) -> float | None:
    """Σ output tokens / Σ output chunks over successful requests (> 1: tokens are bundled)."""
    chunks = sum(r.n_chunks for r in ok)
    return output_tokens_total(ok) / chunks if chunks else None


def usage_available(ok: Sequence[RequestRecord]) -> bool:
    """True when there were successes and every one reported usage.completion_tokens."""
    return bool(ok) and all(r.usage_completion_tokens is not None for r in ok)


def chunk_divergence(ok: Sequence[RequestRecord]) -> ChunkDivergence:
    """fraction = share of successful requests with usage whose completion_tokens / chunks lies
    outside [0.95, 1.05]; warning = fraction > 0.05. Per-chunk ITL is then not comparable across
    frameworks; TTFT, TPOT and throughput are (they use token counts). None without usage."""
    with_usage = compared(ok)  # bench.core.metrics.audits: the token accounting audit's requests
    if not with_usage:
        return {"fraction": None, "warning": False}
    fraction = sum(1 for r in with_usage if diverges(r)) / len(with_usage)
    return {"fraction": fraction, "warning": fraction > DIVERGENCE_WARN_FRACTION}


def within_run(ok: Sequence[RequestRecord], start: float, end: float,
               concurrency: int = 0) -> tuple[ThroughputIntervals, Uncertainty]:
    """A level's throughput_ci95 from W time windows of [start, end] (windows_interval, batch means):
    W = WINDOWS, or fewer so that each holds on average REQUESTS_PER_WINDOW successful requests, or
    at a closed-loop `concurrency` above that one wave of them (slots started together, asking for
    as many tokens, end together: a window shorter than a wave sees all or none of it); below
    MIN_WINDOWS no interval (null, with the `needs_n` successful requests that would give one).
    Output tokens count where their chunk arrived (a request's tokens spread evenly over its
    chunks, so usage counts stay exact; one without chunks at its t_end), a request where it ended."""
    per_window = max(REQUESTS_PER_WINDOW, concurrency)
    w = min(WINDOWS, len(ok) // per_window)
    if w < MIN_WINDOWS or not end > start:
        unbounded: Interval = {"low": None, "high": None, "needs_n": MIN_WINDOWS * per_window}
        return ({"output_throughput_tps": unbounded, "request_throughput_rps": unbounded.copy()},
                {"basis": "within-run", "rounds": 1, "windows": None})
    ends = [r.t_end if r.t_end is not None else end for r in ok]
    times: list[float] = []
    tokens: list[float] = []
    for r, t_end in zip(ok, ends, strict=True):
        at = r.chunk_times or [t_end]
        times.extend(at)
        tokens.extend([r.output_tokens / len(at)] * len(at))
    out = windows_interval(window_rates(times, tokens, start, end, w)) or {"low": None, "high": None}
    req = windows_interval(window_rates(ends, [1.0] * len(ends), start, end, w)) or {"low": None, "high": None}
    return {"output_throughput_tps": out, "request_throughput_rps": req}, {"basis": "within-run", "rounds": 1,
                                                                           "windows": w}


def error_counts(records: Iterable[RequestRecord]) -> dict[str, int]:
    """{error type: count} over failed requests."""
    return dict(Counter(r.error.type.value for r in records if r.error is not None))


def error_samples(records: Iterable[RequestRecord]) -> dict[str, list[ErrorSample]]:
    """Up to 5 samples per error type, first occurrences of distinct messages."""
    samples: dict[str, list[ErrorSample]] = {}
    seen: set[tuple[str, str]] = set()
    for r in records:
        e = r.error
        if e is None or (e.type.value, e.message) in seen:
            continue
        bucket = samples.setdefault(e.type.value, [])
        if len(bucket) < ERROR_SAMPLES_PER_TYPE:
            seen.add((e.type.value, e.message))
            bucket.append(e.sample(r.prompt_name))
    return samples


def dominant_error(records: Iterable[RequestRecord]) -> DominantError | None:
    """The most frequent (error type, HTTP status) pair; ties go to the first seen."""
    counts = Counter((r.error.type.value, r.error.http_status) for r in records if r.error is not None)
    if not counts:
        return None
    (kind, status), n = counts.most_common(1)[0]
    return {"type": kind, "http_status": status, "count": n}


def prompt_reuse(run: LevelRun) -> PromptReuse:
    """What the level's requests could have taken from a cache (a prompt cache, prefix caching):
    unique_prompts = distinct prompts among the measured requests, repeats = the rest; with
    unique prefixes (--unique-prompts) no request shares an opening with another. may_hit_cache
    = without unique prefixes, a prompt repeated or the server warmed before the level (an
    earlier level on it, or an --endpoint server of unknown history)."""
    sent = len(run.records)
    unique = len({r.prompt_name for r in run.records})
    nonced = run.config.nonce is not None
    warmed_by = run.config.server_warmed
    return {
        "requests": sent,
        "unique_prompts": unique,
        "repeats": sent - unique,
        "unique_prefixes": nonced,
        "server_warmed": warmed_by is not None,
        "warmed_by": warmed_by,
        "may_hit_cache": not nonced and (sent > unique or warmed_by is not None),
    }


def warmup_summary(records: Sequence[RequestRecord]) -> Warmup:
    """Warm-up requests, reported apart from the measured ones."""
    ok = sum(1 for r in records if r.ok)
    span = wall_span(records)
    return {
        "requests": len(records),
        "successful": ok,
        "failed": len(records) - ok,
        "wall_time_s": span[1] - span[0] if span else 0.0,
        "errors": error_counts(records),
        "error_samples": error_samples(records),
    }


def summarize_level(
    run: LevelRun, *, client_cpu_limit: float = 0.8, schedule_lag_limit_ms: float = 50.0, not_sent: str = NOT_SENT
) -> Level:
    """One level as the result holds it: counts, throughputs, the metric table's stats blocks,
    errors, client health, prompt reuse, warm-up (and a reasoning model's `reasoning`).

    wall = run.t_end - run.t_start (first t_send .. last t_end of the measured requests);
    output/request/input/total throughput = Σ (successful) / wall, None when unknown; the output and
    request throughputs' within-run interval (`within_run`). `not_sent`:
    why the requests went without ignore_eos, for the output length audit (bench.core.metrics.audits).
    """
    records = run.records
    ok = [r for r in records if r.ok]
    wall = run.t_end - run.t_start
    out_total = output_tokens_total(ok)
    in_total = input_tokens_total(ok)
    per_chunk = tokens_per_chunk(ok)
    stats = level_stats(ok, records, open_loop=run.config.open_loop is not None, reasoning=reasoning_summary(ok),
                        figures=figures.measured(run))
    throughput_ci95, uncertainty = within_run(ok, run.t_start, run.t_end, run.config.concurrency)
    level: Level = {
        **level_identity(run),
        "num_requests": len(records),
        "successful": len(ok),
        "failed": len(records) - len(ok),
        "partial": run.partial,
        "stop_reason": run.stop_reason,
        "wall_time_s": wall,
        "started_at": run.started_at,
        "output_tokens_total": out_total,
        "input_tokens_total": in_total,
        "chunks_total": sum(r.n_chunks for r in ok),
        "output_throughput_tps": _rate(out_total, wall),
        "request_throughput_rps": _rate(len(ok), wall),
        "input_throughput_tps": _rate(in_total, wall),
        "total_token_throughput_tps": _rate(None if in_total is None else in_total + out_total, wall),
        "tokens_per_chunk": per_chunk,
        "usage_available": usage_available(ok),
        "itl_per_chunk": per_chunk is not None and per_chunk > BUNDLING_TOKENS_PER_CHUNK,
        "chunk_divergence": chunk_divergence(ok),
        "audits": level_audits(ok, run.config.extra_body, not_sent=not_sent),
        **stats,  # the metric table's, in its order (a reasoning model's `reasoning` in it), then the figures'
        "errors": error_counts(records),
        "error_samples": error_samples(records),
        "dominant_error": dominant_error(records),
        "served_models": sorted({r.served_model for r in records if r.served_model is not None}),
        "client": client_health(run.client, cpu_limit=client_cpu_limit, schedule_lag_limit_ms=schedule_lag_limit_ms),
        "prompt_reuse": prompt_reuse(run),
        "warmup": warmup_summary(run.warmup_records),
        "throughput_ci95": throughput_ci95,  # within this run only: --rounds adds the run-to-run noise
        "uncertainty": uncertainty,
        **content_encodings(records),  # only when a server compressed a stream anyway
    }
    if (bound := duration_block(run)) is not None:
        level["duration"] = bound
    return level
