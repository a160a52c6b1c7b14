"""What a cell is given and what it returns: CellConfig, the server Launcher, CellOutcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.result_model import NoResult, Result
from bench.core.verdicts import CellVerdict
from bench.host.affinity import Placement
from bench.load import Progress
from bench.load.procs import ProcsChoice
from bench.run.server import ServerProcess
from bench.setup import profiles

Launcher = Callable[..., ServerProcess]
"""`launch(command, adapter, host, port, log_path, memory_limit_bytes=None)`: start a server and
return it ready, or raise ServerStartError. The launcher owns the server's cleanup; the cell
stops it early when it can."""


@dataclass(frozen=True)
class CellConfig:
    framework: str
    split: str
    profile: profiles.ModelProfile
    results_root: Path
    run_id: str
    levels: tuple[int, ...] = (1, 8, 16)
    requests: int = 100
    warmup: int = 3
    share_server: bool = False
    port: int | None = None  # None: the adapter's port; 0: any free port
    host: str = "127.0.0.1"
    request_timeout_s: float = 300.0
    install: bool = False
    pinned: bool = False  # the adapter's version, not the update `cellbench update` recorded
    ignore_eos: bool = False
    tools_param: bool = False
    prompts_path: Path | None = None
    degraded_fraction: float = 0.2
    endpoint: str | None = None  # an already-running server (base URL): no lifecycle
    # called with (concurrency, bench.load.Progress) about once a second while a level runs
    progress: Callable[[int, Progress], None] | None = field(default=None, compare=False, repr=False)
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
    keep_alive: bool = False  # --keep-alive: connections reused across requests (default: one per request)


@dataclass
class CellOutcome:
    """The verdict, and the result file with its content (`{}` and None when none was written)."""

    verdict: CellVerdict
    result_path: Path | None
    result: Result | NoResult = field(default_factory=NoResult)
