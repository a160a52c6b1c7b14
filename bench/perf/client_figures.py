"""The figures `cellbench perf compare` reports for a client, one function per figure.

Every figure comes from `bench.perf.clients.ClientRun`s, the same way for both clients: what each
client itself recorded (its TTFTs and ITLs, its measured phase, its token chunks), what the
operating system counted for its process (CPU seconds) and, for timing, what the paced server
logged it did (bench.perf.null_server.pacer: when it read each request and handed each chunk to the kernel).

Timing is read against the server's log rather than its plan because on a shared host the server
is late too (milliseconds at p99 on a busy 2-core machine); its lateness against the plan is
reported beside, and on a quiet host the two references agree to tens of microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.core.metrics import percentile
from bench.perf.clients import ClientRun

# A stream's log: [request read, chunk 1 written, chunk 2 written, ...], time.monotonic() seconds.
ServerLog = dict[str, list[float]]
_STREAM = re.compile(r"\s*#(\d+)")


@dataclass(frozen=True)
class Spread:
    """A figure over repeated runs: the median and the lowest and highest value."""

    median: float
    low: float
    high: float
    n: int

    @staticmethod
    def of(values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        ordered = sorted(values)
        return Spread(percentile(ordered, 50) or 0.0, ordered[0], ordered[-1], len(ordered))


@dataclass(frozen=True)
class TimingError:
    """How far a client's TTFTs and ITLs were from what the server did, milliseconds. TTFT apart
    for the opening round (every stream's first request, all sent at once) and the rest (sent as
    earlier ones finish, spread in time by the server's staggered streams)."""

    offered_chunks_per_s: float
    written_per_s: float | None  # chunks/s the server wrote once every slot streamed: `steady_write_rate`
    ttft_p50_ms: float | None  # after the opening round
    ttft_p99_ms: float | None
    ttft_bias_ms: float | None  # median signed error after the opening round: above 0 the client reads TTFT long
    ttft_opening_p50_ms: float | None  # the opening round's
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    requests: int  # requests matched to the server's log
    gaps: int
    unmatched: int  # successful requests whose stream the log does not have


def cpu_per_chunk(small: ClientRun, large: ClientRun) -> float | None:
    """Client CPU per token chunk with start-up cancelled out, seconds:
    (cpu_s(3N) - cpu_s(N)) / (chunks(3N) - chunks(N)), both runs of one client on one workload
    but for the number of requests. None when the large run received no more chunks."""
    extra = large.chunks - small.chunks
    return (large.cpu_s - small.cpu_s) / extra if extra > 0 else None


def cpu_share(small: ClientRun, large: ClientRun) -> float | None:
    """The client's CPU share of a core over the extra work of the larger run, start-up cancelled:
    (cpu_s(3N) - cpu_s(N)) / (duration_s(3N) - duration_s(N)). Below ~0.9 at saturation, the
    client was not what limited the chunk rate (the server, or a busy host, was)."""
    extra = large.duration_s - small.duration_s
    return (large.cpu_s - small.cpu_s) / extra if extra > 0 else None


def chunk_rate(run: ClientRun) -> float | None:
    """Delivered token chunks per second over the client's own measured phase:
    chunks / duration_s. Against an unpaced server with the client on one core, the highest chunk
    rate that core sustains (unless the server was the bound: see the server's CPU share)."""
    return run.chunks / run.duration_s if run.duration_s > 0 else None


def stream_of(text: str) -> str | None:
    """The null server's stream id at the start of a response's text (" #17 tok tok..." -> "17")."""
    found = _STREAM.match(text)
    return found.group(1) if found else None


def steady_write_rate(log: ServerLog, opening: int) -> float | None:
    """Chunks the server wrote per second between the moment every opening-round stream (ids 1 to
    `opening`) had written its first chunk and the moment the last request was read (after which
    slots go idle): the rate the run really offered, against the nominal streams / interval. None
    when that window is empty."""
    streams = {int(k): v for k, v in log.items() if v}
    if opening < 1 or any(len(streams.get(k, ())) < 2 for k in range(1, opening + 1)):
        return None
    lo = max(streams[k][1] for k in range(1, opening + 1))
    hi = streams[max(streams)][0]
    if hi <= lo:
        return None
    return sum(1 for v in streams.values() for t in v[1:] if lo <= t < hi) / (hi - lo)


def ttft_errors(run: ClientRun, log: ServerLog) -> list[float]:
    """Per request, TTFT - (chunk 1 written - request read) seconds, signed: the client's TTFT
    against the server's own. What is left is the client's send path and its stamp of the first
    chunk, the loopback's tens of microseconds both ways, and the server's own wait to accept
    and read the request while it writes other streams' chunks (its lateness in reading, which
    the server cannot stamp itself: `tests/load/test_client_timing.py` separates the client's part)."""
    out: list[float] = []
    for text, ttft, _ in run.timings:
        times = log.get(stream_of(text) or "")
        if times is not None and len(times) >= 2:
            out.append(ttft - (times[1] - times[0]))
    return out


def itl_errors(run: ClientRun, log: ServerLog) -> list[float]:
    """Per gap between consecutive token chunks, |ITL - (chunk k+1 written - chunk k written)|
    seconds: the client's gap against the server's."""
    out: list[float] = []
    for text, _, itls in run.timings:
        times = log.get(stream_of(text) or "")
        if times is not None:
            writes = times[1:]
            out.extend(abs(g - (b - a)) for g, a, b in zip(itls, writes, writes[1:], strict=False))
    return out


def timing_error(runs: Iterable[tuple[ClientRun, ServerLog]], offered: float, opening: int) -> TimingError:
    """p50/p99 of |ttft_errors| (the first `opening` requests of each run apart: the opening
    round) and of itl_errors over every sample of `runs` (repeats pooled, never averaged), the
    TTFT bias (the median of the signed ttft_errors: which way a client's TTFT leans), in
    milliseconds, and how many requests matched the server's log. A run's timings are in the
    order its requests were sent (both clients keep that order)."""
    signed: list[float] = []
    opened: list[float] = []
    itl: list[float] = []
    unmatched = 0
    written: list[float] = []
    for run, log in runs:
        if (rate := steady_write_rate(log, opening)) is not None:
            written.append(rate)
        head = ClientRun(**{**vars(run), "timings": run.timings[:opening]})
        rest = ClientRun(**{**vars(run), "timings": run.timings[opening:]})
        opened += [abs(x) for x in ttft_errors(head, log)]
        signed += ttft_errors(rest, log)
        itl += itl_errors(run, log)
        unmatched += sum(1 for text, _, _ in run.timings if stream_of(text) not in log)
    ttft = sorted(abs(x) for x in signed)
    itl.sort()

    def ms(values: list[float], q: float) -> float | None:
        found = percentile(values, q)
        return None if found is None else round(found * 1e3, 3)

    return TimingError(offered, percentile(sorted(written), 50), ms(ttft, 50), ms(ttft, 99), ms(sorted(signed), 50),
                       ms(sorted(opened), 50),
                       ms(itl, 50), ms(itl, 99), len(ttft) + len(opened), len(itl), unmatched)
