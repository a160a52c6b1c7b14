"""Open-loop levels in a result, and the SLOs a level (or a rate sweep) is judged by.

The typed blocks an open-loop run adds to the result document: a level's `open_loop` block
(`bench.core.metrics.open_loop_block` fills it) and its `goodput` block (`goodput` here), both
typed with the level's blocks in bench.core.metrics.blocks; the run_config's `load` block and the
result's `sweep` block, typed here.

An SLO (`--slo ttft_p99=500ms,tpot_p99=50ms`) is a metric (ttft, tpot, itl, e2el), a percentile
(p50, p90, p95, p99) and a limit: at least that share of the level's requests must be within the
limit. Goodput counts the requests that met every limit, as vLLM's bench and DistServe define it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from bench.base.doc import Doc
from bench.core import metrics
from bench.core.level_run import LevelRun
from bench.core.metrics.blocks import SLO_NAMES, Goodput, Rate, SloLimits
from bench.core.metrics.stats.attainment import Decision as SloDecision
from bench.core.metrics.stats.attainment import overall
from bench.core.metrics.stats.attainment import verdict as attainment_verdict
from bench.core.records import RequestRecord

SLO_METRICS = ("ttft", "tpot", "itl", "e2el")
SLO_PERCENTILES = (50, 90, 95, 99)
KEPT_PACE = 0.9  # an open-loop level whose achieved send rate is below this share of its offered rate fell behind


class _LoadRequired(TypedDict):
    mode: Annotated[str, Doc("closed (concurrency slots), open (arrivals at a rate) or trace (arrivals at a trace "
                             "file's offsets).", enum=['closed', 'open', 'trace'])]


class Load(_LoadRequired, total=False):
    """How the levels' requests were sent: present for open-loop levels (--request-rate, --trace-file) or with
    --slo or --duration; absent: closed loop, as in every result before open-loop levels existed."""

    request_rates: Annotated[list[Annotated[Rate, Doc("Requests per second, more than 0, or \"inf\": every request "
                                                      "at once.")]],
                             Doc("--request-rate: the rates asked for (each a level), in order; absent for a sweep.")]
    burstiness: Annotated[float, Doc("--burstiness: the gamma shape of the inter-arrival times (1: Poisson).",
                                     exclusiveMinimum=0)]
    max_concurrency: Annotated[int | None, Doc("--max-concurrency: the most requests in flight; null: no cap.",
                                               minimum=1)]
    seed: Annotated[int, Doc("--arrival-seed: the schedules' seed.")]
    slo: Annotated[SloLimits | None, Doc("--slo: each SLO's limit in ms; null: none.", propertyNames=SLO_NAMES)]
    sweep: Annotated[dict[str, Any] | None, Doc("--request-rate sweep: {start_rps, tolerance, max_levels}; null: fixed"
                                                " rates.")]
    trace: Annotated[LoadTrace, Doc("--trace-file: the file replayed.")]
    ramp_up: Annotated[LoadRamp, Doc("--ramp-up: its shape, and --ramp-up-start (null: a tenth of each level's rate).")]
    duration_s: Annotated[float, Doc("--duration: each level's measured phase bound in time, seconds.",
                                     exclusiveMinimum=0)]
    concurrency_sweep: Annotated[dict[str, Any], Doc("--concurrency sweep: {start, tolerance, max_levels}.")]
    sessions: Annotated[dict[str, Any], Doc("--sessions: {count (null: each of the file's once), turns (null: every "
                                            "user turn), think_s, think (fixed, exponential, or recorded: a Weka "
                                            "trace's own pauses, think_s null), header (null: none)}, with "
                                            "--session-rate rate_per_s, with --sessions-file file {name, format "
                                            "(conversations or weka), and for weka traces, sha256 (one per trace), "
                                            "subagents_not_replayed}: each level's conversations "
                                            "(bench.load.sessions).")]
    stop_over_saturated: Annotated[bool, Doc("An open-loop level ended once its queue was seen growing without bound "
                                             "(--stop-over-saturated, or a sweep); absent where none would.")]


class LoadTrace(TypedDict):
    """--trace-file: the file replayed."""

    file: Annotated[str, Doc("The trace file's name.", minLength=1)]
    sha256: Annotated[str, Doc("sha256 of the file's bytes.", pattern='^[0-9a-f]{64}$')]
    format: Annotated[str, Doc("mooncake (JSONL) or burstgpt (CSV).", enum=['mooncake', 'burstgpt'])]
    entries: Annotated[int, Doc("The trace's requests (skipped rows not counted).", minimum=1)]
    skipped: Annotated[int, Doc("Rows no replay can send: BurstGPT's with 0 response tokens.", minimum=0)]


class LoadRamp(TypedDict):
    """--ramp-up: its shape, and --ramp-up-start (null: a tenth of each level's rate)."""

    shape: Annotated[str, Doc("linear or exponential in the request's index (docs/metrics.md, Ramps).",
                              enum=['linear', 'exponential'])]
    start_rps: Annotated[float | None, Doc("--ramp-up-start; null: a tenth of each level's rate.", exclusiveMinimum=0)]


class _SweepRequired(TypedDict):

    slo: Annotated[SloLimits, Doc("--slo: each SLO's limit in ms, by name (`ttft_p99`: 99% of the requests must have "
                                  "TTFT within it).", propertyNames=SLO_NAMES)]
    start_rps: Annotated[float, Doc("The first rate tried.", exclusiveMinimum=0)]
    tolerance: Annotated[float, Doc("The search stops once the lowest failing rate is within this share above the "
                                    "highest passing one.", exclusiveMinimum=0)]
    max_levels: Annotated[int, Doc("The most levels the search may run.", minimum=1)]
    rates: Annotated[list[Annotated[float, Doc(exclusiveMinimum=0)]],
                     Doc("The rates run, in order (each a level of `levels`).")]
    passed: Annotated[list[bool], Doc("Whether each of them met the SLOs (its level's goodput.slo_met).")]
    best_rps: Annotated[float | None, Doc("The highest rate that met the SLOs; null when none did.")]
    failing_rps: Annotated[float | None, Doc("The lowest rate above best_rps that did not; null when none failed.")]
    goodput_rps: Annotated[float | None, Doc("The goodput of the best_rps level; null without one.")]
    stopped: Annotated[str, Doc("Why the search stopped: within the tolerance, the level cap, the cell stopping.")]


class Sweep(_SweepRequired, total=False):
    """--request-rate sweep: the highest request rate whose level met every SLO, found by doubling (or halving)
    from start_rps and then bisecting to the tolerance, at most max_levels levels (bench.run.levels.sweep); with
    95% confidence, the highest rate met, the lowest missed and those undecided (absent in earlier results)."""

    decisions: Annotated[list[SloDecision | None], Doc("Each rate's level's goodput.slo_decision, in `rates`' order.")]
    best_met_rps: Annotated[float | None, Doc("The highest rate met with 95% confidence; null when none was.")]
    lowest_missed_rps: Annotated[float | None, Doc("The lowest rate above best_met_rps missed with 95% confidence; "
                                                   "null when none was.")]
    undecided_rps: Annotated[list[float], Doc("The rates whose levels could not be decided either way at 95%.")]


class ConcurrencySweepBlock(TypedDict):
    """--concurrency sweep: the highest closed-loop concurrency whose level met every SLO, found by doubling (or
    halving) from `start` and bisecting over whole numbers of slots, at most max_levels levels
    (bench.run.levels.sweep.ConcurrencySweep); with 95% confidence, the highest met, the lowest missed and those
    undecided."""

    slo: Annotated[SloLimits, Doc("--slo: each SLO's limit in ms, by name.", propertyNames=SLO_NAMES)]
    start: Annotated[int, Doc("The first concurrency tried.", minimum=1)]
    tolerance: Annotated[float, Doc("The search stops once the lowest failing concurrency is within this share above "
                                    "the highest passing one (or no whole number lies between).", exclusiveMinimum=0)]
    max_levels: Annotated[int, Doc("The most levels the search may run.", minimum=1)]
    concurrencies: Annotated[list[Annotated[int, Doc(minimum=1)]],
                             Doc("The concurrencies run, in order (each a level of `levels`).")]
    passed: Annotated[list[bool], Doc("Whether each met the SLOs (its level's goodput.slo_met).")]
    best_concurrency: Annotated[int | None, Doc("The highest that met the SLOs; null when none did.")]
    failing_concurrency: Annotated[int | None, Doc("The lowest above it that did not; null when none failed.")]
    goodput_rps: Annotated[float | None, Doc("The goodput of the best_concurrency level; null without one.")]
    stopped: Annotated[str, Doc("Why the search stopped: within the tolerance, nothing left between, c=1 missed, the "
                                "level cap, the cell stopping.")]
    decisions: Annotated[list[SloDecision | None], Doc("Each level's goodput.slo_decision, in `concurrencies`' "
                                                       "order.")]
    best_met_concurrency: Annotated[int | None, Doc("The highest concurrency met with 95% confidence; null when none "
                                                    "was.")]
    lowest_missed_concurrency: Annotated[int | None, Doc("The lowest above best_met_concurrency missed with 95% "
                                                         "confidence; null when none was.")]
    undecided_concurrencies: Annotated[list[int], Doc("The concurrencies whose levels could not be decided at 95%.")]


@dataclass(frozen=True)
class Slo:
    metric: str  # ttft, tpot, itl or e2el
    percentile: int  # 50, 90, 95 or 99
    limit_ms: float

    @property
    def name(self) -> str:
        return f"{self.metric}_p{self.percentile}"


_SLO = re.compile(r"^(ttft|tpot|itl|e2el)_p(50|90|95|99)$")
_UNITS_MS = {"ms": 1.0, "s": 1000.0, "": 1.0}


def parse_slos(text: str) -> tuple[Slo, ...]:
    """`ttft_p99=500ms,tpot_p99=50ms` (ms, or s; a bare number is ms) -> Slos; ValueError with
    what is wrong."""
    slos: dict[str, Slo] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        match = _SLO.match(name.strip().lower())
        number = re.match(r"^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ms|s|)\s*$", value.lower())
        if not sep or match is None or number is None or not float(number.group(1)) > 0:
            raise ValueError(f"{part!r}: an SLO is METRIC_pNN=LIMIT, METRIC one of {', '.join(SLO_METRICS)}, "
                             f"NN one of {', '.join(map(str, SLO_PERCENTILES))}, LIMIT more than 0 (ms or s)")
        slo = Slo(match.group(1), int(match.group(2)), float(number.group(1)) * _UNITS_MS[number.group(2)])
        slos[slo.name] = slo
    if not slos:
        raise ValueError("no SLO given")
    return tuple(slos.values())


def slo_json(slos: Sequence[Slo]) -> dict[str, float]:
    """{"ttft_p99": 500.0, ...}: each limit in ms."""
    return {s.name: s.limit_ms for s in slos}


_PER_REQUEST: dict[str, Callable[[RequestRecord], float | None]] = {
    "ttft": metrics.ttft, "tpot": metrics.tpot, "e2el": metrics.e2el}


def within(r: RequestRecord, slo: Slo) -> bool:
    """Whether one request met one SLO's limit. A failed request never does. TTFT, TPOT and E2EL
    are the request's own (a request with one output token has no TPOT, and meets a TPOT limit);
    ITL, a per-gap metric, is the percentile of the request's own gaps (none: met)."""
    if not r.ok:
        return False
    if slo.metric == "itl":
        gaps = metrics.itl(r)
        value = metrics.percentile(gaps, slo.percentile) if gaps else None
    else:
        value = _PER_REQUEST[slo.metric](r)
    return value is None or value * 1000.0 <= slo.limit_ms


def goodput(run: LevelRun, slos: Sequence[Slo]) -> Goodput:
    """The level against the SLOs.

    good_requests = measured requests that succeeded and met every limit (`within`);
    goodput_rps = good_requests / wall_time_s (the level's wall time: first t_send .. last t_end),
    the definition of vLLM's bench and of DistServe; attainment[slo] = the share of the level's
    measured requests (failed ones count as missing every limit) within that SLO's limit;
    slo_met = the level ran to its end, every attainment >= its percentile / 100 (ttft_p99=500ms:
    99% of the requests had TTFT <= 500 ms) and, for an open-loop level, it kept pace: the achieved
    send rate at least 90% of the offered one (else the server held the arrivals back under
    --max-concurrency, or the client fell behind). `missed` says which of these failed.

    slo_met reads each measured share as if it were the truth. `slo_verdicts` judge each SLO with
    95% confidence (bench.core.metrics.stats.attainment: an exact binomial test of the share within
    against the target), and `slo_decision` is the level's: missed where an SLO is missed at 95%, or
    the level stopped early or fell behind; met where every SLO is met at 95%; else cannot tell."""
    records = run.records
    n = len(records)
    wall = run.t_end - run.t_start
    good = sum(1 for r in records if all(within(r, s) for s in slos))
    counts = {s.name: sum(within(r, s) for r in records) for s in slos}
    attainment = {s.name: (counts[s.name] / n if n else None) for s in slos}
    verdicts = {s.name: attainment_verdict(counts[s.name], n, s.percentile / 100.0) for s in slos}
    missed = [] if n else ["no measured request"]
    if run.partial:
        missed.append(f"the level stopped early: {run.stop_reason}")
    for s in slos:
        share = attainment[s.name]
        if share is not None and share < s.percentile / 100.0 - 1e-12:
            missed.append(f"{s.name}: {share:.1%} of the requests within {s.limit_ms:g} ms, "
                          f"{s.percentile}% needed")
    if run.config.open_loop is not None:
        offered = metrics.arrival_rate(run.schedule)
        achieved = metrics.arrival_rate([r.t_send for r in records if r.t_send is not None])
        if offered is not None and (achieved is None or achieved < KEPT_PACE * offered):
            got = "nothing" if achieved is None else f"{achieved:.3g} req/s"
            missed.append(f"fell behind: sent at {got}, under {KEPT_PACE:.0%} of the offered {offered:.3g} req/s")
    shortfall = [m for m in missed if not any(m.startswith(f"{s.name}: ") for s in slos)]  # not an attainment's
    return {
        "slo": slo_json(slos),
        "good_requests": good,
        "goodput_rps": good / wall if wall > 0 else None,
        "attainment": attainment,
        "slo_met": not missed,
        "missed": missed,
        "slo_verdicts": verdicts,
        "slo_decision": "missed" if shortfall else overall(list(verdicts.values())),
    }


def round_rate(rate: float, digits: int = 3) -> float:
    """A rate to `digits` significant digits (the sweep's rates stay readable: 4.75, not 4.7500001)."""
    if rate <= 0 or math.isinf(rate):
        return rate
    return float(f"{rate:.{digits}g}")
