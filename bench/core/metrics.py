"""The metrics of docs/metrics.md, each defined once, with its formula.

Per-request functions take a `RequestRecord` and return seconds (or tokens, tokens/s); they
return None when a stamp they need is missing. Level functions aggregate over the measured
records of a `LevelRun`; latency statistics use successful requests only.
Statistics: mean, min, max, population stdev (ddof=0, numpy's default) and percentiles by
linear interpolation (numpy's default; p99 of 1..100 is 99.01, never nearest-rank).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bench.core.level_run import ClientHealth, LevelRun, rate_json
from bench.core.reasoning import reasoning_summary
from bench.core.records import RequestRecord, content_encodings

PERCENTILES = (50, 90, 95, 99)
DIVERGENCE_BAND = (0.95, 1.05)  # completion_tokens / chunks outside it: the request diverges
DIVERGENCE_WARN_FRACTION = 0.05
BUNDLING_TOKENS_PER_CHUNK = 1.05  # above: a chunk carries several tokens, ITL is per chunk
ERROR_SAMPLES_PER_TYPE = 5


# ---------------------------------------------------------------- per request


def _diff(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else later - earlier


def ttft(r: RequestRecord) -> float | None:
    """TTFT = t_first_token - t_send (first content, reasoning or tool-call delta)."""
    return _diff(r.t_first_token, r.t_send)


def ttfa(r: RequestRecord) -> float | None:
    """TTFA = t_first_answer - t_send (first content or tool-call delta); None when no answer came."""
    return _diff(r.t_first_answer, r.t_send)


def ttfb(r: RequestRecord) -> float | None:
    """TTFB = t_first_byte - t_send (first response body byte)."""
    return _diff(r.t_first_byte, r.t_send)


def schedule_lag(r: RequestRecord) -> float | None:
    """Schedule lag = t_send - t_sched: the client's own delay in sending (open loop: t_send -
    t_admitted, the delay once the request had its place; the wait for it is `queue_delay`)."""
    return _diff(r.t_send, r.t_admitted if r.t_admitted is not None else r.t_sched)


def queue_delay(r: RequestRecord) -> float | None:
    """Queueing delay = t_admitted - t_sched: how long an open-loop arrival waited for a place
    under --max-concurrency (0 when the cap did not bind); None in a closed loop."""
    return _diff(r.t_admitted, r.t_sched)


def e2el(r: RequestRecord) -> float | None:
    """E2EL = t_end - t_send."""
    return _diff(r.t_end, r.t_send)


def output_tokens(r: RequestRecord) -> tuple[int, str]:
    """Output tokens = usage.completion_tokens when reported (source "usage"), else the count
    of output-bearing chunks (source "chunks")."""
    return r.output_tokens, r.tokens_source


def input_tokens(r: RequestRecord) -> int | None:
    """Input tokens = usage.prompt_tokens, else None (never guessed)."""
    return r.usage_prompt_tokens


def tpot(r: RequestRecord) -> float | None:
    """TPOT = (E2EL - TTFT) / (output_tokens - 1), only when output_tokens >= 2."""
    n = r.output_tokens
    total, first = e2el(r), ttft(r)
    if n < 2 or total is None or first is None:
        return None
    return (total - first) / (n - 1)


def itl(r: RequestRecord) -> list[float]:
    """ITL = [c[i] - c[i-1] for consecutive output chunk times c] (per chunk, not per token)."""
    c = r.chunk_times
    return [c[i] - c[i - 1] for i in range(1, len(c))]


def decode_rate(r: RequestRecord) -> float | None:
    """Decode rate = (output_tokens - 1) / (t_last_chunk - t_first_token), tokens/s.

    None with fewer than 2 tokens or a zero span (all output in one read)."""
    n = r.output_tokens
    if n < 2 or not r.chunk_times or r.t_first_token is None:
        return None
    span = r.chunk_times[-1] - r.t_first_token
    return (n - 1) / span if span > 0 else None


# ---------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile by linear interpolation (numpy default); None for no values."""
    return float(np.percentile(values, q)) if len(values) else None


def stats_block(values: Iterable[float | None], scale: float = 1.0) -> dict[str, Any]:
    """{n, mean, min, max, stdev, p50, p90, p95, p99} of the non-None values times `scale`.

    stdev is the population standard deviation (ddof=0). All values None when n == 0."""
    arr = np.array([v for v in values if v is not None], dtype=float) * scale
    block: dict[str, Any] = {"n": int(arr.size)}
    if arr.size == 0:
        block.update(dict.fromkeys(("mean", "min", "max", "stdev"), None))
        block.update({f"p{q}": None for q in PERCENTILES})
        return block
    block.update(mean=float(arr.mean()), min=float(arr.min()), max=float(arr.max()), stdev=float(arr.std()))
    for q, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True):
        block[f"p{q}"] = float(v)
    return block


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


def arrival_rate(times: Sequence[float]) -> float | None:
    """(n - 1) / (last - first) of n >= 2 arrival times in any order; None otherwise or for a zero span."""
    if len(times) < 2:
        return None
    return _rate(len(times) - 1, max(times) - min(times))


def open_loop_block(run: LevelRun) -> dict[str, Any]:
    """An open-loop level's schedule and how it went: offered_rate_rps = `arrival_rate` of the
    schedule's offsets (every measured request asked for: the rate the seeded schedule really
    offers, not the nominal one), achieved_rate_rps = `arrival_rate` of the measured requests'
    t_send; queued = requests that waited for a place under the cap (the level's queue_delay_ms
    is over every measured request sent: a failed one waited as well); peak_in_flight = the most
    requests in flight at once (never above max_concurrency)."""
    ol = run.config.open_loop
    assert ol is not None, "an open-loop level"
    sent = [r for r in run.records if r.t_send is not None]
    return {
        "arrivals": ol.arrivals,
        "burstiness": ol.burstiness,
        "max_concurrency": ol.max_concurrency,
        "seed": ol.seed,
        "offered_rate_rps": arrival_rate(run.schedule),
        "achieved_rate_rps": arrival_rate([r.t_send for r in sent if r.t_send is not None]),
        "queued": sum(1 for r in sent if (d := queue_delay(r)) is not None and d > 0),
        "peak_in_flight": run.peak_in_flight,
    }


def level_identity(run: LevelRun) -> dict[str, Any]:
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


def chunk_divergence(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """fraction = share of successful requests with usage whose completion_tokens / chunks lies
    outside [0.95, 1.05]; warning = fraction > 0.05. Per-chunk ITL is then not comparable across
    frameworks; TTFT, TPOT and throughput are (they use token counts). None without usage."""
    low, high = DIVERGENCE_BAND
    ratios = [
        r.usage_completion_tokens / r.n_chunks for r in ok if r.usage_completion_tokens is not None and r.n_chunks
    ]
    if not ratios:
        return {"fraction": None, "warning": False}
    fraction = sum(1 for x in ratios if not low <= x <= high) / len(ratios)
    return {"fraction": fraction, "warning": fraction > DIVERGENCE_WARN_FRACTION}


def error_counts(records: Iterable[RequestRecord]) -> dict[str, int]:
    """{error type: count} over failed requests."""
    return dict(Counter(r.error.type.value for r in records if r.error is not None))


def error_samples(records: Iterable[RequestRecord]) -> dict[str, list[dict[str, Any]]]:
    """Up to 5 samples per error type, first occurrences of distinct messages."""
    samples: dict[str, list[dict[str, Any]]] = {}
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


def dominant_error(records: Iterable[RequestRecord]) -> dict[str, Any] | None:
    """The most frequent (error type, HTTP status) pair; ties go to the first seen."""
    counts = Counter((r.error.type.value, r.error.http_status) for r in records if r.error is not None)
    if not counts:
        return None
    (kind, status), n = counts.most_common(1)[0]
    return {"type": kind, "http_status": status, "count": n}


STARVED_CPUS_BUSY = 0.9  # the client's CPUs this busy (every process): the host kept it from running
STARVED_RUN_QUEUE_WAIT = 0.1  # the loop thread waited this share of the phase for a CPU: likewise


def client_health(
    health: ClientHealth, *, cpu_limit: float = 0.8, schedule_lag_limit_ms: float = 50.0
) -> dict[str, Any]:
    """The client's health over a level, and whether its timing limited the level's numbers.

    A level is late when the schedule lag p99 > schedule_lag_limit_ms, or the client's CPU share
    > cpu_limit (share of one core). `limited_by` says why:
    - "client": CPU share > cpu_limit, the client saturated by its own work (`client_bound`);
    - "host": late with CPU to spare, while the client's CPUs were >= 90% busy (every process)
      or its loop thread waited >= 10% of the phase for a CPU: the host did not let it run;
    - "unknown": late with CPU to spare and no sign of a busy host (blocked on I/O, paused).
    Either way every time stamp of the level includes the client's delay."""
    reasons = []
    if health.cpu_share > cpu_limit:
        reasons.append(f"client CPU {health.cpu_share:.2f} of a core > {cpu_limit:.2f}")
    lag = health.schedule_lag_p99_ms
    if lag is not None and lag > schedule_lag_limit_ms:
        reasons.append(f"schedule lag p99 {lag:.1f} ms > {schedule_lag_limit_ms:g} ms")
    host = health.host
    starved = host is not None and (
        (host.client_cpus_busy is not None and host.client_cpus_busy >= STARVED_CPUS_BUSY)
        or (host.run_queue_wait_share is not None and host.run_queue_wait_share >= STARVED_RUN_QUEUE_WAIT))
    limited_by = None
    if health.cpu_share > cpu_limit:
        limited_by = "client"
    elif reasons:
        limited_by = "host" if starved else "unknown"
    block: dict[str, Any] = {
        "cpu_share": health.cpu_share,
        "loop_lag_p99_ms": health.loop_lag_p99_ms,
        "schedule_lag_p99_ms": lag,
        "client_bound": limited_by == "client",
        "limited_by": limited_by,
        "reasons": reasons,
        "pinned": health.pinned,
        "cpus": None if host is None or host.client_cpus is None else list(host.client_cpus),
        "cpus_busy": None if host is None else host.client_cpus_busy,
        "host_cpus": None if host is None else host.host_cpus,
        "host_cpu_busy": None if host is None else host.host_busy,
        "run_queue_wait_share": None if host is None else host.run_queue_wait_share,
        "involuntary_switches": None if host is None else host.involuntary_switches,
        "cpu_pressure_some": None if host is None else host.cpu_pressure_some,
        "procs": health.procs,
        "procs_how": health.procs_how,
        "workers": [client_health(w, cpu_limit=cpu_limit, schedule_lag_limit_ms=schedule_lag_limit_ms)
                    for w in health.workers],  # each process's own, when there were several
    }
    if health.connections is not None:
        block["connections"] = health.connections.to_json()
    return block


def prompt_reuse(run: LevelRun) -> dict[str, Any]:
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


def warmup_summary(records: Sequence[RequestRecord]) -> dict[str, Any]:
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
    run: LevelRun, *, client_cpu_limit: float = 0.8, schedule_lag_limit_ms: float = 50.0
) -> dict[str, Any]:
    """One level as a JSON-ready dict: counts, throughputs, stats blocks, errors, client health, prompt
    reuse, warm-up.

    wall = run.t_end - run.t_start (first t_send .. last t_end of the measured requests);
    output/request/input/total throughput = Σ (successful) / wall, None when unknown.
    """
    records = run.records
    ok = [r for r in records if r.ok]
    wall = run.t_end - run.t_start
    out_total = output_tokens_total(ok)
    in_total = input_tokens_total(ok)
    per_chunk = tokens_per_chunk(ok)
    ms = 1000.0
    return {
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
        "ttft_ms": stats_block(map(ttft, ok), ms),
        **reasoning_summary(ok, stats_block(map(ttfa, ok), ms)),  # reasoning models only: ttfa_ms, reasoning
        "ttfb_ms": stats_block(map(ttfb, ok), ms),
        "tpot_ms": stats_block(map(tpot, ok), ms),
        "itl_ms": stats_block((gap for r in ok for gap in itl(r)), ms),
        "e2el_ms": stats_block(map(e2el, ok), ms),
        "decode_tps": stats_block(map(decode_rate, ok)),
        "schedule_lag_ms": stats_block(map(schedule_lag, ok), ms),
        **({} if run.config.open_loop is None else {"queue_delay_ms": stats_block(map(queue_delay, records), ms)}),
        "errors": error_counts(records),
        "error_samples": error_samples(records),
        "dominant_error": dominant_error(records),
        "served_models": sorted({r.served_model for r in records if r.served_model is not None}),
        "client": client_health(run.client, cpu_limit=client_cpu_limit, schedule_lag_limit_ms=schedule_lag_limit_ms),
        "prompt_reuse": prompt_reuse(run),
        "warmup": warmup_summary(run.warmup_records),
        **content_encodings(records),  # only when a server compressed a stream anyway
    }
