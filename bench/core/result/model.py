"""The result document's types: one TypedDict per block of `bench/core/schema/result.schema.json`.

A level's blocks are typed where they are measured (bench.core.metrics.blocks, the stats keys in
the metric table bench.core.metrics.table), and so are the blocks the layers below this one build:
`Revision` (bench.base.git.revision, the required part of `Harness`), `MachineBlock`
(bench.host.machine.HostMachine.to_json), `CpuAffinity` (bench.host.cpus.placement.Placement.to_json) and
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

from bench.base.doc import Doc, constrain
from bench.base.git import Revision as Revision
from bench.core.lenses.fidelity import Fidelity
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
from bench.core.open_loop import ConcurrencySweepBlock, Load, Sweep
from bench.core.records import ErrorSample as ErrorSample
from bench.core.result.server import LevelName, Server
from bench.core.result.server import ReportedVersion as ReportedVersion
from bench.core.result.server import ServerCommand as ServerCommand
from bench.core.result.server import ServerExit as ServerExit
from bench.core.result.server import ServerOverhead as ServerOverhead
from bench.core.result.server import ServerResources as ServerResources
from bench.host.cpus.placement import CpuAffinity as CpuAffinity
from bench.host.machine import MachineBlock as MachineBlock


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
    name: Annotated[str, Doc("The adapter's name (adapters/<name>.py).")]
    version: Annotated[str, Doc("Its version; from the install, else what the running server reported.", minLength=1)]
    install_source: Annotated[str, Doc("Where the install came from: cache, or an external one ($LLAMA_SERVER, "
                                       "PATH...).")]
    install: Annotated[dict[str, Any], Doc("What the install recorded (package, build flags, install time, build "
                                           "log...); free-form per framework.")]


class Framework(_FrameworkRequired, total=False):
    """The inference framework and where its install came from."""

    platform: Annotated[str, Doc("The platform tag the adapter ran under (e.g. linux-x86_64, linux-x86_64+cuda).")]
    version_source: Annotated[str, Doc("Present when the version came from the server: 'server: GET <path>'.")]
    version_choice: Annotated[str, Doc("For an install from the cellbench cache: 'pinned' (the adapter's version, or "
                                       "--pinned) or 'updated' (a newer release `cellbench update` installed and "
                                       "recorded). Absent for a user's own install and in results written before "
                                       "updates existed.", enum=['pinned', 'updated'])]
    pinned_version: Annotated[str, Doc("Present with version_choice 'updated': the adapter's pinned version the update"
                                       " replaced.")]


class ServedModels(TypedDict):
    """What the server said it serves."""

    listed: Annotated[list[str] | None, Doc("Ids /v1/models listed; null when the listing failed.")]
    responses: Annotated[list[str], Doc("Distinct `model` values in the responses.")]


class _ModelRequired(TypedDict):
    profile: Annotated[str, Doc("The model profile's name.")]
    results_name: Annotated[str, Doc("The profile's directory name under results/.")]
    format: Annotated[str, Doc("The weight format the adapter loads.", enum=['gguf', 'hf', 'mlx', 'ollama'])]
    path: Annotated[str | None, Doc("The weights given to the server; null when the server resolves the model itself.")]
    requested: Annotated[str, Doc("The model id sent in every request.", minLength=1)]


class Model(_ModelRequired, total=False):
    """The model asked for and the one the server said it served."""

    served: Annotated[ServedModels, Doc("What the server said it serves.")]
    profile_source: Annotated[str, Doc("What chose the profile: the --model option, the APPLEBENCH_MODEL variable, or "
                                       "the default. Absent in results from before it was recorded, in imported ones "
                                       "and in cells run outside pytest.",
                                       enum=['--model', 'APPLEBENCH_MODEL', 'default'])]


class _PromptsRequired(TypedDict):
    source: Annotated[str, Doc("Where the prompts came from: a file path or a split name.")]
    format: Annotated[str, Doc("Its format (cellbench, or another tool's prompt format).")]
    count: Annotated[int, Doc("Prompts in the set.")]


class Prompts(_PromptsRequired, total=False):
    """The prompt set."""

    tools_param: Annotated[bool, Doc("Agent prompts sent their tool definitions in the request's `tools` parameter.")]


class _RunConfigRequired(TypedDict):
    levels: Annotated[list[LevelName], Doc("The levels asked for, in order: concurrency levels (closed loop), or "
                                           "open-loop levels' labels (\"4 req/s\", \"inf req/s\"), or [\"sweep\"] for "
                                           "--request-rate sweep and --concurrency sweep.", minItems=1)]
    requests_per_level: Annotated[int, Doc("Measured requests per level.", minimum=1)]


class RunConfig(_RunConfigRequired, total=False):
    # measured results only, but cpu_affinity and unique_prompts
    """How the cell was measured: what makes two results comparable."""

    warmup: Annotated[int, Doc("Warm-up requests before each level's measured ones.", minimum=0)]
    levels_share_server: Annotated[bool, Doc("One server for all levels (--share-server, or an --endpoint); false: a "
                                             "fresh server per level.")]
    request_timeout_s: Annotated[float, Doc("Per-request timeout, seconds.")]
    request_extras: Annotated[dict[str, Any], Doc("Fields added to every request body: the profile's sampling, the "
                                                  "adapter's extras, ignore_eos.")]
    prompts: Annotated[Prompts, Doc("The prompt set.")]
    cpu_affinity: Annotated[CpuAffinity, Doc("--client-cpus / --server-cpus as applied: the CPUs the client (the "
                                             "pytest process, during each level) and each server (and everything it "
                                             "starts) ran on.")]
    unique_prompts: Annotated[bool, Doc("--unique-prompts: every request's first message opened with its own nonce, so"
                                        " no cache could serve one request from another.")]
    keep_alive: Annotated[bool, Doc("--keep-alive: requests went on kept-alive connections, reused while the server "
                                    "kept them open; false: one connection per request, closed at its end (the "
                                    "default). Absent in results from before the option existed, which used one "
                                    "connection per request.")]
    server_metrics: Annotated[bool, Doc("--server-metrics: true (the default) when each started server's own "
                                        "Prometheus metrics were scraped around and during every level where its "
                                        "adapter declares them (each level's server_metrics block); false: "
                                        "--server-metrics off, neither scraped nor turned on. Absent in results from "
                                        "before the option existed.")]
    load: Annotated[Load, Doc("How the levels' requests were sent: present for open-loop levels (--request-rate, "
                              "--trace-file) or with --slo or --duration; absent: closed loop, as in every result "
                              "before open-loop levels existed.")]
    rounds: Annotated[int, Doc("--rounds K, only when K >= 2: every level measured K times, round-major; absent: one "
                               "round.", minimum=2)]


class AdapterSource(TypedDict):
    file: Annotated[str, Doc("The module, relative to the checkout (`adapters/<name>.py`).")]
    sha256: Annotated[str, Doc("sha256 of the module's bytes.", pattern="^[0-9a-f]{64}$")]


class ProfileSource(TypedDict):
    file: Annotated[str, Doc("The profile file, relative to the checkout (`models/<profile>.yaml`), or its path when "
                             "outside it.")]
    sha256: Annotated[str, Doc("sha256 of the file's bytes when the cell finished (`unreadable: ...` if it was gone).")]


class Harness(Revision, total=False):
    """The cellbench checkout that measured this cell; absent in files written before it was recorded."""

    adapter: Annotated[AdapterSource, Doc("The adapter module the cell ran, read when the session imported it: two "
                                          "results with different digests ran different adapter code.")]
    profile: Annotated[ProfileSource, Doc("The model profile file the cell ran (models/<profile>.yaml): an edit of it,"
                                          " as of the adapter, can make a later run `fixed`.")]


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
    schema_version: Annotated[int, Doc("The shape of this document; it changes only when the shape does.", const=1)]
    run_id: Annotated[str, Doc("The session's run id: its UTC start time and a random suffix; ids sort by time.",
                               pattern='^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}$')]
    framework: Annotated[Framework, Doc("The inference framework and where its install came from.")]
    split: Annotated[str, Doc("The prompt split: chat, agent, or a custom one.", minLength=1)]
    model: Annotated[Model, Doc("The model asked for and the one the server said it served.")]
    machine: Annotated[MachineBlock, Doc("The machine the cell ran on (bench.host.machine).")]
    run_config: Annotated[RunConfig, Doc("How the cell was measured: what makes two results comparable.")]
    started_at: Annotated[str, Doc("When the cell started, UTC ISO 8601.", format="date-time")]
    finished_at: Annotated[str, Doc("When the cell finished, UTC ISO 8601; with the run id, what orders results of a "
                                    "cell.", format="date-time")]
    duration_s: Annotated[float, Doc("The cell's wall time, seconds.", minimum=0)]
    levels: Annotated[list[Level], Doc("The levels measured, in the order run; a level stopped in warm-up keeps its "
                                       "warm-up evidence.")]
    verdict: VerdictBlock


class MetricMethod(TypedDict):
    """How an imported metric was derived, and whether it means what cellbench's metric of that name means
    (docs/metrics.md)."""

    comparable: Annotated[bool, Doc("Derived as cellbench derives it: reports and the suspicious check may compare it "
                                    "with a measured result.")]
    note: Annotated[str, Doc("How the other tool derived it; for one that is not comparable, why (one line).",
                             minLength=1)]


class Imported(TypedDict):
    """Present only in a result converted from another benchmark's result file (`cellbench import`,
    bench.imports), never in a measured one: where it came from and how each metric was derived. Only its
    presence lets the fields an import cannot fill be absent (the `if`/`else` at the top level)."""

    tool: Annotated[str, Doc("The benchmark that measured it.", enum=['siliconbench'])]
    label: Annotated[str, Doc("Its name in reports, which show the result as `imported (<label>)`.", minLength=1)]
    file: Annotated[str, Doc("The original file's path, as it was read.", minLength=1)]
    sha256: Annotated[str, Doc("sha256 of the original file's bytes: a file is imported once.",
                               pattern='^[0-9a-f]{64}$')]
    timestamp: Annotated[str, Doc("The original file's own `timestamp`, verbatim (SiliconBench: the run's local start "
                                  "time, with no zone).", minLength=1)]
    imported_at: Annotated[str, Doc("When it was converted, UTC ISO 8601.", format="date-time")]
    source_machine: Annotated[dict[str, Any] | None, Doc("The machine block the original file recorded (SiliconBench: "
                                                         "host, chip, os), or null when it has none (files written "
                                                         "before 2026-08-16).")]
    methods: Annotated[dict[str, MetricMethod], Doc("Per metric (a level field, or `<block>.<stat>` of a stats block),"
                                                    " how the other tool derived it and whether that is cellbench's "
                                                    "definition: reports and the suspicious check compare only "
                                                    "comparable metrics.")]
    warnings: Annotated[list[str], Doc("The original file's own warnings and notes (SiliconBench's sanity_warnings, "
                                       "per level; its config_note).")]


class Unfinished(TypedDict):
    """Present only while the cell runs: the result is rewritten after every level with this block, and the
    cell's last write has none. A file that still has it once its writer (`pid` on `host`) is gone is a killed
    run's (bench.core.result.store.killed): its levels are what the cell finished, and its verdict is `capped`
    with a reason beginning `unfinished:`."""

    pid: Annotated[int, Doc("The pytest process writing the result.", minimum=1)]
    host: Annotated[str, Doc("The host name of its machine (socket.gethostname()).")]
    updated_at: Annotated[str, Doc("When this file was written, ISO 8601.", format="date-time")]
    levels_done: Annotated[int, Doc("Levels (with --rounds, level rounds) measured and in `levels` so far.", minimum=0)]


class Result(_ResultRequired, total=False):
    """One (framework, split) cell on one machine and model: `results/<model>/<machine>/<split>/<framework>_<run
    id>.json`. schema_version 1; bench.core.result.model holds the same shape as Python types. A measured result
    must have every field the `else` branch below adds; a result converted from another benchmark's file carries
    `imported` instead, and may lack what that tool never recorded."""

    harness: Annotated[Harness, Doc("The cellbench checkout that measured this cell; absent in files written before it"
                                    " was recorded.")]
    unfinished: Annotated[Unfinished, Doc("Present only while the cell runs: the result is rewritten after every level"
                                          " with this block, and the cell's last write has none. A file that still has"
                                          " it once its writer (`pid` on `host`) is gone is a killed run's "
                                          "(bench.core.result.store.killed): its levels are what the cell finished, "
                                          "and its verdict is `capped` with a reason beginning `unfinished:`.")]
    # measured results only
    servers: Annotated[list[Server], Doc("Every server the cell started (or the endpoint it used), in order.")]
    requests_file: Annotated[str, Doc("The per-request records beside this file (`<framework>_<run "
                                      "id>.requests.jsonl`), by name.")]
    fidelity: Annotated[Fidelity, Doc("--fidelity: the stack's greedy answers to a fixed set of the split's prompts, "
                                      "against its own second pass and the reference stack's "
                                      "(bench.core.lenses.fidelity).")]
    sweep: Annotated[Sweep, Doc("--request-rate sweep: the highest request rate whose level met every SLO, found by "
                                "doubling (or halving) from start_rps and then bisecting to the tolerance, at most "
                                "max_levels levels (bench.run.levels.sweep).")]
    concurrency_sweep: Annotated[ConcurrencySweepBlock, Doc("--concurrency sweep: the highest closed-loop concurrency "
                                                            "whose level met every SLO (bench.run.levels.sweep).")]
    # imported results only
    imported: Annotated[Imported, Doc("Present only in a result converted from another benchmark's result file "
                                      "(`cellbench import`, bench.imports), never in a measured one: where it came "
                                      "from and how each metric was derived. Only its presence lets the fields an "
                                      "import cannot fill be absent (the `if`/`else` at the top level).")]


constrain(Result, {
    "if": {"description": "An imported result.", "required": ["imported"]},
    "then": {"description": "It says so wherever annotations show: its verdict carries the `imported` annotation.",
             "properties": {"verdict": {"properties": {"annotations": {"contains": {"const": "imported"}}}}}},
    "else": {"description": "A measured result: everything a cell records is required, as in every result before "
                            "imports existed.",
             "required": ["servers", "requests_file"],
             "properties": {"machine": {"required": ["host", "os", "cpu", "chip", "gpus", "cores", "memory_gib"]},
                            "model": {"required": ["served"]},
                            "run_config": {"required": ["warmup", "levels_share_server", "request_timeout_s",
                                                        "request_extras", "prompts"]},
                            "levels": {"items": {"required": ["started_at", "chunk_divergence", "served_models",
                                                              "client", "warmup"]}}}},
    "dependentSchemas": {"unfinished": {
        "description": "An unfinished result's verdict is `capped`, its reason beginning `unfinished:`, so that "
                       "nothing reads it as a cell that ran to its end.",
        "properties": {"verdict": {"properties": {"verdict": {"const": "capped"},
                                                  "reason": {"pattern": "^unfinished:"}}}}}},
})


class IgnoredFile(TypedDict):
    file: str
    reason: str


@final  # no other keys: `"levels" in result` tells a Result from it
class NoResult(TypedDict):
    """What a cell that wrote no result file (skipped, failed before a server) carries: `{}`."""


