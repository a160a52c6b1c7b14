"""The result document's types: one TypedDict per block of `bench/core/schema/result.schema.json`.

A level's blocks are typed where they are measured (bench.core.metrics.blocks, the stats keys in
the metric table bench.core.metrics.table), and so are the blocks the layers below this one build:
`Revision` (bench.base.git.revision, the required part of `Harness`), `MachineBlock`
(bench.host.machine.HostMachine.to_json), `CpuAffinity` (bench.host.affinity.Placement.to_json) and
`ServerResources` (bench.host.resources.ResourceSampler.summary). All of them are named here too,
so that a reader imports every block of a result from this module. Every other block is typed
here, and the code above that builds one returns it typed (`ServerCommand`:
bench.setup.adapter.ServeCommand.to_json, `ServerExit`: bench.run.server.exits.ExitInfo.to_json,
`AdapterSource`: adapters.source and bench.run.fixes.profile_source), so mypy checks each block's
keys where its dict is written. A block whose concept also has a runtime class is named
`<Concept>Block` (`VerdictBlock`: bench.core.verdicts.CellVerdict, `MachineBlock`:
bench.host.machine.HostMachine, `FixBlock`: bench.run.fixes.Fix, `ClientHealthBlock`,
`OpenLoopBlock`); every other block is named as the schema names it.

The schema is the authority: a result is validated when written (`bench.core.result.files.write_result`)
and when read (`bench.core.result.store`). These TypedDicts type the same dict, never converted: the dict a
cell assembles is the one written, and the one a report reads is the one validated. A key the schema
does not require is in a `total=False` subclass (`Server` over `_ServerRequired`); a key a measured
result always has and an imported one (another benchmark's file, converted) may lack is optional
here and in the schema's blocks, whose top-level `else` requires it without `imported`
(tests/core/test_result_model.py, tests/imports/test_import_siliconbench.py). The run's load and sweep blocks:
bench.core.open_loop.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict, final

from bench.base.doc import Doc
from bench.base.git import Revision as Revision
from bench.core.level_run import Connections as Connections
from bench.core.metrics.audits import Audits as Audits
from bench.core.metrics.audits import CacheAudit as CacheAudit
from bench.core.metrics.audits import OutputLength as OutputLength
from bench.core.metrics.audits import RatioInterval as RatioInterval
from bench.core.metrics.audits import TokenAccounting as TokenAccounting
from bench.core.metrics.blocks import ChunkDivergence as ChunkDivergence
from bench.core.metrics.blocks import ClientHealthBlock as ClientHealthBlock
from bench.core.metrics.blocks import DominantError as DominantError
from bench.core.metrics.blocks import Goodput as Goodput
from bench.core.metrics.blocks import Level
from bench.core.metrics.blocks import OpenLoopBlock as OpenLoopBlock
from bench.core.metrics.blocks import PromptReuse as PromptReuse
from bench.core.metrics.blocks import ThroughputIntervals as ThroughputIntervals
from bench.core.metrics.blocks import Uncertainty as Uncertainty
from bench.core.metrics.blocks import Warmup as Warmup
from bench.core.metrics.reasoning import Reasoning as Reasoning
from bench.core.metrics.stats.statistics import Stats as Stats
from bench.core.open_loop import Load, Sweep
from bench.core.records import ErrorSample as ErrorSample
from bench.host.affinity import CpuAffinity as CpuAffinity
from bench.host.machine import MachineBlock as MachineBlock
from bench.host.resources import ServerResources as ServerResources


class _ServerCommandRequired(TypedDict):
    argv: list[str]
    env: dict[str, str]


class ServerCommand(_ServerCommandRequired, total=False):
    cwd: str | None
    cpus: list[int]


class _ServerExitRequired(TypedDict):
    returncode: int | None
    signal: str | None
    stopped_by_us: bool


class ServerExit(_ServerExitRequired, total=False):
    oom: dict[str, Any]  # free-form: the OOM evidence of whichever source found it (bench.host.memory.oom)
    oom_check_error: str
    memory: dict[str, Any]  # free-form: the memory limit's own report (bench.host.memory.memlimit)


class ReportedVersion(TypedDict):
    path: str
    version: str


class _ServerRequired(TypedDict):
    levels: list[int | str]  # concurrency levels, or open-loop levels' labels ("4 req/s")


class Server(_ServerRequired, total=False):
    """One server of the cell (one per level, or one shared), or the --endpoint it ran against."""

    port: int
    command: ServerCommand
    log: str
    external: str
    retried_after: str
    start_error: str
    oom: dict[str, Any]  # free-form, as ServerExit.oom
    ready_after_s: float | None
    reported_version: ReportedVersion | None
    exit: ServerExit
    resources: ServerResources
    overhead: dict[str, float]  # the suite's seconds: spawn_s, ready_detect_bound_s, teardown_s


class _VerdictBlockRequired(TypedDict):
    verdict: Annotated[str, Doc("The verdict.", enum=["ok", "degraded", "all-failed", "wrong-model", "capped", "oom",
                                                      "failed", "skipped", "fixed"])]  # bench.core.verdicts.Verdict
    reason: Annotated[str, Doc("One line a user can act on.", minLength=1)]
    annotations: Annotated[list[str], Doc("Notes on how to read the numbers; they never change the verdict "
                                          "(chunk-bundling, prompt-reuse, uncertain, retried, suspicious, resumed).")]


class VerdictBlock(_VerdictBlockRequired, total=False):
    """The cell's verdict (bench.core.verdicts; rules in docs/verdicts.md)."""

    retryable: Annotated[bool, Doc("False for an OOM: the machine lacks the memory, a retry would not help. Absent "
                                   "otherwise.")]
    suspicious: Annotated[str, Doc("Why the output throughput changed 10-fold or more against the previous result of "
                                   "the same cell; present with the suspicious annotation.")]
    fix: Annotated[FixBlock, Doc("Present with the verdict fixed: the previous result of this cell failed earlier in "
                                 "the run, and the adapter module changed since (bench.run.fixes).")]


class _FrameworkRequired(TypedDict):
    name: str
    version: str
    install_source: str
    install: dict[str, Any]  # free-form: each install recipe records its own details


class Framework(_FrameworkRequired, total=False):
    platform: str
    version_source: str
    version_choice: str  # "pinned" | "updated" (bench.setup.installs.updates); absent for a user's own install
    pinned_version: str  # the adapter's version, when an update was served instead


class ServedModels(TypedDict):
    listed: list[str] | None
    responses: list[str]


class _ModelRequired(TypedDict):
    profile: str
    results_name: str
    format: str
    path: str | None
    requested: str


class Model(_ModelRequired, total=False):
    served: ServedModels  # measured results only
    profile_source: str  # --model, APPLEBENCH_MODEL or default: a pytest session's cells only


class _PromptsRequired(TypedDict):
    source: str
    format: str
    count: int


class Prompts(_PromptsRequired, total=False):
    tools_param: bool


class _RunConfigRequired(TypedDict):
    levels: list[int | str]  # concurrency levels, or open-loop levels' labels ("4 req/s", "sweep")
    requests_per_level: int


class RunConfig(_RunConfigRequired, total=False):
    # measured results only, but cpu_affinity and unique_prompts
    warmup: int
    levels_share_server: bool
    request_timeout_s: float
    request_extras: dict[str, Any]  # free-form: the JSON body fields sent with every request
    prompts: Prompts
    cpu_affinity: CpuAffinity
    unique_prompts: bool
    keep_alive: bool
    server_metrics: bool  # --server-metrics; absent: before the option (scraped where declared)
    load: Load  # open loop, or --slo; absent: closed loop
    rounds: int  # --rounds K >= 2; absent: one round


class AdapterSource(TypedDict):
    file: str
    sha256: str


class Harness(Revision, total=False):
    """The cellbench checkout that measured a cell, and the adapter module it ran."""

    adapter: AdapterSource
    profile: AdapterSource  # the model profile file the cell ran, as the adapter's: an edit of it is a fix too


class _FixBlockRequired(TypedDict):

    from_verdict: Annotated[str, Doc("The earlier result's verdict.")]
    from_reason: Annotated[str, Doc("The earlier result's reason.")]
    from_result: Annotated[str, Doc("The earlier result's file name, in this folder.")]
    from_run_id: Annotated[str, Doc("The earlier result's run id.")]
    from_finished_at: Annotated[str, Doc("When the earlier result finished (ISO 8601).")]
    adapter: Annotated[str, Doc("The edited adapter module, relative to the checkout.")]
    sha256_before: Annotated[str, Doc("The adapter module's sha256 when the earlier result ran.")]
    sha256_after: Annotated[str, Doc("The adapter module's sha256 when this result ran.")]


class FixBlock(_FixBlockRequired, total=False):
    """Present with the verdict fixed: the previous result of this cell failed earlier in the run, and the
    adapter module changed since (bench.run.fixes)."""

    reference: Annotated[str, Doc("The upstream commit, changelog entry or issue URL the fix follows; every fix made "
                                  "since 2026-12 records one.")]


class _ResultRequired(TypedDict):
    schema_version: int
    run_id: str
    framework: Framework
    split: str
    model: Model
    machine: MachineBlock
    run_config: RunConfig
    started_at: str
    finished_at: str
    duration_s: float
    levels: list[Level]
    verdict: VerdictBlock


class MetricMethod(TypedDict):
    """How an imported metric was derived, and whether it means what cellbench's metric of that name means
    (docs/metrics.md)."""

    comparable: Annotated[bool, Doc("Derived as cellbench derives it: reports and the suspicious check may compare it "
                                    "with a measured result.")]
    note: Annotated[str, Doc("How the other tool derived it; for one that is not comparable, why (one line).",
                             minLength=1)]


class Imported(TypedDict):
    """Where an imported result came from (bench.imports): present in no measured result."""

    tool: str
    label: str
    file: str
    sha256: str
    timestamp: str
    imported_at: str
    source_machine: dict[str, Any] | None  # free-form: the other tool's own machine record
    methods: dict[str, MetricMethod]
    warnings: list[str]


class Unfinished(TypedDict):
    """A result written while its cell still ran (after each level); the cell's last write has none.
    Still there once `pid` on `host` is gone: the run was killed (bench.core.result.store.killed)."""

    pid: int  # the pytest process writing it
    host: str  # socket.gethostname() of its machine
    updated_at: str  # when it was written, ISO 8601
    levels_done: int  # levels (with --rounds, level rounds) measured and written so far


class Result(_ResultRequired, total=False):
    """One cell's result file."""

    harness: Harness  # absent in files of an earlier cellbench
    unfinished: Unfinished  # only while the cell runs, or in a killed run's file
    # measured results only
    servers: list[Server]
    requests_file: str
    sweep: Sweep  # --request-rate sweep
    # imported results only
    imported: Imported


class IgnoredFile(TypedDict):
    file: str
    reason: str


@final  # no other keys: `"levels" in result` tells a Result from it
class NoResult(TypedDict):
    """What a cell that wrote no result file (skipped, failed before a server) carries: `{}`."""


