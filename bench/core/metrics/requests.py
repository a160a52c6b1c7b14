"""The per-request metrics of docs/metrics.md, each defined once, with its formula.

Each takes a `RequestRecord` and returns seconds (or tokens, tokens/s); it returns None when a
stamp it needs is missing. `bench.core.metrics.table` says which of them a level summarizes, over
which requests, at what scale and under which key.
"""

from __future__ import annotations

from bench.core.records import RequestRecord


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
