"""`ClientSettings`: how the client sends a cell's requests, one record for the whole session.

The pytest options --request-timeout, --keep-alive, --client-cpus and --server-cpus, --client-procs,
--unique-prompts, --ignore-eos, --tools-param and --prompts are parsed into it once
(bench.plugins.opts); a cell holds it as it is (`bench.run.config.CellConfig.client`) and hands it,
unchanged, to each of its levels (`bench.core.level_run.LevelConfig.client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.base.defaults import DEFAULT_REQUEST_TIMEOUT_S
from bench.host.cpus.placement import Placement


@dataclass(frozen=True)
class ProcsChoice:
    """--client-procs as this host resolves it (bench.load.procs.resolve)."""

    count: int | None = 1  # a fixed number of processes; None: auto
    free_cpus: int = 1  # auto's ceiling: CPUs free for the client
    cpus: tuple[int, ...] | None = None  # the client's CPUs when pinned: one worker per CPU
    why: str = ""  # where free_cpus comes from, for the result

    @property
    def auto(self) -> bool:
        return self.count is None


@dataclass(frozen=True, kw_only=True)
class ClientSettings:
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S  # --request-timeout: one request's whole life
    # --keep-alive: reuse a connection whose response was complete for the next request; False
    # (the default): one connection per request, closed at its end (bench.load.http.connector).
    keep_alive: bool = False
    # --client-cpus and --server-cpus, resolved together for this host: the server's CPUs are the
    # ones the client's leave (bench.host.cpus.placement.resolve)
    cpus: Placement = Placement()
    client_procs: ProcsChoice = ProcsChoice()  # --client-procs: a count, or auto with the CPUs free for it
    unique_prompts: bool = False  # --unique-prompts: a nonce opens every request's first message
    ignore_eos: bool = False  # --ignore-eos: sent where the framework accepts it
    tools_param: bool = False  # --tools-param: agent tools in the request's `tools` parameter
    # --prompts: split -> its prompt file; a split it leaves out keeps its shipped file
    prompts: Mapping[str, Path] = field(default_factory=dict)
