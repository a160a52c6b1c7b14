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

from typing import Annotated, Literal, TypedDict

from bench.base.doc import Doc
from bench.core.level_run import Connections
from bench.core.metrics.audits import Audits
from bench.core.metrics.reasoning import Reasoned
from bench.core.metrics.stats.blocks import Interval
from bench.core.metrics.table import OptionalStats, RequiredStats
from bench.core.records import ContentEncodings, ErrorSample
from bench.host.power import Device


class ChunkDivergence(TypedDict):
    fraction: float | None
    warning: bool


class DominantError(TypedDict):
    """An error type, its HTTP status and how many requests failed with it."""

    type: Annotated[str, Doc("The error type (bench.core.records.ErrorType value).")]
    http_status: Annotated[int | None, Doc("The HTTP status; null for errors without one.")]
    count: Annotated[int, Doc("Requests that failed with it.", minimum=1)]


class _ClientHealthRequired(TypedDict):
    cpu_share: Annotated[float, Doc("Client process CPU seconds per wall second (1.0 = one core).")]
    loop_lag_p99_ms: Annotated[float | None, Doc("p99 oversleep of a 10 ms ticker on the client's event loop; null "
                                                 "when not measured.")]
    schedule_lag_p99_ms: Annotated[float | None, Doc("p99 of t_send - t_sched over the measured requests; null when "
                                                     "none was sent.")]
    client_bound: Annotated[bool, Doc("The client saturated by its own work (CPU share above 0.8 of a core): the level"
                                      " measured the client.")]
    reasons: Annotated[list[str], Doc("Each limit the client crossed, one line each.")]


class ClientHealthBlock(_ClientHealthRequired, total=False):
    """The load generator's own health over the measured phase, and whether its timing limited the level's
    numbers (bench.core.metrics.client_health)."""

    limited_by: Annotated[str | None, Doc("What limited the level's numbers. The client's own delay: client (its own "
                                          "CPU work), host (late with CPU to spare while its CPUs were >= 90% busy or "
                                          "it waited >= 10% of the phase for a CPU), unknown (late, no sign of "
                                          "either). server: the client was not late and the server held requests it "
                                          "had not started, its waiting gauge 0.5 or more on average over the level's "
                                          "scrapes (server_queue says what was seen). null: the client was not late "
                                          "and no server queue was seen (or the server's metrics were not scraped).",
                                          enum=[None, 'client', 'host', 'unknown', 'server'])]
    server_queue: Annotated[str, Doc("What the server's own metrics showed of its queue over the level, where it had "
                                     "one: the waiting gauge's mean and maximum, and the queue histogram's mean wait "
                                     "where the server has one.")]
    connections: Annotated[Connections, Doc("What the level's connections did, warm-up included "
                                            "(bench.load.http.connector); absent in results from before it was "
                                            "counted.")]
    pinned: Annotated[bool, Doc("The level ran with --client-cpus.")]
    cpus: Annotated[list[int] | None, Doc("The CPUs the client's event loop could run on.")]
    cpus_busy: Annotated[float | None, Doc("Busy share of those CPUs over the measured phase, every process counted "
                                           "(1.0 = all busy).")]
    host_cpus: Annotated[int | None, Doc("CPUs of the host.")]
    host_cpu_busy: Annotated[float | None, Doc("Cores busy host-wide over the measured phase, every process counted "
                                               "(2.0 = two cores).")]
    run_queue_wait_share: Annotated[float | None, Doc("Share of the measured phase the client's loop thread was "
                                                      "runnable but waiting for a CPU (/proc/thread-self/schedstat).")]
    involuntary_switches: Annotated[int | None, Doc("Times the client's loop thread was preempted during the measured "
                                                    "phase.")]
    cpu_pressure_some: Annotated[float | None, Doc("Share of the measured phase in which some task on the host waited "
                                                   "for a CPU (/proc/pressure/cpu).")]
    procs: Annotated[int, Doc("Client processes the level ran on (--client-procs); with more than one, the fields "
                              "above are the worst process's.", minimum=1)]
    procs_how: Annotated[str | None, Doc("How that number was chosen: the count given, or auto's evidence (the earlier"
                                         " level's client CPU, the CPUs free for the client).")]
    workers: Annotated[list[ClientHealthBlock], Doc("Each client process's own health, when the level ran on several "
                                                    "(bench.load.procs).")]


class PromptReuse(TypedDict):
    """What a cache could have served in this level. may_hit_cache: repeats or a warmed server without unique
    openings; the cell is then annotated prompt-reuse."""

    requests: Annotated[int, Doc("Measured requests.", minimum=0)]
    unique_prompts: Annotated[int, Doc("Distinct prompts among them.", minimum=0)]
    repeats: Annotated[int, Doc("Measured requests that repeated a prompt of the level.", minimum=0)]
    unique_prefixes: Annotated[bool, Doc("--unique-prompts: every request's first message opened with its own nonce.")]
    server_warmed: Annotated[bool, Doc("Something used the server before this level.")]
    warmed_by: Annotated[str | None, Doc("What: an earlier level on a shared server, or an --endpoint server's unknown"
                                         " history; null for a fresh server.")]
    may_hit_cache: Annotated[bool, Doc("A cache may have served part of the level.")]


class _WarmupRequired(TypedDict):
    requests: Annotated[int, Doc("Warm-up requests sent.", minimum=0)]
    successful: Annotated[int, Doc("Of them, successful.", minimum=0)]
    failed: Annotated[int, Doc("Of them, failed.", minimum=0)]
    wall_time_s: Annotated[float, Doc("First send to last end of the warm-up, seconds (0 when none was sent).",
                                      minimum=0)]
    errors: Annotated[dict[str, Annotated[int, Doc(minimum=0)]],
                      Doc("Failed requests per error type (bench.core.records.ErrorType values).")]


class Warmup(_WarmupRequired, total=False):
    """The warm-up requests before the measured ones, reported apart (never in the level's numbers)."""

    error_samples: Annotated[dict[str, Annotated[list[ErrorSample], Doc(maxItems=5)]],
                             Doc("Up to 5 example failures per error type.")]


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
    device: Annotated[Device, Doc("gpu: the GPUs' power, summed; cpu: the CPU packages' energy counters (RAPL).")]
    source: Annotated[str, Doc("How it was read: nvml, nvidia-smi, metalstat, rapl.")]
    interval_s: Annotated[float, Doc("The sampling interval.", exclusiveMinimum=0)]
    samples: Annotated[int, Doc("Samples inside the level's window (its ends are interpolated from the samples around "
                                "them).", minimum=0)]


class EnergySource(_EnergySourceRequired):
    """One power source over a level (bench.core.energy)."""

    wall_s: Annotated[float, Doc("The level's measured wall time the joules are over.", minimum=0)]
    joules: Annotated[float, Doc("Energy over the level: GPU power integrated (trapezoids), or the RAPL counters' "
                                 "difference.")]
    avg_w: Annotated[float | None, Doc("joules / wall_s.")]
    output_tokens: Annotated[int, Doc("The level's output tokens (output_tokens_total).", minimum=0)]
    j_per_output_token: Annotated[float | None, Doc("joules / output_tokens.")]


class _EnergyRequired(TypedDict):
    sources: Annotated[list[EnergySource], Doc("One entry per power source the sampler read: the GPUs (nvml, "
                                               "nvidia-smi, metalstat) and the CPU packages (rapl).")]


class Energy(_EnergyRequired, total=False):
    """A level's energy (bench.core.energy): an entry per power source the resource sampler read over the
    level's measured phase, or no entry and a note saying why."""

    note: Annotated[str, Doc("Why there is no entry: no power source on this machine.")]


class GaugeFigures(TypedDict):
    mean: float  # over the scrapes while the level ran, its two ends left out
    max: float
    samples: Annotated[int, Doc("The scrapes the mean and max are over.", minimum=1)]


class HistogramFigures(TypedDict):
    count: float  # the increase of its _count over the level
    mean_ms: float | None  # increase of _sum / increase of _count, in ms; None: no observation


class _ServerMetricsRequired(TypedDict):
    path: Annotated[str, Doc("The server's metrics endpoint.")]
    interval_s: Annotated[float, Doc("Seconds between scrapes while the level ran.", exclusiveMinimum=0)]
    includes_warmup: Annotated[bool, Doc("True: the scrapes bracket the level's warm-up requests too.")]
    sidecar: Annotated[str, Doc("The server's .server-metrics.jsonl (beside the result): every scrape's values.")]
    errors: Annotated[list[str], Doc("The server's failed scrapes, once per kind.")]


class ServerMetricsBlock(_ServerMetricsRequired, total=False):
    """A level as the server saw it: its Prometheus metrics scraped as the level started, while it ran and as it
    ended (bench.run.scrape), under cellbench's names (bench.setup.server_metrics)."""

    note: Annotated[str, Doc("Why there are no figures: no scrape as the level started or as it ended.")]
    scrapes: Annotated[int, Doc("Scrapes while the level ran, between the scrapes as it started and as it ended (those"
                                " two left out).", minimum=0)]
    counters: Annotated[dict[str, float], Doc("Each counter's increase over the level: generated_tokens, "
                                              "prompt_tokens, prefix_cache_hits, prefix_cache_queries.")]
    gauges: Annotated[dict[str, GaugeFigures], Doc("Each gauge's mean, max and samples over the scrapes while the "
                                                   "level ran (none for a level shorter than the scrape interval): "
                                                   "running, waiting, kv_cache_usage, prefix_cache_hit_rate.")]
    histograms: Annotated[dict[str, HistogramFigures], Doc("Each histogram's count and mean over the level, in ms: "
                                                           "ttft, itl, queue, e2e.")]


class Goodput(TypedDict):
    """A level against the run's SLOs (bench.core.open_loop.goodput)."""

    slo: dict[str, float]
    good_requests: int
    goodput_rps: float | None
    attainment: dict[str, float | None]
    slo_met: bool
    missed: list[str]


class ThroughputIntervals(TypedDict):
    """The 95% interval of a level's output and request throughput (docs/metrics.md, Rounds): from the rounds
    (the median of their values) with --rounds K >= 2, else from time windows of the level (within this run
    only); absent in results written before cellbench wrote it."""

    output_throughput_tps: Annotated[Interval, Doc("The interval of output_throughput_tps.")]
    request_throughput_rps: Annotated[Interval, Doc("The interval of request_throughput_rps.")]


class _UncertaintyRequired(TypedDict):
    basis: Annotated[Literal["within-run", "rounds"], Doc("within-run: one round's time windows; rounds: the rounds' "
                                                          "spread.")]
    rounds: Annotated[int, Doc("Rounds measured (1 without --rounds).", minimum=1)]
    windows: Annotated[int | None, Doc("within-run: the time windows of throughput_ci95; null with rounds, or when the"
                                       " level had too few successful requests for an interval.", minimum=1)]


class Uncertainty(_UncertaintyRequired, total=False):
    """What a level's intervals include (docs/metrics.md, Rounds): `within-run` (one round: time windows of the
    level, blind to what differs between runs) or `rounds` (the spread of K rounds, each a whole run: run-to-run
    noise)."""

    rounds_asked: Annotated[int, Doc("--rounds, only when fewer rounds ran (the cell stopped early).", minimum=2)]


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
