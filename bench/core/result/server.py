"""The servers of a cell as its result records them, declared: each started server (its command,
how it ended, what it used, the suite's seconds around it) or the --endpoint it ran against,
each field with its description, from which the schema's `server` entry is generated."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from bench.base.doc import Doc, constrain
from bench.host.power import IdlePower
from bench.host.resources import ServerResources as ServerResources

LevelName = Annotated[int, Doc(minimum=1)] | Annotated[str, Doc(minLength=1)]
"""A level as a run names it: a concurrency, or an open-loop level's label ("4 req/s")."""


class _ServerCommandRequired(TypedDict):
    argv: Annotated[list[str], Doc("The command line.", minItems=1)]
    env: Annotated[dict[str, str], Doc("Environment variables set for it, beyond the inherited ones.")]


class ServerCommand(_ServerCommandRequired, total=False):
    """How it was started."""

    cwd: Annotated[str | None, Doc("Its working directory; null: the session's.")]
    cpus: Annotated[list[Annotated[int, Doc(minimum=0)]],
                    Doc("The CPU affinity the server started with (--server-cpus); absent when not pinned.")]


class _ServerExitRequired(TypedDict):
    returncode: Annotated[int | None, Doc("Its exit status; null when it was still running when we stopped it.")]
    signal: Annotated[str | None, Doc("The signal that ended it (SIGTERM, SIGKILL...), if any.")]
    stopped_by_us: Annotated[bool, Doc("The cell stopped it; false: it ended on its own.")]


class ServerExit(_ServerExitRequired, total=False):
    """How the server ended."""

    oom: Annotated[dict[str, Any], Doc("Evidence that the server (or a process of its tree) was killed for memory "
                                       "(bench.host.memory.oom); `source` names where it was found. Present only with "
                                       "evidence.", required=["source"])]
    oom_check_error: Annotated[str, Doc("OOM detection failed or could not decide: '<type>: <message>'. Recorded "
                                        "beside the exit; never an OOM verdict.")]
    memory: Annotated[dict[str, Any], Doc("The memory cgroup it ran in under --memory-limit "
                                          "(bench.host.memory.memlimit): limit, peak, OOM kills.")]


class ReportedVersion(TypedDict):
    """The endpoint that answered and its answer."""

    path: Annotated[str, Doc("The path asked: /version, /api/version or /props.")]
    version: Annotated[str, Doc("The version it gave.")]


class ServerOverhead(TypedDict, total=False):
    spawn_s: Annotated[float, Doc("From the start call to the server's exec.", minimum=0)]
    ready_detect_bound_s: Annotated[float, Doc("Upper bound of the lag between readiness and its detection.",
                                               minimum=0)]
    teardown_s: Annotated[float, Doc("From the stop call to the whole group gone.", minimum=0)]


ServerPurpose = Literal["fidelity"]  # why a server ran no level


class Reserved(TypedDict):
    """Memory the framework stated it set aside as it started (its adapter's Reservation)."""

    what: Annotated[str, Doc("What it set aside, as its adapter names it: \"KV cache\".")]
    bytes: Annotated[int, Doc("The bytes stated, summed over its processes (each one's last statement).", minimum=0)]
    said: Annotated[str, Doc("The log lines that stated it.")]


class _ServerRequired(TypedDict):
    levels: Annotated[list[LevelName], Doc("The levels run on it: concurrency levels, or open-loop levels' labels (\"4 "
                                           "req/s\"); none for a server of the fidelity run's own.")]


class Server(_ServerRequired, total=False):
    """One server of the cell (one per level, or one for all with --share-server), or the --endpoint it ran
    against. A started server has port, command and log; an endpoint has external."""

    purpose: Annotated[ServerPurpose, Doc(
        "A server that ran no level: `fidelity`, the fidelity run on a server of its own, started after the levels "
        "for a framework whose server keeps its first request's sampling (bench.run.audits.fidelity).")]
    port: Annotated[int, Doc("The port it was started on.")]
    command: Annotated[ServerCommand, Doc("How it was started.")]
    log: Annotated[str, Doc("Path of its output log (stdout and stderr) as written; the file sits under the split "
                            "directory's logs/.")]
    external: Annotated[str, Doc("--endpoint: the base URL of a server the cell did not start.", pattern='^https?://')]
    retried_after: Annotated[str, Doc("The start failure (a port held while starting) after which it was started once "
                                      "more.")]
    start_error: Annotated[str, Doc("Why it never became ready; the cell then ended failed, capped or oom.")]
    oom: Annotated[dict[str, Any], Doc("Evidence that the server (or a process of its tree) was killed for memory "
                                       "(bench.host.memory.oom); `source` names where it was found. Present only with "
                                       "evidence.", required=["source"])]
    ready_after_s: Annotated[float | None, Doc("Seconds from start until its ready path answered 200.")]
    reported_version: Annotated[ReportedVersion | None, Doc("What the running server said its version is (asked only "
                                                            "when the install did not know it); null when no usual "
                                                            "endpoint answered.")]
    exit: Annotated[ServerExit, Doc("How the server ended.")]
    reserved: Annotated[Reserved, Doc("The memory the framework stated in its log that it set aside as it started (a "
                                      "KV cache pool), read once it was ready; absent where it states none. Each "
                                      "level's memory block repeats it beside the peak (memory.reserved_bytes).")]
    resources: Annotated[ServerResources, Doc("Its process tree's resource use, sampled while it ran "
                                              "(bench.host.resources).")]
    idle_power: Annotated[list[IdlePower], Doc("The machine's power read for a few seconds before it started, one "
                                               "entry per power source (bench.host.power.idle_power); each level's "
                                               "energy above idle is over it. Absent where the machine has no power "
                                               "source, or for an --endpoint.")]
    overhead: Annotated[ServerOverhead, Doc("The suite's own seconds around this server, not the framework's: "
                                              "spawn_s (port check, cgroup, files, exec), ready_detect_bound_s "
                                              "(readiness was noticed at most this long after it happened: the span "
                                              "between the last poll that found the server not ready and the one that "
                                              "did), teardown_s (SIGTERM to the whole process group gone, the OOM "
                                              "check included). Absent for an --endpoint and in files of an earlier "
                                              "cellbench.")]


constrain(Server, {"oneOf": [{"required": ["port", "command", "log"]}, {"required": ["external"]}]})
