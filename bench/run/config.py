"""What a cell is given and what it returns: CellConfig, the server Launcher, CellOutcome (on an
interrupt, carried by CellInterrupted). The options' texts are parsed into them by bench.run.parsing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.base.defaults import DEFAULT_DEGRADED_THRESHOLD, DEFAULT_LEVELS, DEFAULT_REQUESTS, DEFAULT_WARMUP
from bench.core.client_settings import ClientSettings
from bench.core.level_run import CarriedInterrupt, Ramp, TraceSchedule
from bench.core.open_loop import Slo
from bench.core.result.model import NoResult, Result
from bench.core.verdicts import CellVerdict
from bench.load import Progress
from bench.load.watch.progress import DEFAULT_INTERVAL_S
from bench.run.levels.sweep import SweepPlan
from bench.run.scrape.scraper import INTERVAL_S as SCRAPE_INTERVAL_S
from bench.run.server.process import ServerProcess
from bench.setup import profiles
from bench.setup.traces import Trace
from bench.setup.traces.weka import WEKA, WekaTrace

Launcher = Callable[..., ServerProcess]
"""`launch(command, adapter, host, port, log_path, memory_limit_bytes=None, budget_s=None,
hang_s=None, api_key=None)`: start a server and return it ready (its ready path asked with
the API key), or raise ServerStartError. The launcher owns the server's cleanup; the cell
stops it early when it can."""


@dataclass(frozen=True)
class LoadPlan:
    """--request-rate and its companions: open-loop levels at `rates` (or a `sweep` for the highest
    rate meeting `slos`), or, with only --slo, the closed-loop levels judged against `slos` (or a
    `concurrency_sweep` for the highest concurrency meeting them)."""

    rates: tuple[float, ...] = ()  # requests/s, each a level (math.inf: all at once); () for none or a sweep
    sweep: SweepPlan | None = None
    concurrency_sweep: SweepPlan | None = None  # --concurrency sweep: closed-loop levels searched
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0
    slos: tuple[Slo, ...] = ()
    trace: Trace | None = None  # --trace-file: one level replaying it
    ramp_up: str | None = None  # --ramp-up: linear or exponential
    ramp_up_start: float | None = None  # --ramp-up-start; None: a tenth of each level's rate
    duration_s: float | None = None  # --duration: each level's measured phase bound in time
    # --stop-over-saturated: an open-loop level whose queue grows without bound ends early (a sweep's
    # levels always do; bench.core.figures.saturation)
    stop_over_saturated: bool = False

    @property
    def stops_over_saturated(self) -> bool:
        return self.stop_over_saturated or self.sweep is not None

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


@dataclass(frozen=True)
class SessionPlan:
    """--sessions and its companions: each closed-loop level runs `count` conversations of the cell's
    prompts or of `file`, at most `turns` turns each, `think_s` between turns (drawn: exponential of
    that mean; None: the pauses a recorded trace gives), `header` naming each session, started as
    slots free up or at `rate_per_s` (bench.load.sessions)."""

    count: int | None  # --sessions; None: each conversation of --sessions-file once
    turns: int | None = None  # --session-turns; None: every user turn of the conversation
    think_s: float | None = 0.0  # --think-time
    think_drawn: bool = False  # --think-time exp:S
    header: str | None = None  # --session-header
    file: Path | None = None  # --sessions-file: a conversation file (as --prompts reads) or Weka traces
    weka: tuple[WekaTrace, ...] = ()  # the file's Weka traces, read once at parse; () for a conversation file
    rate_per_s: float | None = None  # --session-rate

    def file_json(self) -> dict[str, Any] | None:
        """run_config.load.sessions.file: what --sessions-file replayed; None without one."""
        if self.file is None:
            return None
        if not self.weka:
            return {"name": self.file.name, "format": "conversations"}
        return {"name": self.file.name, "format": WEKA, "traces": len(self.weka),
                "sha256": [t.sha256 for t in self.weka],
                "subagents_not_replayed": sum(t.subagents for t in self.weka)}


RAMP_START_SHARE = 0.1  # --ramp-up without --ramp-up-start starts each level at a tenth of its rate

# The weekly run's caps (a chat cell 45 minutes, an agent cell 90): a cell that has not finished by
# then is stuck or far too slow to be worth the rest of the night.
DEFAULT_CELL_BUDGET_S = {"chat": 45 * 60.0, "agent": 90 * 60.0}
# No output and no finished request for this long (30 minutes of chat, 45 of agent) stops a level.
DEFAULT_HANG_S = {"chat": 30 * 60.0, "agent": 45 * 60.0}


@dataclass(frozen=True, kw_only=True)
class LoadSettings:
    """What a cell sends: its levels, their requests and warm-up, and how many rounds of them."""

    concurrency: tuple[int, ...] = DEFAULT_LEVELS  # --concurrency: the closed-loop levels
    requests: int = DEFAULT_REQUESTS  # --requests: measured requests per level
    warmup: int = DEFAULT_WARMUP  # --warmup: warm-up requests per level, not measured
    rounds: int = 1  # --rounds: every level measured this many times, round after round (bench.run.levels)
    # --request-rate, its companions, --trace-file, --duration and --slo: open-loop levels (then
    # `concurrency` only sizes the servers), or what judges and bounds the closed-loop ones; None: none given
    plan: LoadPlan | None = None
    cache_audit: bool = False  # --cache-audit: after the last level, repeated prompts against first ones
    fidelity: bool = False  # --fidelity: after the last level, greedy answers against the reference stack's
    fidelity_reference: str = "hf_transformers"  # --fidelity-reference: the stack the answers are compared with
    sessions: SessionPlan | None = None  # --sessions: conversations with the server's own answers (bench.load.sessions)


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    """How a cell gets its servers: started (where, with what, within which limits), or --endpoint's."""

    share_server: bool = False  # --share-server: one server for all the levels
    port: int | None = None  # --port; None: the adapter's port; 0: any free port
    host: str = "127.0.0.1"  # not an option: servers listen on the loopback interface only
    install: bool = False  # --install: install a missing framework instead of skipping its cells
    pinned: bool = False  # --pinned: the adapter's version, not the update `cellbench update` recorded
    ready_timeout_s: float | None = None  # --ready-timeout: how long a server may take to become ready [the adapter's]
    api_key: profiles.ApiKey | None = None  # --api-key: sent to every server; given to those whose command takes it
    endpoint: str | None = None  # --endpoint: an already-running server (base URL): no lifecycle
    memory_limit_bytes: int | None = None  # --memory-limit: each server runs in a memory cgroup of this size
    # --server-metrics: seconds between scrapes of a started server's metrics where its adapter
    # declares them (bench.run.scrape); None: off, neither scraped nor turned on
    server_metrics_s: float | None = SCRAPE_INTERVAL_S


@dataclass(frozen=True, kw_only=True)
class BudgetSettings:
    """How long a cell may take (its budget, the hang watchdog, the wait for the host lock), and
    --skip-existing, which spends no time on a cell measured recently. Per split, seconds."""

    cell_budget_s: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_CELL_BUDGET_S))  # --cell-budget
    cell_budget_named: frozenset[str] = frozenset()  # the splits --cell-budget named (bench.plugins.budget)
    hang_s: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_HANG_S))  # --hang-minutes; 0: none
    host_lock_timeout_s: float = 3600.0  # --host-lock-timeout: then the cell is failed, naming the holder
    skip_existing_s: float | None = None  # --skip-existing: a non-failed result this recent (or of this run) stands


@dataclass(frozen=True, kw_only=True)
class ReportingSettings:
    """How a cell's verdict is judged, its progress shown and its output valued."""

    degraded_threshold: float = DEFAULT_DEGRADED_THRESHOLD  # --degraded-threshold: failure share that degrades
    strict_verdicts: bool = False  # --strict-verdicts: degraded and capped cells fail the run
    progress_interval_s: float = DEFAULT_INTERVAL_S  # --progress-interval: between a level's progress lines
    price_kwh: float | None = None  # --price-kwh: electricity per kWh, for each level's cost (bench.core.figures.cost)
    price_hour: float | None = None  # --price-hour: the machine per hour, likewise


@dataclass(frozen=True)
class CellConfig:
    """One cell's inputs: the session's settings records as they are, and what is the cell's own."""

    framework: str
    split: str
    profile: profiles.ModelProfile
    results_root: Path
    run_id: str
    load: LoadSettings = field(default_factory=LoadSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    client: ClientSettings = field(default_factory=ClientSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    reporting: ReportingSettings = field(default_factory=ReportingSettings)
    # called with (concurrency, or an open-loop level's label, bench.load.Progress) about once a
    # second while a level runs
    progress: Callable[[int | str, Progress], None] | None = field(default=None, compare=False, repr=False)
    # the cell's wall-clock budget: its split's --cell-budget, capped by pytest-timeout's timeout
    # less a margin (bench.plugins.budget); at the deadline it ends capped [None: none]
    cell_budget_s: float | None = None
    # perf_counter() when the budget started: the test's setup, so that waiting for the host lock
    # and installing count as pytest-timeout counts them [None: when the levels start]
    budget_from: float | None = None
    model_source: str | None = None  # what chose the profile (--model, APPLEBENCH_MODEL, default); None: not said

    @property
    def hang_s(self) -> float | None:
        """The hang watchdog of this cell's split (--hang-minutes), seconds; None: off."""
        return self.budget.hang_s.get(self.split) or None

    @property
    def prompts(self) -> Path | None:
        """This split's --prompts file (one for every split, or this split's of split=PATH); None: the shipped one."""
        return self.client.prompts.get(self.split)


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
