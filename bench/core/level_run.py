"""What a level is asked to do (`LevelConfig`, `OpenLoop`) and what it did (`LevelRun`, `ClientHealth`).

The load generator (`bench.load`) fills these; `bench.core.metrics` reads them. `Progress` is
what the load generator reports while a level runs. Times are `time.perf_counter()` seconds
unless a field says otherwise.

A level is closed-loop (`concurrency` slots, each sending its next request when its last one is
over: the default) or open-loop (`OpenLoop`: requests arrive on a schedule at a rate, whatever the
server does). The two are different kinds of level: `level_key` and `level_label` name a level of a
result (or of a request sidecar line) by its kind, so that no report puts "c=4" and "4 req/s" on one
axis or in one table as if they were the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

from bench.base.defaults import DEFAULT_WARMUP
from bench.base.doc import Doc
from bench.core.client_settings import ClientSettings
from bench.core.records import RequestRecord
from bench.core.sessions import Sessions
from bench.host.cpus.usage import CpuUse


@dataclass(frozen=True)
class Progress:
    done: int  # measured requests finished
    total: int
    failed: int
    output_tps: float  # output-bearing events per second over the last interval (≈ tokens/s)
    elapsed_s: float  # since the measured phase started
    output_events: int = 0  # output-bearing events of the measured phase so far (rates over any span)


@dataclass(frozen=True)
class Ramp:
    """--ramp-up: the arrival rate rises from `start_rate` to the level's rate over its requests,
    `shape` "linear" or "exponential" in the request's index (bench.load.arrivals.ramp_offsets)."""

    shape: str
    start_rate: float  # requests/s, more than 0 and below the level's rate

    def text(self) -> str:
        return f"{self.shape} ramp from {rate_text(self.start_rate)} req/s"


@dataclass(frozen=True)
class TraceSchedule:
    """A request trace replayed as an open-loop level: its file, and the arrival offsets it gives
    (seconds after its first entry; bench.setup.traces reads the file)."""

    file: str  # the file's name, as labels show it
    sha256: str  # of the file's bytes: two levels of one name and another content are different levels
    format: str  # "mooncake" or "burstgpt"
    offsets: tuple[float, ...] = field(repr=False)
    skipped: int = 0  # rows the file has and no replay can send (BurstGPT's 0 response tokens)

    @property
    def offered_rate(self) -> float:
        """(n - 1) / span of the offsets, as the level's `request_rate`; inf when all arrive at once."""
        span = self.offsets[-1] - self.offsets[0] if self.offsets else 0.0
        return (len(self.offsets) - 1) / span if span > 0 else math.inf


@dataclass(frozen=True)
class OpenLoop:
    """An open-loop level: arrivals at `rate` requests/s, on a schedule fixed before the level starts.

    Inter-arrival times are gamma-distributed with shape `burstiness` and mean 1/rate (scale
    1/(rate x burstiness)), drawn from numpy's default_rng(seed): burstiness 1 is a Poisson process,
    larger is more regular (coefficient of variation 1/sqrt(burstiness)), as in vLLM's bench.
    rate = inf sends every request at once. With `max_concurrency`, an arrival that finds that many
    requests in flight waits for one to end (its queueing delay is recorded apart from its TTFT)."""

    rate: float  # requests/s, > 0; math.inf: every request at once; a trace's: the rate its offsets offer
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0
    ramp: Ramp | None = None  # --ramp-up: the rate rises to `rate` over the level
    trace: TraceSchedule | None = None  # --trace-file: the file's offsets are the schedule, not gamma draws
    # --stop-over-saturated (and a sweep's levels): end the level once its queue is seen growing
    # without bound (bench.core.figures.saturation)
    stop_over_saturated: bool = False

    @property
    def arrivals(self) -> str:
        """"trace", "all at once", "poisson" (burstiness 1) or "gamma"."""
        if self.trace is not None:
            return "trace"
        if math.isinf(self.rate):
            return "all at once"
        return "poisson" if self.burstiness == 1.0 else "gamma"

    def measured(self, asked: int) -> int:
        """The level's measured requests: a trace's entries, else the `asked` (--requests)."""
        return len(self.trace.offsets) if self.trace is not None else asked

    @property
    def key(self) -> LevelKey:
        """The level's `level_key`, as its result will have it."""
        if self.trace is not None:
            return ("trace", self.trace.file, self.trace.sha256, self.max_concurrency or 0)
        ramp = (self.ramp.text(),) if self.ramp is not None else ()
        return ("rate", self.rate, self.burstiness, self.max_concurrency or 0, *ramp)

    @property
    def label(self) -> str:
        return key_label(self.key)


@dataclass(frozen=True)
class LevelConfig:
    base_url: str  # http://127.0.0.1:PORT
    model: str  # sent in every request (never taken from /v1/models)
    concurrency: int  # closed-loop slots; unused by an open-loop level
    requests: int  # measured requests; request i uses prompts[i % len(prompts)]
    warmup: int = DEFAULT_WARMUP  # warm-up requests, sequential, from warmup_prompts, kept apart
    client: ClientSettings = field(default_factory=ClientSettings)  # the session's: timeout, keep-alive, ...
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # stream_options, temperature, ...
    deadline: float | None = None  # perf_counter() value: stop sending, cancel what is in flight
    progress: Callable[[Progress], None] | None = None  # called at most ~once per second
    # The hang watchdog: no output event and no finished request for this long stops the level
    # like a deadline, with the reason "no progress for ..." (a stopped server, a wedged engine):
    # --hang-minutes for the cell's split, in seconds.
    hang_s: float | None = None
    # Why the server cannot answer any more (its process exited), or None while it can; asked
    # about four times a second. A reason stops the level like a deadline.
    server_gone: Callable[[], str | None] | None = None
    # the whole process runs the level on these CPUs (Linux): the cell's `client.cpus.client`, or one
    # client process's share of them (bench.load.procs)
    client_cpus: tuple[int, ...] | None = None
    # --unique-prompts: a tag unique to this level; request i's first message then opens with
    # "[cellbench r<i> <nonce>] " (warm-up j's: "w<j>"), so no two requests share a prefix to cache.
    nonce: str | None = None
    # Who may have warmed the server's caches before this level ("an earlier level", "unknown:
    # an --endpoint server"); None: a fresh server. Recorded as the level's prompt reuse.
    server_warmed: str | None = None
    open_loop: OpenLoop | None = None  # an open-loop level: arrivals on this schedule, not `concurrency` slots
    # Sent with every chat request (the API key's `Authorization`); never in a repr, so never in a
    # traceback or a recorded config.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    # --duration: no measured request is sent after the measured phase's start + this many seconds;
    # those in flight finish. Whichever of it and `requests` comes first ends the level.
    duration_s: float | None = None
    sessions: Sessions | None = None  # a session level: `concurrency` conversations at a time (bench.load.sessions)

    @property
    def label(self) -> str:
        """"c=8" for a closed-loop level, "4 req/s" for an open-loop one."""
        return self.open_loop.label if self.open_loop is not None else f"c={self.concurrency}"


class Connections(TypedDict):
    """What the level's connections did, warm-up included (bench.load.http.connector); absent in results from
    before it was counted."""

    opened: Annotated[int, Doc("Connections opened.", minimum=0)]
    reused: Annotated[int, Doc("Requests sent on a kept-alive connection (--keep-alive).", minimum=0)]
    stale: Annotated[int, Doc("Idle kept-alive connections the server had closed, found before a request was sent on "
                              "them and dropped.", minimum=0)]
    retried: Annotated[int, Doc("Requests sent a second time, on a fresh connection: a reused connection ended before "
                                "any byte of a response came back (the server had closed it). The request's record "
                                "says so in `retried`.", minimum=0)]


@dataclass
class ConnectionCounts:
    """What a level's connections did, its warm-up included (bench.load.http.connector)."""

    opened: int = 0  # connections opened
    reused: int = 0  # requests sent on a kept-alive connection
    stale: int = 0  # idle kept-alive connections found closed by the server, dropped before use
    retried: int = 0  # requests sent again: a reused connection ended before any response byte

    def to_json(self) -> Connections:
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
    # An open-loop level's arrival offsets (seconds from the measured phase's start, one per measured
    # request asked for) and the most requests it held in flight at once; () and 0 for a closed loop.
    schedule: tuple[float, ...] = ()
    peak_in_flight: int = 0
    # With --duration: what ended the measured phase, "duration" or "requests" (every request asked
    # for was sent first); None without a duration. Neither is a cut: the level is complete.
    ended_by: str | None = None
    # An open-loop level the over-saturation stop ended: the figure's block less `rounds`
    # (bench.core.figures.saturation.OverSaturated); None where it ran to its end.
    over_saturated: Mapping[str, Any] | None = None


class CarriedInterrupt(KeyboardInterrupt):
    """An interrupt on its way out, carrying what was finished before it (its subclasses say
    what). `interrupt` is the KeyboardInterrupt that arrived (Ctrl-C's, or bench.plugins.signals'
    `Terminated` for SIGTERM and SIGHUP); the carrier says what it says (`str`), and being a
    KeyboardInterrupt itself, every `except KeyboardInterrupt` and pytest treat it as that."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        interrupt = arrived(interrupt)
        super().__init__(*interrupt.args)
        self.interrupt = interrupt


def arrived(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """The interrupt as it arrived, whatever carries it."""
    return exc.interrupt if isinstance(exc, CarriedInterrupt) else exc


def interrupt_text(exc: KeyboardInterrupt) -> str:
    """What an interrupt says, or its kind: "received SIGTERM", "KeyboardInterrupt"."""
    exc = arrived(exc)
    return str(exc) or type(exc).__name__


class LevelInterrupted(CarriedInterrupt):
    """A level ended by an interrupt; `level_run` is what it finished (requests still in flight
    are not in it), so that the caller keeps the measured part of the level it landed in."""

    def __init__(self, interrupt: KeyboardInterrupt, level_run: LevelRun) -> None:
        super().__init__(interrupt)
        self.level_run = level_run


# ------------------------------------------------------------------ naming a level of a result

LevelKey = tuple[Any, ...]
"""("concurrency", N), ("rate", R, burstiness, max concurrency or 0[, ramp text]) or ("trace", file
name, sha256, max concurrency or 0): two levels with one key measured the same thing; the first item
is the kind, so keys of two kinds never compare equal (a trace's offered rate is no rate level)."""


def rate_text(rate: float | str) -> str:
    """4.0 -> "4", 0.5 -> "0.5", inf (or "inf", as JSON has it) -> "inf"."""
    value = rate_value(rate)
    return "inf" if math.isinf(value) else f"{value:g}"


def rate_value(rate: float | str) -> float:
    """A request rate as a result writes it (a number, or "inf") -> float."""
    return math.inf if rate == "inf" else float(rate)


def rate_json(rate: float) -> float | Literal["inf"]:
    """A request rate as JSON holds it: a number, or "inf" (JSON has no infinity)."""
    return "inf" if math.isinf(rate) else rate


def sidecar_key(cfg: LevelConfig) -> dict[str, Any]:
    """What a request sidecar line of this level says of it, for `level_key`: its concurrency, or its
    rate, burstiness and cap with the trace and ramp blocks the level's `open_loop` has."""
    ol = cfg.open_loop
    if ol is None:
        return {"concurrency": cfg.concurrency}
    key: dict[str, Any] = {"request_rate": rate_json(ol.rate), "burstiness": ol.burstiness,
                           "max_concurrency": ol.max_concurrency}
    if ol.trace is not None:
        key["trace"] = {"file": ol.trace.file, "sha256": ol.trace.sha256}
    if ol.ramp is not None:
        key["ramp"] = {"shape": ol.ramp.shape, "start_rps": ol.ramp.start_rate}
    return key


def is_open_loop(level: Mapping[str, Any]) -> bool:
    """A level of a result, or a line of a request sidecar, of an open-loop level."""
    return "request_rate" in level


def level_key(level: Mapping[str, Any]) -> LevelKey:
    """The key of a level of a result (`concurrency`, or `request_rate` with its `open_loop`
    block) or of a request sidecar line (`concurrency`, or `request_rate`, `burstiness`,
    `max_concurrency`)."""
    if not is_open_loop(level):
        return ("concurrency", level["concurrency"])
    block = level.get("open_loop", level)
    cap = block.get("max_concurrency") or 0
    if (trace := block.get("trace")) is not None:
        return ("trace", trace["file"], trace["sha256"], cap)
    ramp = block.get("ramp")
    return ("rate", rate_value(level["request_rate"]), float(block.get("burstiness", 1.0)), cap,
            *((Ramp(ramp["shape"], ramp["start_rps"]).text(),) if ramp else ()))


def key_label(key: LevelKey, *, full: bool = False) -> str:
    """"c=8", "4 req/s" (`full`: with ", burstiness 2" and ", max concurrency 8" when set), "4 req/s,
    linear ramp from 0.4 req/s", or "trace mooncake-small.jsonl" (`full`: with its cap)."""
    if key[0] == "concurrency":
        return f"c={key[1]}"
    if key[0] == "trace":
        return f"trace {key[1]}" + (f", max concurrency {key[3]}" if full and key[3] else "")
    text = f"{rate_text(key[1])} req/s"
    if full and key[2] != 1.0:
        text += f", burstiness {key[2]:g}"
    if full and key[3]:
        text += f", max concurrency {key[3]}"
    if len(key) > 4:  # a ramp: always named, a ramped level is not its flat rate's
        text += f", {key[4]}"
    return text


def level_label(level: Mapping[str, Any], *, full: bool = False) -> str:
    """`key_label` of a level of a result."""
    return key_label(level_key(level), full=full)


def levels_text(levels: Iterable[Mapping[str, Any]]) -> str:
    """"c=1, 8", "4, 8 req/s" or "trace t.jsonl" for levels of one cell (a cell's levels are of one kind)."""
    keys = [level_key(lv) for lv in levels]
    closed = [str(k[1]) for k in keys if k[0] == "concurrency"]
    rates = [rate_text(k[1]) for k in keys if k[0] == "rate"]
    traces = [key_label(k) for k in dict.fromkeys(k for k in keys if k[0] == "trace")]
    return "; ".join(([f"c={', '.join(closed)}"] if closed else []) + ([f"{', '.join(rates)} req/s"] if rates else [])
                     + traces)
