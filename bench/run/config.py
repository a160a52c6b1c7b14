"""What a cell is given and what it returns: CellConfig, the server Launcher, CellOutcome (on an
interrupt, carried by CellInterrupted). The options' texts are parsed into them by bench.run.parsing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.base.defaults import (
    DEFAULT_DEGRADED_FRACTION,
    DEFAULT_LEVELS,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_REQUESTS,
    DEFAULT_WARMUP,
)
from bench.core.level_run import CarriedInterrupt, Ramp, TraceSchedule
from bench.core.open_loop import Slo
from bench.core.result.model import NoResult, Result
from bench.core.verdicts import CellVerdict
from bench.host.affinity import Placement
from bench.load import Progress
from bench.load.procs import ProcsChoice
from bench.run.levels.sweep import SweepPlan
from bench.run.scrape.scraper import INTERVAL_S as SCRAPE_INTERVAL_S
from bench.run.server.process import ServerProcess
from bench.setup import profiles
from bench.setup.traces import Trace

Launcher = Callable[..., ServerProcess]
"""`launch(command, adapter, host, port, log_path, memory_limit_bytes=None, budget_s=None,
stall_timeout_s=None, api_key=None)`: start a server and return it ready (its ready path asked with
the API key), or raise ServerStartError. The launcher owns the server's cleanup; the cell
stops it early when it can."""


@dataclass(frozen=True)
class LoadPlan:
    """--request-rate and its companions: open-loop levels at `rates` (or a `sweep` for the highest
    rate meeting `slos`), or, with only --slo, the closed-loop levels judged against `slos`."""

    rates: tuple[float, ...] = ()  # requests/s, each a level (math.inf: all at once); () for none or a sweep
    sweep: SweepPlan | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0
    slos: tuple[Slo, ...] = ()
    trace: Trace | None = None  # --trace-file: one level replaying it
    ramp_up: str | None = None  # --ramp-up: linear or exponential
    ramp_up_start: float | None = None  # --ramp-up-start; None: a tenth of each level's rate
    duration_s: float | None = None  # --duration: each level's measured phase bound in time

    @property
    def open_loop(self) -> bool:
        return bool(self.rates) or self.sweep is not None or self.trace is not None

    def ramp(self, rate: float) -> Ramp | None:
        """The ramp of the level at `rate`, None without --ramp-up."""
        if self.ramp_up is None:
            return None
        return Ramp(self.ramp_up, self.ramp_up_start if self.ramp_up_start is not None else rate * RAMP_START_SHARE)

    def trace_schedule(self) -> TraceSchedule | None:
        if (trace := self.trace) is None:
            return None
        return TraceSchedule(trace.name, trace.sha256, trace.format, tuple(e.offset_s for e in trace.entries),
                             trace.skipped)


RAMP_START_SHARE = 0.1  # --ramp-up without --ramp-up-start starts each level at a tenth of its rate

# The weekly run's caps (a chat cell 45 minutes, an agent cell 90): a cell that has not finished by
# then is stuck or far too slow to be worth the rest of the night.
DEFAULT_CELL_BUDGET_S = {"chat": 45 * 60.0, "agent": 90 * 60.0}



@dataclass(frozen=True)
class CellConfig:
    framework: str
    split: str
    profile: profiles.ModelProfile
    results_root: Path
    run_id: str
    levels: tuple[int, ...] = DEFAULT_LEVELS
    requests: int = DEFAULT_REQUESTS
    warmup: int = DEFAULT_WARMUP
    share_server: bool = False
    port: int | None = None  # None: the adapter's port; 0: any free port
    host: str = "127.0.0.1"
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    install: bool = False
    pinned: bool = False  # the adapter's version, not the update `cellbench update` recorded
    ignore_eos: bool = False
    tools_param: bool = False
    prompts_path: Path | None = None  # this split's file (--prompts PATH or split=PATH); None: the shipped split
    degraded_fraction: float = DEFAULT_DEGRADED_FRACTION
    endpoint: str | None = None  # an already-running server (base URL): no lifecycle
    # called with (concurrency, or an open-loop level's label, bench.load.Progress) about once a
    # second while a level runs
    progress: Callable[[int | str, Progress], None] | None = field(default=None, compare=False, repr=False)
    budget_s: float | None = None  # wall-clock budget of the whole cell; at the deadline it ends capped
    # perf_counter() when the budget started: the test's setup, so that waiting for the host lock
    # and installing count as pytest-timeout counts them [None: when the levels start]
    budget_from: float | None = None
    stall_timeout_s: float | None = None  # no chunk and no finished request for this long: capped
    ready_timeout_s: float | None = None  # how long a server may take to become ready [the adapter's]
    memory_limit_bytes: int | None = None  # each server runs in a memory cgroup of this size
    skip_existing_s: float | None = None  # a non-failed result of this cell this recent (or this run) stands
    cpus: Placement = Placement()  # --client-cpus / --server-cpus, resolved for this host
    client_procs: ProcsChoice = ProcsChoice()  # --client-procs: a count, or auto with the CPUs free for it
    unique_prompts: bool = False  # a nonce opens every request's first message: nothing to cache
    cache_audit: bool = False  # --cache-audit: after the last level, repeated prompts against first ones
    keep_alive: bool = False  # --keep-alive: connections reused across requests (default: one per request)
    # --server-metrics: seconds between scrapes of a started server's metrics where its adapter
    # declares them (bench.run.scrape); None: off, neither scraped nor turned on
    scrape_interval_s: float | None = SCRAPE_INTERVAL_S
    load: LoadPlan | None = None  # open-loop levels (then `levels` only sizes the servers), or --slo
    api_key: profiles.ApiKey | None = None  # sent to every server; given to those whose command takes it
    rounds: int = 1  # --rounds: every level measured this many times, round after round (bench.run.levels)
    model_source: str | None = None  # what chose the profile (--model, APPLEBENCH_MODEL, default); None: not said


@dataclass
class CellOutcome:
    """The verdict, and the result file with its content (`{}` and None when none was written)."""

    verdict: CellVerdict
    result_path: Path | None
    result: Result | NoResult = field(default_factory=NoResult)


class CellInterrupted(CarriedInterrupt):
    """A cell ended by an interrupt after it wrote its result: `outcome` is that result and its
    verdict, which bench.plugins reports as any cell's before the session stops."""

    def __init__(self, interrupt: KeyboardInterrupt, outcome: CellOutcome) -> None:
        super().__init__(interrupt)
        self.outcome = outcome
