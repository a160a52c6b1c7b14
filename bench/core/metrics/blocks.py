"""A level of the result document, typed: `Level` and the blocks in it, as the schema's `level`
($defs/level of bench/core/schema/result.schema.json) and its sub-blocks define them.

Produced where measured (bench.core.metrics.level.summarize_level, bench.core.metrics.client,
bench.core.open_loop.goodput) and read by the verdict and the reports, never converted. A key
the schema does not require is in a `total=False` class; a key every measured level has and an
imported one (another benchmark's file) may lack is optional here and required by the schema's
top-level `else`. The stats blocks' keys are the metric table's (bench.core.metrics.table).
A block whose concept also has a runtime class is named `<Concept>Block` (`ClientHealthBlock` for
bench.core.level_run.ClientHealth, `OpenLoopBlock` for bench.core.level_run.OpenLoop).
"""

from __future__ import annotations

from typing import Literal, TypedDict

from bench.core.level_run import Connections
from bench.core.metrics.audits import Audits
from bench.core.metrics.reasoning import Reasoned
from bench.core.metrics.stats.intervals import Interval
from bench.core.metrics.table import OptionalStats, RequiredStats
from bench.core.records import ContentEncodings, ErrorSample
from bench.host.power import Device


class ChunkDivergence(TypedDict):
    fraction: float | None
    warning: bool


class DominantError(TypedDict):
    type: str
    http_status: int | None
    count: int


class _ClientHealthRequired(TypedDict):
    cpu_share: float
    loop_lag_p99_ms: float | None
    schedule_lag_p99_ms: float | None
    client_bound: bool
    reasons: list[str]


class ClientHealthBlock(_ClientHealthRequired, total=False):
    """A level's `client` block (bench.core.metrics.client.client_health)."""

    limited_by: str | None
    server_queue: str  # the server's queue, where it had one (with_server_queue)
    connections: Connections
    pinned: bool
    cpus: list[int] | None
    cpus_busy: float | None
    host_cpus: int | None
    host_cpu_busy: float | None
    run_queue_wait_share: float | None
    involuntary_switches: int | None
    cpu_pressure_some: float | None
    procs: int
    procs_how: str | None
    workers: list[ClientHealthBlock]


class PromptReuse(TypedDict):
    requests: int
    unique_prompts: int
    repeats: int
    unique_prefixes: bool
    server_warmed: bool
    warmed_by: str | None
    may_hit_cache: bool


class _WarmupRequired(TypedDict):
    requests: int
    successful: int
    failed: int
    wall_time_s: float
    errors: dict[str, int]


class Warmup(_WarmupRequired, total=False):
    error_samples: dict[str, list[ErrorSample]]


class RampBlock(TypedDict):
    """--ramp-up: the rate rose from start_rps to the level's over its requests."""

    shape: str  # linear or exponential
    start_rps: float


class TraceBlock(TypedDict):
    """--trace-file: the trace a level replayed, and how much of it it sent."""

    file: str
    sha256: str
    format: str  # mooncake or burstgpt
    entries: int  # the trace's requests (its skipped rows not counted)
    sent: int  # of them, sent: fewer when --duration ended the level first
    skipped: int  # rows no replay can send (BurstGPT's 0 response tokens)


class _OpenLoopRequired(TypedDict):
    arrivals: str
    burstiness: float
    max_concurrency: int | None
    seed: int
    offered_rate_rps: float | None
    achieved_rate_rps: float | None
    queued: int
    peak_in_flight: int


class OpenLoopBlock(_OpenLoopRequired, total=False):
    """How an open-loop level's requests arrived (bench.core.metrics.level.open_loop_block)."""

    ramp: RampBlock  # --ramp-up only
    trace: TraceBlock  # --trace-file only


class DurationBlock(TypedDict):
    """--duration: the measured phase's time bound, and what ended it (neither is a cut level)."""

    limit_s: float
    ended_by: str  # "duration" (time was up first) or "requests" (every request asked for was sent first)
    sent: int  # measured requests sent
    asked: int  # measured requests asked for (--requests, or a trace's entries)


class _EnergySourceRequired(TypedDict):
    device: Device  # the GPUs' power, or the CPU packages' energy counters
    source: str  # how it was read: nvml, nvidia-smi, metalstat, rapl
    interval_s: float  # the sampling interval
    samples: int  # samples inside the level's window


class EnergySource(_EnergySourceRequired):
    """One power source over a level (bench.core.energy)."""

    wall_s: float
    joules: float
    avg_w: float | None
    output_tokens: int
    j_per_output_token: float | None


class _EnergyRequired(TypedDict):
    sources: list[EnergySource]


class Energy(_EnergyRequired, total=False):
    """A level's energy: an entry per power source, or none and a `note` saying why."""

    note: str


class GaugeFigures(TypedDict):
    mean: float  # over the scrapes while the level ran, its two ends left out
    max: float
    samples: int


class HistogramFigures(TypedDict):
    count: float  # the increase of its _count over the level
    mean_ms: float | None  # increase of _sum / increase of _count, in ms; None: no observation


class _ServerMetricsRequired(TypedDict):
    path: str  # the server's Prometheus endpoint
    interval_s: float  # between scrapes while the level ran
    includes_warmup: bool  # the scrapes bracket the level's warm-up too
    sidecar: str  # the server's .server-metrics.jsonl: every scrape's values
    errors: list[str]  # failed scrapes of this server, once per kind


class ServerMetricsBlock(_ServerMetricsRequired, total=False):
    """A level as the server saw it (bench.run.scrape), under cellbench's names (bench.setup.server_metrics)."""

    note: str  # why there are no figures: no scrape as the level started or ended
    scrapes: int  # while the level ran, between its start and its end
    counters: dict[str, float]  # each counter's increase over the level
    gauges: dict[str, GaugeFigures]  # per gauge (bench.setup.server_metrics.GAUGES)
    histograms: dict[str, HistogramFigures]  # per histogram (HISTOGRAMS)


class Goodput(TypedDict):
    """A level against the run's SLOs (bench.core.open_loop.goodput)."""

    slo: dict[str, float]
    good_requests: int
    goodput_rps: float | None
    attainment: dict[str, float | None]
    slo_met: bool
    missed: list[str]


class ThroughputIntervals(TypedDict):
    """A level's `throughput_ci95`: the 95% interval of each throughput (docs/metrics.md "Rounds")."""

    output_throughput_tps: Interval
    request_throughput_rps: Interval


class _UncertaintyRequired(TypedDict):
    basis: Literal["within-run", "rounds"]  # time windows of the one run, or the rounds' spread
    rounds: int  # rounds measured
    windows: int | None  # within-run: the time windows of the interval; None: none (rounds, or too few requests)


class Uncertainty(_UncertaintyRequired, total=False):
    """What a level's intervals include: only the noise within this run, or the run-to-run noise of rounds."""

    rounds_asked: int  # --rounds, when fewer rounds ran (the cell stopped early)


class LevelIdentity(TypedDict, total=False):
    """What a level was: closed-loop `concurrency`, or open-loop `request_rate` with `open_loop`."""

    concurrency: int
    request_rate: float | str
    open_loop: OpenLoopBlock


class _LevelRequired(RequiredStats):
    num_requests: int
    successful: int
    failed: int
    partial: bool
    stop_reason: str | None
    wall_time_s: float
    output_tokens_total: int
    input_tokens_total: int | None
    chunks_total: int
    output_throughput_tps: float | None
    request_throughput_rps: float | None
    input_throughput_tps: float | None
    total_token_throughput_tps: float | None
    tokens_per_chunk: float | None
    usage_available: bool
    itl_per_chunk: bool
    errors: dict[str, int]
    error_samples: dict[str, list[ErrorSample]]
    dominant_error: DominantError | None


class Level(_LevelRequired, LevelIdentity, OptionalStats, ContentEncodings, Reasoned, total=False):
    """One level (bench.core.metrics.level.summarize_level): closed-loop `concurrency`, or open-loop
    `request_rate`; its stats blocks are the metric table's (RequiredStats, OptionalStats)."""

    goodput: Goodput  # with --slo
    duration: DurationBlock  # with --duration
    energy: Energy  # a started server's levels (an endpoint's are not sampled)
    server_metrics: ServerMetricsBlock  # a started server whose adapter declares its metrics
    prompt_reuse: PromptReuse
    # measured results only (an imported level lacks what the other tool never recorded)
    started_at: float
    chunk_divergence: ChunkDivergence
    audits: Audits  # measured by a cellbench that audits (an earlier result's levels have none)
    served_models: list[str]
    client: ClientHealthBlock
    warmup: Warmup
    # measured by a cellbench that reports uncertainty (an earlier result's levels have none)
    throughput_ci95: ThroughputIntervals
    uncertainty: Uncertainty
    rounds: list[Level]  # --rounds K >= 2: the K rounds this combined level is the median of
    round: int  # in a round of `rounds`: which, 1-based
