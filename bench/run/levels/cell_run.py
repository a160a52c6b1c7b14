
from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import Any

from bench.core import figures
from bench.core.figures.declare import Prices
from bench.core.level_run import LevelInterrupted, level_label, sidecar_key
from bench.core.metrics import summarize_level
from bench.core.metrics.audits import NOT_SENT
from bench.core.open_loop import goodput
from bench.core.records import ErrorType, RequestRecord
from bench.core.result.files import CellPaths
from bench.core.result.model import Level, ReportedVersion, Server
from bench.core.result.server import ServerPurpose
from bench.core.rounds import combined_levels
from bench.host.ports import free_port
from bench.host.power import idle_power
from bench.load import LevelConfig, LevelRun, OpenLoop
from bench.load.procs import plan_level, run_level_procs
from bench.run.audits import cache as cache_audit
from bench.run.audits import fidelity
from bench.run.config import CellConfig, Launcher
from bench.run.levels.plan import LevelPlan, Step, point_json, point_text, step_text
from bench.run.levels.sweep import RateSweep
from bench.run.scrape.watch import ServerWatch
from bench.run.server.exits import ServerStartError
from bench.run.server.probes import Endpoint, list_models, reported_version
from bench.run.server.process import ServerProcess
from bench.run.writes.names import file_label
from bench.run.writes.sidecar import RequestLog
from bench.setup.adapter import Adapter, ModelRef, ServeContext
from bench.setup.installs.cache import UNKNOWN_VERSION, Installation
from bench.setup.prompts import PromptSet


class CellRun:
    """The mutable part of a cell: servers started, levels measured, what the server said."""

    def __init__(self, cfg: CellConfig, adapter: Adapter, install: Installation, model: ModelRef,
                 prompt_set: PromptSet, paths: CellPaths, launch: Launcher, platform_tag: str):
        self.cfg, self.adapter, self.install, self.model = cfg, adapter, install, model
        self.platform_tag = platform_tag
        self.prompt_set, self.paths, self.launch = prompt_set, paths, launch
        self.summaries: list[Level] = []
        self.watch = ServerWatch(None, None)  # the current server's
        self.servers: list[Server] = []
        self.listed: tuple[str, ...] | None = None
        self.response_models: set[str] = set()
        self.start_failure: str | None = None
        self.oom: dict | None = None
        self.capped: str | None = None
        self.retried: str | None = None
        self.server_exit: str | None = None  # the server ended without being asked: where and when
        self.last_level: Step | None = None
        self.reported_version: ReportedVersion | None = None
        self.on_level: Callable[[], None] | None = None  # after each level's records are on disk (bench.run.cell)
        self.fidelity = fidelity.FidelityRun()  # --fidelity's reference, block and first pass
        budget_from = cfg.budget_from if cfg.budget_from is not None else time.perf_counter()
        self.deadline = None if cfg.cell_budget_s is None else budget_from + cfg.cell_budget_s
        self.extra_body = self._extra_body()
        self.shared = cfg.server.share_server or cfg.server.endpoint is not None  # an endpoint: one server throughout
        self.plan = LevelPlan(cfg, prompt_set.prompts)

    def _extra_body(self) -> dict[str, Any]:
        body = dict(self.cfg.profile.sampling)
        body.update(self.adapter.request_extras())
        accepts = self.adapter.capabilities.ignore_eos
        # --ignore-eos is the user's word about a server of unknown make (the generic adapter, started
        # or --endpoint), so it goes there too; a profile's `ignore_eos` only where it is known to work.
        if (self.cfg.client.ignore_eos and (accepts or self.adapter.takes_endpoint)) or (self.cfg.profile.ignore_eos
                                                                                        and accepts):
            body["ignore_eos"] = True
        return body

    def _not_sent(self) -> str:
        """Why the requests go without ignore_eos, as the output length audit says it."""
        if not (self.cfg.client.ignore_eos or self.cfg.profile.ignore_eos):
            return NOT_SENT
        return (f"ignore_eos not sent: the {self.adapter.name} adapter does not declare that its server honours it, "
                "so each request ends where the model stops and output lengths differ by design")

    def levels(self) -> list[Level]:
        """The result's levels: each level's rounds combined (bench.core.rounds), or with
        one round the summaries as measured; then the figures derived from them (a cost at the prices)."""
        levels = combined_levels(self.summaries, asked=self.plan.rounds)
        prices = Prices(self.cfg.reporting.price_kwh, self.cfg.reporting.price_hour)
        for level in levels:
            figures.attach(level, figures.derived(level, prices))
        return levels

    def execute(self) -> None:
        steps: Iterable[Step] = self.plan.todo()
        groups: Iterable[Iterable[Step]] = [steps] if self.shared else ([step] for step in steps)
        with RequestLog(self.paths.requests) as sidecar:
            # each group on a server of its own, until one stops the cell (all() stops at the first False)
            if all(self._run_group(group, sidecar) for group in groups) and fidelity.needs_own_server(self):
                self._run_group([], sidecar, purpose="fidelity")

    def finished_search(self, *, final: bool = True) -> RateSweep | None:
        """The sweep (bench.run.levels.sweep), None without one; `final`: stopped, saying why, where the
        cell stopped it (not final: as it stands between two levels, the search left running)."""
        search = self.plan.search
        if search is not None and final and search.stopped in ("not started", "running"):  # the cell stopped it
            search.stop(self.capped or self.server_exit or self.start_failure or "it ended")
        return search

    def _run_group(self, points: Iterable[Step], sidecar: RequestLog, purpose: ServerPurpose | None = None) -> bool:
        """One server for `points` (a list of (level, round), or a sweep's rates as they come), or for
        `purpose` alone; False when the cell must stop (start failure, OOM, capped)."""
        known = points if isinstance(points, list) else []
        server_info: Server = {"levels": [point_json(p) for p, _ in known]}
        if purpose:
            server_info["purpose"] = purpose
        self.servers.append(server_info)
        label = purpose or ("shared" if not isinstance(points, list) else file_label(known, self.plan.rounds))
        try:
            server = self._start_once_more_if_transient(label, server_info)
        except ServerStartError as exc:
            server_info["start_error"] = str(exc)
            if exc.oom:
                server_info["oom"] = exc.oom
            if purpose:  # the levels are measured and their verdict stands; this entry says why there is no run
                return False
            if exc.capped:
                self.capped = str(exc)
            else:
                self.start_failure = str(exc)
            self.oom = exc.oom
            return False
        server_info["ready_after_s"] = server.ready_after_s
        pid = server.proc.pid if isinstance(server, ServerProcess) and server.proc else None
        self.watch = ServerWatch.start(pid, self.paths.split_dir / f"{self.paths.stem}.{label}", server,
                                       self.adapter.server_metrics, self.cfg.server.server_metrics_s,
                                       self.cfg.server.api_key, server_info.get("idle_power"), self.adapter.reservation)
        try:
            with self.watch:
                listed = list_models(server.base_url, self.cfg.server.api_key)
                if listed is not None:
                    self.listed = listed
                if self.install.version == UNKNOWN_VERSION:
                    server_info["reported_version"] = self.reported_version = reported_version(
                        server.base_url, self.cfg.server.api_key)
                for step in points:
                    if not known:  # a sweep's level, chosen as the previous one ended
                        server_info["levels"].append(point_json(step[0]))
                    if not self._run_level(server, step, sidecar):
                        break
                if purpose is None:
                    cache_audit.after_group(self, server, self.model.served_id, self.prompt_set.prompts,
                                            last_point=self.last_level, sweep=self.plan.search is not None)
                fidelity.after_group(self, server, self.model.served_id, last_point=self.last_level,
                                     own_server=purpose == "fidelity")
        finally:
            exit_info = server.stop()
            ended_alone = exit_info.returncode is not None and not exit_info.stopped_by_us
            if ended_alone and self.server_exit is None:  # between or after levels
                self.server_exit = f"{server.exit_reason()} after {self._last_text()}"
            server_info["exit"] = exit_info.to_json()
            if isinstance(server, ServerProcess):
                server_info["overhead"] = server.overhead()
            self.watch.finish(server_info)
            self.oom = self.oom or exit_info.oom
        return self.oom is None and self.capped is None and self.server_exit is None

    def _start_once_more_if_transient(self, label: str, server_info: Server) -> ServerProcess | Endpoint:
        """A transient start failure is retried once, 2 s later: a port found held, or a server
        that exited after its port dropped the readiness polls and before any HTTP answer
        (`ServerStartError.transient`, bench.run.server). The retry is on a fresh port when the
        port is ours to choose (`--port 0`), else on the same one (a holder that was just exiting).
        The first failure stays on record (`retried_after`; its output is in the same server
        log, before the retry's). An OOM is never retried, nor a server that became ready,
        whatever happened to it later."""
        try:
            return self._start(label, server_info)
        except ServerStartError as exc:
            if not exc.transient or exc.oom or self.cfg.server.endpoint is not None:
                raise
            self.retried = server_info["retried_after"] = str(exc)
            time.sleep(2.0)
            return self._start(label, server_info)

    def _start(self, label: str, server_info: Server) -> ServerProcess | Endpoint:
        srv = self.cfg.server
        if srv.endpoint is not None:
            server_info["external"] = srv.endpoint
            return Endpoint(srv.endpoint, self.adapter.ready_path, self._ready_timeout(), self._budget_left(),
                            api_key=srv.api_key)
        port = self._port()
        key = srv.api_key
        ctx = ServeContext(self.install, self.model, srv.host, port, self.cfg.split, self.plan.sized_for(),
                           self.platform_tag, api_key=key.value if key else None)
        command = replace(self.adapter.command(ctx, metrics=srv.server_metrics_s is not None),
                          cpus=self.cfg.client.cpus.server, secrets=(key.value,) if key else ())
        log_path = self.paths.server_log(label)
        if idle := idle_power():  # before the server starts: nothing of ours is running yet
            server_info["idle_power"] = idle
        server_info["port"] = port
        server_info["command"] = command.to_json()
        server_info["log"] = str(log_path)
        return self.launch(command, replace(self.adapter, startup_timeout_s=self._ready_timeout()), srv.host,
                           port, log_path, memory_limit_bytes=srv.memory_limit_bytes,
                           budget_s=self._budget_left(), hang_s=self.cfg.hang_s, api_key=key)

    def _budget_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.perf_counter())

    def _ready_timeout(self) -> float:
        ready = self.cfg.server.ready_timeout_s
        return ready if ready is not None else self.adapter.startup_timeout_s

    def _port(self) -> int:
        if self.cfg.server.port == 0:
            return free_port(self.cfg.server.host)
        return self.cfg.server.port or self.adapter.default_port

    def _run_level(self, server: ServerProcess | Endpoint, step: Step, sidecar: RequestLog) -> bool:
        """Measure one level's round; False when the cell must end: cut short (budget, hang:
        capped) or the server gone (failed)."""
        point, k = step
        at = step_text(step, self.plan.rounds)
        if (gone := server.exit_reason()) is not None:  # a shared server that died between levels
            self.server_exit = f"{gone} before {at}"
            return False
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.capped = f"cell budget of {self.cfg.cell_budget_s:g} s spent before {at}"
            return False
        self.last_level = step
        open_loop = point if isinstance(point, OpenLoop) else None
        concurrency = point if isinstance(point, int) else 0
        level_cfg = LevelConfig(
            base_url=server.base_url,
            model=self.model.served_id,
            concurrency=concurrency,
            open_loop=open_loop,
            requests=self.plan.requests(point),
            warmup=self.cfg.load.warmup,
            client=self.cfg.client,
            extra_body=self.extra_body,
            progress=partial(self.cfg.progress, concurrency or at) if self.cfg.progress else None,
            deadline=self.deadline,
            hang_s=self.cfg.hang_s,
            server_gone=server.exit_reason,
            client_cpus=self.cfg.client.cpus.client,
            nonce=f"{self.cfg.run_id} {file_label([step], self.plan.rounds)} {secrets.token_hex(2)}"
            if self.cfg.client.unique_prompts else None,
            server_warmed=_warmed_by(self.shared, len(self.summaries), self.cfg.server.endpoint),
            headers=self.cfg.server.api_key.headers if self.cfg.server.api_key else {},
            duration_s=self.cfg.load.plan.duration_s if self.cfg.load.plan else None,
            sessions=self.plan.sessions,
        )
        procs = plan_level(self.cfg.client.client_procs, concurrency, level_cfg.requests,
                           self.summaries[-1] if self.summaries else None)  # auto plans from the level before
        pid = server.proc.pid if isinstance(server, ServerProcess) and server.proc else None
        try:
            with self.watch.level():
                run = run_level_procs(level_cfg, self.prompt_set.prompts, self.prompt_set.warmup, procs, server_pid=pid)
        except LevelInterrupted as exc:  # keep what the level finished, then let the interrupt end the cell
            self._keep(exc.level_run, sidecar, k)
            raise
        self._keep(run, sidecar, k)
        if self.on_level is not None:  # the result, rewritten with this level (bench.run.cell)
            self.on_level()
        if self.plan.search is not None:  # a sweep's level: the search's next step from its outcome
            judged = self.summaries[-1].get("goodput") if run.records else None
            met = bool(judged and judged["slo_met"])
            self.plan.search.record(open_loop.rate if open_loop else concurrency, met, judged and judged["goodput_rps"],
                                    judged.get("slo_decision") if judged else None)
        if (gone := self._gone_during(server, run)) is not None:
            self.server_exit = gone
            return False
        if run.stop_reason is None or run.over_saturated is not None:  # over-saturated: marked, on to the next
            return True
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.capped = f"cell budget of {self.cfg.cell_budget_s:g} s reached at {at}: {run.stop_reason}"
        else:
            self.capped = f"{run.stop_reason} at {at}"
        return False

    def _last_text(self) -> str:
        return step_text(self.last_level, self.plan.rounds) if self.last_level is not None else "no level"

    def where(self) -> str:
        """Where the cell stands: "during c=8 after 41 of 100 requests" (ok ones), or "before c=1"."""
        if self.last_level is None:
            first = next(iter(self.plan.steps()), None) if self.plan.search is None else None
            return f"before {step_text(first, self.plan.rounds) if first is not None else 'the first level'}"
        at = self._last_text()
        last = self.summaries[-1] if self.summaries and _same(self.summaries[-1], self.last_level) else None
        asked = self.plan.requests(self.last_level[0])
        return f"during {at} after {last['successful'] if last else 0} of {asked} requests"

    def _keep(self, run: LevelRun, sidecar: RequestLog, k: int) -> None:
        """A level's summary (with its goodput under --slo) into the result (one stopped in warm-up
        keeps its warm-up evidence) and its requests into the sidecar, each line keyed by its level
        (and with rounds by its `round`, as the summary is)."""
        summary = summarize_level(run, not_sent=self._not_sent())
        if self.cfg.load.plan is not None and self.cfg.load.plan.slos:
            summary["goodput"] = goodput(run, self.cfg.load.plan.slos)
        if self.plan.rounds > 1:
            summary["round"] = k
        if run.records or run.warmup_records:
            self.summaries.append(summary)
        self.watch.keep(summary, run)
        self.response_models.update(summary["served_models"])
        key = sidecar_key(run.config)
        if self.plan.rounds > 1:
            key["round"] = k
        sidecar.write_level(key, [*run.warmup_records, *run.records])

    def _gone_during(self, server: ServerProcess | Endpoint, run: LevelRun) -> str | None:
        """Why the server could no longer answer by the end of this level, with where it happened:
        our process exited, or an endpoint whose requests failed to connect stopped answering."""
        c, done, asked = run.config.label, sum(r.ok for r in run.records), run.config.requests
        where = f"during {c} after {done} of {asked} requests" if run.records or not run.warmup_records \
            else f"during warm-up at {c} after 0 of {asked} requests"
        if (gone := server.exit_reason()) is not None:
            return f"{gone} {where}"
        if isinstance(server, Endpoint) and any(_lost_connection(r) for r in [*run.warmup_records, *run.records]):
            if (why := server.probe()) is not None:
                return f"endpoint stopped answering {where}: {why}"
        return None


def _same(summary: Level, step: Step) -> bool:
    """Whether `summary` is the one measured at `step` (its level, and its round when it has one)."""
    return level_label(summary) == point_text(step[0]) and summary.get("round", step[1]) == step[1]


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
