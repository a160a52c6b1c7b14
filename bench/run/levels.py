"""A cell's levels: the servers it starts, each level it measures, and when it must stop.

Levels run on a fresh server each, or all on one (--share-server, --endpoint). The cell stops
early, keeping everything measured so far, when a server fails to start, is killed for memory
or ends on its own, when the cell's budget is spent, or when the load generator's hang watchdog
ends a level (both `capped`). A port found held while starting is retried once.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import IO, Any, cast

from bench.core.metrics import summarize_level
from bench.core.records import ErrorType, RequestRecord
from bench.core.result import CellPaths
from bench.core.result_model import Level, ReportedVersion, Server
from bench.host.ports import free_port
from bench.host.resources import ResourceSampler
from bench.load import LevelConfig, LevelRun
from bench.load.procs import plan_level, run_level_procs
from bench.run.config import CellConfig, Launcher
from bench.run.probes import Endpoint, list_models, reported_version
from bench.run.server import ServerProcess, ServerStartError
from bench.setup.adapter import Adapter, ModelRef, ServeContext
from bench.setup.installs import UNKNOWN_VERSION, Installation
from bench.setup.prompts import PromptSet


class LevelsRun:
    """The mutable part of a cell: servers started, levels measured, what the server said."""

    def __init__(self, cfg: CellConfig, adapter: Adapter, install: Installation, model: ModelRef,
                 prompt_set: PromptSet, paths: CellPaths, launch: Launcher, platform_tag: str):
        self.cfg, self.adapter, self.install, self.model = cfg, adapter, install, model
        self.platform_tag = platform_tag
        self.prompt_set, self.paths, self.launch = prompt_set, paths, launch
        self.summaries: list[Level] = []
        self.servers: list[Server] = []
        self.listed: tuple[str, ...] | None = None
        self.response_models: set[str] = set()
        self.start_failure: str | None = None
        self.oom: dict | None = None
        self.capped: str | None = None
        self.retried: str | None = None
        self.server_exit: str | None = None  # the server ended without being asked: where and when
        self.last_level: int | None = None
        self.reported_version: ReportedVersion | None = None
        budget_from = cfg.budget_from if cfg.budget_from is not None else time.perf_counter()
        self.deadline = None if cfg.budget_s is None else budget_from + cfg.budget_s
        self.extra_body = self._extra_body()
        self.shared = cfg.share_server or cfg.endpoint is not None  # an endpoint is one server throughout

    def _extra_body(self) -> dict[str, Any]:
        body = dict(self.cfg.profile.sampling)
        body.update(self.adapter.request_extras())
        wanted = self.cfg.ignore_eos or self.cfg.profile.ignore_eos
        if wanted and self.adapter.capabilities.ignore_eos:
            body["ignore_eos"] = True
        return body

    def execute(self) -> None:
        groups: Sequence[tuple[int, ...]] = [self.cfg.levels] if self.shared else [(c,) for c in self.cfg.levels]
        self.paths.requests.parent.mkdir(parents=True, exist_ok=True)
        with self.paths.requests.open("w") as sidecar:
            for group in groups:
                if not self._run_group(group, sidecar):
                    break

    def _run_group(self, levels: tuple[int, ...], sidecar: IO[str]) -> bool:
        """One server for `levels`; False when the cell must stop (start failure, OOM, capped)."""
        server_info: Server = {"levels": list(levels)}
        self.servers.append(server_info)
        try:
            server = self._start_once_more_if_transient(levels, server_info)
        except ServerStartError as exc:
            if exc.capped:
                self.capped = str(exc)
            else:
                self.start_failure = str(exc)
            self.oom = exc.oom
            server_info["start_error"] = str(exc)
            if exc.oom:
                server_info["oom"] = exc.oom
            return False
        server_info["ready_after_s"] = server.ready_after_s
        pid = server.proc.pid if isinstance(server, ServerProcess) and server.proc else None
        label = "shared" if len(levels) > 1 else f"c{levels[0]}"
        # An endpoint's process is not ours to watch: nothing is sampled for it.
        sampler = ResourceSampler(pid, self.paths.split_dir / f"{self.paths.stem}.{label}.resources.jsonl",
                                  cgroup=getattr(server, "cgroup", None),
                                  on_tree=getattr(server, "note_tree", None)) if pid else None
        try:
            with sampler or contextlib.nullcontext():
                listed = list_models(server.base_url)
                if listed is not None:
                    self.listed = listed
                if self.install.version == UNKNOWN_VERSION:
                    server_info["reported_version"] = self.reported_version = reported_version(server.base_url)
                for concurrency in levels:
                    if not self._run_level(server, concurrency, sidecar):
                        break
        finally:
            exit_info = server.stop()
            ended_alone = exit_info.returncode is not None and not exit_info.stopped_by_us
            if ended_alone and self.server_exit is None:  # between or after levels
                self.server_exit = f"{server.exit_reason()} after c={self.last_level}"
            server_info["exit"] = cast(Any, exit_info.to_json())
            if isinstance(server, ServerProcess):
                server_info["overhead"] = cast(Any, server.overhead())
            if sampler is not None:  # the file name, not the path: results stay valid when moved or committed
                server_info["resources"] = cast(Any, {**sampler.summary(), "path": sampler.path.name})
            self.oom = self.oom or exit_info.oom
        return self.oom is None and self.capped is None and self.server_exit is None

    def _start_once_more_if_transient(self, levels: tuple[int, ...], server_info: Server) -> ServerProcess | Endpoint:
        """A port found held when the server starts is retried once, 2 s later: on a fresh port
        when the port is ours to choose (`--port 0`), else on the same one (a holder that was
        just exiting). The first failure stays on record. A server that started is never
        retried, whatever happened to it later."""
        try:
            return self._start(levels, server_info)
        except ServerStartError as exc:
            if not exc.transient or exc.oom or self.cfg.endpoint is not None:
                raise
            self.retried = server_info["retried_after"] = str(exc)
            time.sleep(2.0)
            return self._start(levels, server_info)

    def _start(self, levels: tuple[int, ...], server_info: Server) -> ServerProcess | Endpoint:
        if self.cfg.endpoint is not None:
            server_info["external"] = self.cfg.endpoint
            return Endpoint(self.cfg.endpoint, self.adapter.ready_path, self._ready_timeout(), self._budget_left())
        label = "shared" if len(levels) > 1 else f"c{levels[0]}"
        port = self._port()
        ctx = ServeContext(self.install, self.model, self.cfg.host, port, self.cfg.split, max(levels),
                           self.platform_tag)
        command = replace(self.adapter.serve(ctx), cpus=self.cfg.cpus.server)
        log_path = self.paths.server_log(label)
        server_info["port"] = port
        server_info["command"] = cast(Any, command.to_json())
        server_info["log"] = str(log_path)
        return self.launch(command, replace(self.adapter, startup_timeout_s=self._ready_timeout()), self.cfg.host,
                           port, log_path, memory_limit_bytes=self.cfg.memory_limit_bytes,
                           budget_s=self._budget_left(), stall_timeout_s=self.cfg.stall_timeout_s)

    def _budget_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.perf_counter())

    def _ready_timeout(self) -> float:
        return self.cfg.ready_timeout_s if self.cfg.ready_timeout_s is not None else self.adapter.startup_timeout_s

    def _port(self) -> int:
        if self.cfg.port == 0:
            return free_port(self.cfg.host)
        return self.cfg.port or self.adapter.default_port

    def _run_level(self, server: ServerProcess | Endpoint, concurrency: int, sidecar: IO[str]) -> bool:
        """Measure one level; False when the cell must end: cut short (budget, hang: capped) or
        the server gone (failed)."""
        if (gone := server.exit_reason()) is not None:  # a shared server that died between levels
            self.server_exit = f"{gone} before c={concurrency}"
            return False
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.capped = f"cell budget of {self.cfg.budget_s:g} s spent before c={concurrency}"
            return False
        self.last_level = concurrency
        level_cfg = LevelConfig(
            base_url=server.base_url,
            model=self.model.served_id,
            concurrency=concurrency,
            requests=self.cfg.requests,
            warmup=self.cfg.warmup,
            request_timeout_s=self.cfg.request_timeout_s,
            extra_body=self.extra_body,
            progress=partial(self.cfg.progress, concurrency) if self.cfg.progress else None,
            deadline=self.deadline,
            stall_timeout_s=self.cfg.stall_timeout_s,
            server_gone=server.exit_reason,
            client_cpus=self.cfg.cpus.client,
            nonce=f"{self.cfg.run_id} c{concurrency} {secrets.token_hex(2)}" if self.cfg.unique_prompts else None,
            server_warmed=_warmed_by(self.shared, len(self.summaries), self.cfg.endpoint),
            keep_alive=self.cfg.keep_alive,
        )
        procs = plan_level(self.cfg.client_procs, concurrency, self.cfg.requests,
                           self.summaries[-1] if self.summaries else None)  # auto plans from the level before
        pid = server.proc.pid if isinstance(server, ServerProcess) and server.proc else None
        try:
            run = run_level_procs(level_cfg, self.prompt_set.prompts, self.prompt_set.warmup, procs, server_pid=pid)
        except KeyboardInterrupt as exc:  # keep what the level finished, then let the interrupt end the cell
            if getattr(exc, "level_run", None) is not None:
                self._keep(exc.level_run, sidecar)  # type: ignore[attr-defined]  # set by the load generator
            raise
        self._keep(run, sidecar)
        if (gone := self._gone_during(server, run)) is not None:
            self.server_exit = gone
            return False
        if run.stop_reason is None:
            return True
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.capped = f"cell budget of {self.cfg.budget_s:g} s reached at c={concurrency}: {run.stop_reason}"
        else:
            self.capped = f"{run.stop_reason} at c={concurrency}"
        return False

    def where(self) -> str:
        """Where the cell stands: "during c=8 after 41 of 100 requests" (ok ones), or "before c=1"."""
        if self.last_level is None:
            return f"before c={self.cfg.levels[0]}"
        last = self.summaries[-1] if self.summaries and self.summaries[-1]["concurrency"] == self.last_level else None
        return f"during c={self.last_level} after {last['successful'] if last else 0} of {self.cfg.requests} requests"

    def _keep(self, run: LevelRun, sidecar: IO[str]) -> None:
        """A level's summary into the result (one stopped in warm-up keeps its warm-up evidence) and
        its requests into the sidecar."""
        summary = cast(Level, summarize_level(run))
        if run.records or run.warmup_records:
            self.summaries.append(summary)
        self.response_models.update(summary["served_models"])
        for record in [*run.warmup_records, *run.records]:
            sidecar.write(json.dumps({"concurrency": run.config.concurrency, **record.to_json()}) + "\n")

    def _gone_during(self, server: ServerProcess | Endpoint, run: LevelRun) -> str | None:
        """Why the server could no longer answer by the end of this level, with where it happened:
        our process exited, or an endpoint whose requests failed to connect stopped answering."""
        c, done, asked = run.config.concurrency, sum(r.ok for r in run.records), run.config.requests
        where = f"during c={c} after {done} of {asked} requests" if run.records or not run.warmup_records \
            else f"during warm-up at c={c} after 0 of {asked} requests"
        if (gone := server.exit_reason()) is not None:
            return f"{gone} {where}"
        if isinstance(server, Endpoint) and any(_lost_connection(r) for r in [*run.warmup_records, *run.records]):
            if (why := server.probe()) is not None:
                return f"endpoint stopped answering {where}: {why}"
        return None


def _lost_connection(record: RequestRecord) -> bool:
    return record.error is not None and record.error.type in (ErrorType.CONNECT, ErrorType.TRUNCATED)


def _warmed_by(shared: bool, earlier_levels: int, endpoint: str | None) -> str | None:
    """Who may have filled the server's caches before a level: an earlier level on a shared
    server, or whoever used an --endpoint server before this cell; None for a fresh server."""
    if shared and earlier_levels:
        return "an earlier level"
    if endpoint is not None:
        return "unknown: an --endpoint server's history"
    return None
