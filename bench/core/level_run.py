"""What a level is asked to do (`LevelConfig`) and what it did (`LevelRun`, `ClientHealth`).

The load generator (`bench.load`) fills these; `bench.core.metrics` reads them. `Progress` is
what the load generator reports while a level runs. Times are `time.perf_counter()` seconds
unless a field says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.core.records import RequestRecord
from bench.host.affinity import CpuUse


@dataclass(frozen=True)
class Progress:
    done: int  # measured requests finished
    total: int
    failed: int
    output_tps: float  # output-bearing events per second over the last interval (≈ tokens/s)
    elapsed_s: float  # since the measured phase started
    output_events: int = 0  # output-bearing events of the measured phase so far (rates over any span)


@dataclass(frozen=True)
class LevelConfig:
    base_url: str  # http://127.0.0.1:PORT
    model: str  # sent in every request (never taken from /v1/models)
    concurrency: int
    requests: int  # measured requests; request i uses prompts[i % len(prompts)]
    warmup: int = 3  # warm-up requests, sequential, from warmup_prompts, kept apart
    request_timeout_s: float = 300.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # stream_options, temperature, ...
    deadline: float | None = None  # perf_counter() value: stop sending, cancel what is in flight
    progress: Callable[[Progress], None] | None = None  # called at most ~once per second
    # The hang watchdog: no output event and no finished request for this long stops the level
    # like a deadline, with the reason "no progress for ..." (a stopped server, a wedged engine).
    stall_timeout_s: float | None = None
    # Why the server cannot answer any more (its process exited), or None while it can; asked
    # about four times a second. A reason stops the level like a deadline.
    server_gone: Callable[[], str | None] | None = None
    client_cpus: tuple[int, ...] | None = None  # the whole process runs the level on these CPUs (Linux)
    # --unique-prompts: a tag unique to this level; request i's first message then opens with
    # "[cellbench r<i> <nonce>] " (warm-up j's: "w<j>"), so no two requests share a prefix to cache.
    nonce: str | None = None
    # Who may have warmed the server's caches before this level ("an earlier level", "unknown:
    # an --endpoint server"); None: a fresh server. Recorded as the level's prompt reuse.
    server_warmed: str | None = None
    # --keep-alive: reuse a connection whose response was complete for the next request; False
    # (the default): one connection per request, closed at its end (bench.load.http.connector).
    keep_alive: bool = False


@dataclass
class ConnectionCounts:
    """What a level's connections did, its warm-up included (bench.load.http.connector)."""

    opened: int = 0  # connections opened
    reused: int = 0  # requests sent on a kept-alive connection
    stale: int = 0  # idle kept-alive connections found closed by the server, dropped before use
    retried: int = 0  # requests sent again: a reused connection ended before any response byte

    def to_json(self) -> dict[str, int]:
        return {"opened": self.opened, "reused": self.reused, "stale": self.stale, "retried": self.retried}


@dataclass(frozen=True)
class ClientHealth:
    cpu_share: float  # process CPU seconds / wall seconds over the measured phase (1.0 = a core)
    loop_lag_p99_ms: float | None  # oversleep of a 10 ms ticker: how late the loop runs callbacks
    schedule_lag_p99_ms: float | None  # t_send - t_sched over all measured requests
    pinned: bool = False  # the level ran on LevelConfig.client_cpus
    # How the measured phase used the host's CPUs: whether a late client was busy itself or
    # was not let run (host busy, run-queue wait). None when the phase never opened.
    host: CpuUse | None = None
    connections: ConnectionCounts | None = None  # None: not counted (a level an interrupt ended)
    procs: int = 1  # client processes the level ran on (--client-procs; bench.load.procs)
    procs_how: str | None = None  # how that number was chosen, auto's evidence included
    # Each process's own health when there were several; the fields above are then the worst
    # process's (the highest CPU share and lags), so that one saturated process decides.
    workers: tuple[ClientHealth, ...] = ()


@dataclass
class LevelRun:
    config: LevelConfig
    records: list[RequestRecord]
    warmup_records: list[RequestRecord]
    t_start: float  # perf_counter: first t_send .. last t_end of the measured requests
    t_end: float
    started_at: float  # time.time() at level start (wall clock, for reports)
    partial: bool
    stop_reason: str | None
    client: ClientHealth
