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

from bench.base.doc import Doc, constrain
from bench.core.level_run import Connections
from bench.core.metrics.audits import Audits
from bench.core.metrics.reasoning import Reasoned
from bench.core.metrics.server_view import Energy, ServerMetricsBlock
from bench.core.metrics.stats.attainment import Decision, SloVerdict
from bench.core.metrics.stats.blocks import Interval
from bench.core.metrics.table import OptionalStats, RequiredStats
from bench.core.records import ContentEncodings, ErrorSample

SloLimits = dict[str, Annotated[float, Doc(exclusiveMinimum=0)]]
"""--slo's limits in ms, by SLO name (`ttft_p99`)."""
SLO_NAMES = {"pattern": "^(ttft|tpot|itl|e2el)_p(50|90|95|99)$"}  # the names a SloLimits may hold
Rate = Annotated[float, Doc(exclusiveMinimum=0)] | Literal["inf"]
"""An open-loop level's rate as a result holds it: requests/s, or "inf" (all at once)."""


class ChunkDivergence(TypedDict):
    """How far chunk counts and usage token counts disagree."""

    fraction: Annotated[float | None, Doc("Share of successful requests whose chunk count differs from their token "
                                          "count; null without usage.")]
    warning: Annotated[bool, Doc("The fraction is above the warning threshold.")]


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
    """--ramp-up: the arrival rate rose from start_rps to the level's request_rate over its requests
    (docs/metrics.md, Ramps)."""

    shape: Annotated[str, Doc("linear or exponential in the request's index (docs/metrics.md, Ramps).",
                              enum=['linear', 'exponential'])]
    start_rps: Annotated[float, Doc("The rate the ramp starts from, requests/s.", exclusiveMinimum=0)]


class TraceBlock(TypedDict):
    """--trace-file: the trace this level replayed; its request_rate is the rate the file's offsets offer."""

    file: Annotated[str, Doc("The file's name.", minLength=1)]
    sha256: Annotated[str, Doc("sha256 of the file's bytes.", pattern='^[0-9a-f]{64}$')]
    format: Annotated[str, Doc("mooncake (JSONL) or burstgpt (CSV).", enum=['mooncake', 'burstgpt'])]
    entries: Annotated[int, Doc("The trace's requests (skipped rows not counted).", minimum=1)]
    sent: Annotated[int, Doc("Of them, sent as measured requests: fewer when --duration ended the level first.",
                             minimum=0)]
    skipped: Annotated[int, Doc("Rows no replay can send: BurstGPT's with 0 response tokens.", minimum=0)]


class _OpenLoopRequired(TypedDict):
    arrivals: Annotated[str, Doc("poisson (burstiness 1), gamma (another burstiness), all at once (rate inf) or trace "
                                 "(--trace-file: the file's own arrival offsets).",
                                 enum=['poisson', 'gamma', 'all at once', 'trace'])]
    burstiness: Annotated[float, Doc("Shape of the gamma inter-arrival times, mean 1/rate: 1 is Poisson, larger is "
                                     "more regular (coefficient of variation 1/sqrt(burstiness)).", exclusiveMinimum=0)]
    max_concurrency: Annotated[int | None, Doc("--max-concurrency: the most requests in flight; an arrival that found "
                                               "it full waited (queue_delay_ms). null: no cap.", minimum=1)]
    seed: Annotated[int, Doc("The schedule's seed: a rate, burstiness and seed give the same send offsets in every "
                             "run.")]
    offered_rate_rps: Annotated[float | None, Doc("(n - 1) / span of the schedule's n arrival offsets: the rate the "
                                                  "schedule offered; null for rate inf or a single request.",
                                                  minimum=0)]
    achieved_rate_rps: Annotated[float | None, Doc("(n - 1) / span of the measured requests' send times: below the "
                                                   "offered rate when the cap held arrivals back or the client fell "
                                                   "behind.", minimum=0)]
    queued: Annotated[int, Doc("Measured requests that found the cap full and waited.", minimum=0)]
    peak_in_flight: Annotated[int, Doc("The most measured requests in flight at once (never above max_concurrency).",
                                       minimum=0)]


class OpenLoopBlock(_OpenLoopRequired, total=False):
    """How an open-loop level's requests arrived (bench.core.metrics.open_loop_block)."""

    ramp: Annotated[RampBlock, Doc("--ramp-up: the arrival rate rose from start_rps to the level's request_rate over "
                                   "its requests (docs/metrics.md, Ramps).")]
    trace: Annotated[TraceBlock, Doc("--trace-file: the trace this level replayed; its request_rate is the rate the "
                                     "file's offsets offer.")]


class DurationBlock(TypedDict):
    """--duration: the measured phase's time bound, and what ended the level first; either way the level is
    complete (not partial)."""

    limit_s: Annotated[float, Doc("--duration in seconds.", exclusiveMinimum=0)]
    ended_by: Annotated[str, Doc("duration: the time was up before every request asked for was sent; requests: they "
                                 "were all sent first.", enum=['duration', 'requests'])]
    sent: Annotated[int, Doc("Measured requests sent.", minimum=0)]
    asked: Annotated[int, Doc("Measured requests asked for: --requests, or a trace's entries.", minimum=0)]


class _GoodputRequired(TypedDict):

    slo: Annotated[SloLimits, Doc("--slo: each SLO's limit in ms, by name (`ttft_p99`: 99% of the requests must have "
                                  "TTFT within it).", propertyNames=SLO_NAMES)]
    good_requests: Annotated[int, Doc("Measured requests that succeeded and met every SLO's limit.", minimum=0)]
    goodput_rps: Annotated[float | None, Doc("good_requests / wall_time_s; null for a level with no wall time.",
                                             minimum=0)]
    attainment: Annotated[dict[str, Annotated[float | None, Doc(minimum=0, maximum=1)]], Doc(
        "Per SLO: the share of the measured requests within its limit (a failed request is not); null without "
        "requests.")]
    slo_met: Annotated[bool, Doc("Every attainment reached its percentile, the level ran to its end and (open loop) "
                                 "sent at least 90% of its offered rate.")]
    missed: Annotated[list[str], Doc("Why slo_met is false, one line per reason; empty when it is true.")]


class Goodput(_GoodputRequired, total=False):
    """--slo: the level against the SLOs (bench.core.open_loop.goodput); results written before the verdicts with
    confidence lack them."""

    slo_verdicts: Annotated[dict[str, SloVerdict], Doc(
        "Per SLO, its attainment judged with 95% confidence (bench.core.metrics.stats.attainment): met, missed or "
        "cannot tell, with the share's one-sided bounds and the requests that would decide it.")]
    slo_decision: Annotated[Decision, Doc(
        "The level against the SLOs with 95% confidence: missed where an SLO is missed, or the level stopped early "
        "or fell behind its offered rate; met where every SLO is met; else cannot tell. slo_met reads the measured "
        "shares as the truth; this does not.")]


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

    concurrency: Annotated[int, Doc("A closed-loop level: this many slots, each sending its next request when its last"
                                    " one is over (requests in flight).", minimum=1)]
    request_rate: Annotated[Rate, Doc("An open-loop level: requests arrived at this rate (requests/s) on a "
                                             "seeded schedule, whatever the server did; \"inf\": all at once.")]
    open_loop: Annotated[OpenLoopBlock, Doc("How an open-loop level's requests arrived "
                                            "(bench.core.metrics.open_loop_block).")]


class _LevelRequired(RequiredStats):
    num_requests: Annotated[int, Doc("Measured requests that were sent.", minimum=0)]
    successful: Annotated[int, Doc("Of them, complete and well-formed.", minimum=0)]
    failed: Annotated[int, Doc("Of them, failed.", minimum=0)]
    partial: Annotated[bool, Doc("The level stopped before it sent all its requests (budget, hang, server gone, "
                                 "interrupt).")]
    stop_reason: Annotated[str | None, Doc("Why it stopped early; null when it ran to the end.")]
    wall_time_s: Annotated[float, Doc("First send to last end over the measured requests, seconds.", minimum=0)]
    output_tokens_total: Annotated[int, Doc("Output tokens of the successful requests.", minimum=0)]
    input_tokens_total: Annotated[int | None, Doc("Prompt tokens of the successful requests; null when the server "
                                                  "reported no usage.", minimum=0)]
    chunks_total: Annotated[int, Doc("Streamed content chunks of the successful requests.", minimum=0)]
    output_throughput_tps: Annotated[float | None, Doc("Output tokens per wall second; null for a level that measured "
                                                       "no request (stopped in warm-up).", minimum=0)]
    request_throughput_rps: Annotated[float | None, Doc("Successful requests per wall second; null for a level that "
                                                        "measured no request.", minimum=0)]
    input_throughput_tps: Annotated[float | None, Doc("Prompt tokens per wall second; null when unknown.")]
    total_token_throughput_tps: Annotated[float | None, Doc("Prompt plus output tokens per wall second; null when "
                                                            "unknown.")]
    tokens_per_chunk: Annotated[float | None, Doc("Output tokens per streamed chunk; null without successes.")]
    usage_available: Annotated[bool, Doc("Every successful request carried the server's token usage.")]
    itl_per_chunk: Annotated[bool, Doc("The server bundles tokens into chunks (more than ~1.5 per chunk): ITL is per "
                                       "chunk, not per token (annotation chunk-bundling).")]
    errors: Annotated[dict[str, Annotated[int, Doc(minimum=0)]],
                      Doc("Failed requests per error type (bench.core.records.ErrorType values).")]
    error_samples: Annotated[dict[str, Annotated[list[ErrorSample], Doc(maxItems=5)]],
                             Doc("Up to 5 example failures per error type.")]
    dominant_error: Annotated[DominantError | None, Doc("The most frequent (error type, HTTP status) of the level with"
                                                        " its count; null without failures.")]


class Level(_LevelRequired, LevelIdentity, OptionalStats, ContentEncodings, Reasoned, total=False):
    """One level (bench.core.metrics.summarize_level; formulas in docs/metrics.md): a closed-loop level has
    `concurrency`, an open-loop one `request_rate` and `open_loop` (never both). Its stats blocks (ttft_ms,
    itl_ms, ...: one per row of the metric table, bench.core.metrics.table) are written into result.schema.json
    from that table by `python -m bench.core.schema.generate`, each required as its row's `when` says."""

    goodput: Annotated[Goodput, Doc("--slo: the level against the SLOs (bench.core.open_loop.goodput).")]
    duration: Annotated[DurationBlock, Doc("--duration: the measured phase's time bound, and what ended the level "
                                           "first; either way the level is complete (not partial).")]
    energy: Annotated[Energy, Doc("A started server's levels: energy per output token from the sampled power "
                                  "(bench.core.lenses.energy).")]
    server_metrics: Annotated[ServerMetricsBlock, Doc("A started server whose adapter declares its metrics: the level "
                                                      "as the server saw it.")]
    prompt_reuse: PromptReuse
    # measured results only (an imported level lacks what the other tool never recorded)
    started_at: Annotated[float, Doc("When the level's measured phase started, Unix time (seconds).")]
    chunk_divergence: Annotated[ChunkDivergence, Doc("How far chunk counts and usage token counts disagree.")]
    audits: Annotated[Audits, Doc("The level's audits (bench.core.metrics.audits; docs/metrics.md, Audits): checks "
                                  "that its numbers mean what they say. An audit that fires annotates the cell and "
                                  "never changes its verdict. Absent from results written before the audits.")]
    served_models: Annotated[list[str], Doc("Distinct `model` values in the responses.")]
    client: ClientHealthBlock
    warmup: Warmup
    # measured by a cellbench that reports uncertainty (an earlier result's levels have none)
    throughput_ci95: Annotated[ThroughputIntervals, Doc("The 95% interval of the output and request throughput: from "
                                                        "the rounds, or within-run (uncertainty says which).")]
    uncertainty: Annotated[Uncertainty, Doc("What this level's intervals include: within-run or rounds.")]
    rounds: Annotated[list[Level], Doc("--rounds K >= 2: the K rounds of this level in the order measured, each a "
                                       "complete level with its `round`; this level combines them (medians, sums, the "
                                       "worst round's evidence: docs/metrics.md, Rounds).", minItems=1)]
    round: Annotated[int, Doc("In a level's `rounds`: which round this is, 1-based.", minimum=1)]


# A closed-loop level has concurrency and nothing of an open-loop one; an open-loop level has both
# request_rate and open_loop, and no concurrency.
constrain(Level, {"oneOf": [
    {"required": ["concurrency"], "not": {"anyOf": [{"required": ["request_rate"]}, {"required": ["open_loop"]}]}},
    {"required": ["request_rate", "open_loop"], "not": {"required": ["concurrency"]}},
]})
