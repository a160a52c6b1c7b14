"""One cell, end to end: (framework, split) on this machine and model -> a result file and a verdict.

profile -> adapter -> server -> load generator -> metrics -> verdict -> result file. The cell
never raises for a framework's misbehaviour: everything it met becomes evidence in the result.
Servers are started through a `Launcher`, so the pytest fixture that owns their cleanup stays
the only place that can leak or reap them. With `endpoint` set the cell starts nothing: it runs
its levels against that already-running server (adapters with a `bind` hook only).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from datetime import datetime, timezone
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import httpx

import adapters
from bench.setup import profiles
from bench.host.affinity import Placement
from bench.setup.adapter import Adapter, NotConfigured, ServeCommand, ServeContext, this_platform
from bench.reports.comparison import LoadedResult, load_results, select_latest, suspicious
from bench.setup.installs import UNKNOWN_VERSION, Installation, InstallError, NotInstalled, ensure_installed
from bench.load.loadgen import LevelConfig, Progress, run_level
from bench.host.machine import detect
from bench.core.metrics import summarize_level
from bench.setup.prompts import PromptSet, load_prompts, load_split
from bench.core.records import ErrorType
from bench.host.resources import ResourceSampler
from bench.core.result import SCHEMA_VERSION, CellPaths, cell_paths, now_iso, write_json_atomic
from bench.run.server import ExitInfo, ServerProcess, ServerStartError, free_port
from bench.core.verdicts import CellVerdict, Evidence, Identity, Verdict, classify

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
    ignore_eos: bool = False
    tools_param: bool = False
    prompts_path: Path | None = None
    degraded_fraction: float = 0.2
    endpoint: str | None = None  # an already-running server (base URL): no lifecycle
    # called with (concurrency, bench.load.loadgen.Progress) about once a second while a level runs
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
    unique_prompts: bool = False  # a nonce opens every request's first message: nothing to cache


@dataclass
class CellOutcome:
    verdict: CellVerdict
    result_path: Path | None
    result: dict = field(default_factory=dict)


def run_cell(cfg: CellConfig, launch: Launcher) -> CellOutcome:
    adapter = adapters.get(cfg.framework)
    machine = detect()
    paths = cell_paths(cfg.results_root, cfg.profile.results_name, machine.slug, cfg.split, cfg.framework, cfg.run_id)
    started_at, t0 = now_iso(), time.monotonic()

    platform_tag = adapter.platform_here()
    if platform_tag is None:
        why = f"{adapter.name} runs on {', '.join(sorted(adapter.platforms))}; this is {this_platform()}"
        if machine.gpu_probe_error and any(tag.endswith("+cuda") for tag in adapter.platforms):
            why += f", and whether it has a CUDA GPU is unknown: {machine.gpu_probe_error}"
        return _skipped(why)
    try:
        if adapter.bind is not None:  # defined by the profile or --endpoint, not by code
            bound = adapter.bind(cfg.profile, cfg.endpoint)
            adapter, install, model = bound.adapter, bound.install, bound.model
        else:
            install = ensure_installed(adapter.recipe_for(platform_tag), allow_install=cfg.install)
            model = adapter.model_for_server(profiles.resolve(cfg.profile, adapter.model_format))
    except NotInstalled as exc:
        return _skipped(f"{exc} (or pass --install)")
    except InstallError as exc:
        return CellOutcome(CellVerdict(Verdict.FAILED, str(exc)), None)
    except (profiles.ProfileUnavailable, NotConfigured) as exc:
        return _skipped(str(exc))
    existing = _existing_result(cfg, paths, machine.slug)
    if existing is not None:
        return _resumed(existing)
    prompt_set = _prompts(cfg)

    run = _LevelsRun(cfg, adapter, install, model, prompt_set, paths, launch, platform_tag)
    interrupted: KeyboardInterrupt | None = None
    try:
        run.execute()
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (bench.plugins.signals): keep what was measured, then stop
        interrupted = exc
        run.capped = f"interrupted ({str(exc) or type(exc).__name__}) {run.where()}"

    evidence = Evidence(
        levels=tuple(run.summaries),
        identity=Identity(model.served_id, run.listed, tuple(sorted(run.response_models))) if run.summaries else None,
        start_failure=run.start_failure,
        server_exit=run.server_exit,
        oom=run.oom,
        capped=run.capped,
    )
    verdict = classify(evidence, degraded_fraction=cfg.degraded_fraction)
    if run.retried:
        verdict = replace(verdict, annotations=(*verdict.annotations, "retried"))
    result: dict = {
        "schema_version": SCHEMA_VERSION,
        "run_id": cfg.run_id,
        "framework": {"name": adapter.name, "platform": platform_tag, **_version_block(install, run.reported_version)},
        "split": cfg.split,
        "model": {
            "profile": cfg.profile.name,
            "results_name": cfg.profile.results_name,
            "format": adapter.model_format,
            "path": str(model.path) if model.path else None,
            "requested": model.served_id,
            "served": {"listed": list(run.listed) if run.listed is not None else None,
                       "responses": sorted(run.response_models)},
        },
        "machine": machine.to_json(),
        "run_config": {
            "levels": list(cfg.levels),
            "requests_per_level": cfg.requests,
            "warmup": cfg.warmup,
            "levels_share_server": run.shared,
            "request_timeout_s": cfg.request_timeout_s,
            "request_extras": run.extra_body,
            "cpu_affinity": cfg.cpus.to_json(),
            "unique_prompts": cfg.unique_prompts,
            "prompts": {"source": str(prompt_set.source), "format": prompt_set.format,
                        "count": len(prompt_set.prompts), "tools_param": cfg.tools_param},
        },
        "servers": run.servers,
        "started_at": started_at,
        "finished_at": now_iso(),
        "duration_s": round(time.monotonic() - t0, 3),
        "levels": run.summaries,
        "verdict": verdict.to_json(),
        "requests_file": paths.requests.name,
    }
    flagged = _suspicious(paths, result)
    if flagged:  # an annotation: it never changes the verdict
        verdict = replace(verdict, annotations=(*verdict.annotations, "suspicious"))
        result["verdict"] = {**verdict.to_json(), "suspicious": flagged}
    write_json_atomic(paths.result, result)
    outcome = CellOutcome(verdict, paths.result, result)
    if interrupted is not None:
        interrupted.cell_outcome = outcome  # bench.plugins.cells reports it as the cell's verdict, then ends the session
        raise interrupted
    return outcome


def _suspicious(paths: CellPaths, result: dict) -> str | None:
    """Why `result` is suspicious against the previous result of the same cell (machine, model,
    split, framework), chosen as comparison.json chooses (run id, then finish time, never mtime)."""
    current = LoadedResult(paths.result, result)
    loaded, _ = load_results(paths.split_dir)
    older = [r for r in loaded if r.path != paths.result and r.recency() < current.recency()]
    selection = select_latest([*older, current], machine=current.machine, model=current.model, split=current.split)
    previous = selection.previous.get(current.framework)
    return suspicious(result, previous.data) if previous else None


def _existing_result(cfg: CellConfig, paths: CellPaths, machine: str) -> LoadedResult | None:
    """--skip-existing: this cell's newest result of this machine, when it is of this run (or within
    the window) and not a failure. Chosen by run id and finish time, never by mtime; another
    machine's file never counts and is never touched."""
    if cfg.skip_existing_s is None:
        return None
    loaded, _ = load_results(paths.split_dir)
    mine = [r for r in loaded if r.framework == cfg.framework and r.split == cfg.split]
    newest = select_latest(mine, machine=machine, model=cfg.profile.results_name, split=cfg.split).chosen.get(cfg.framework)
    if newest is None or Verdict(newest.data["verdict"]["verdict"]).is_failure:
        return None
    age = (datetime.now(timezone.utc) - datetime.fromisoformat(newest.finished_at)).total_seconds()
    return newest if newest.run_id == cfg.run_id or age <= cfg.skip_existing_s else None


def _resumed(kept: LoadedResult) -> CellOutcome:
    """The outcome of a cell that --skip-existing kept: the kept result's own verdict, reason and
    annotations, annotated `resumed` and naming the file, so the cell counts, passes or fails,
    and is journaled and reported exactly as when it was measured."""
    kept_verdict = kept.data["verdict"]
    annotations = tuple(a for a in kept_verdict.get("annotations", ()) if a != "resumed")
    verdict = CellVerdict(Verdict(kept_verdict["verdict"]), f"resumed: kept {kept.path.name}: {kept_verdict['reason']}",
                          (*annotations, "resumed"))
    return CellOutcome(verdict, kept.path, kept.data)


def _skipped(reason: str) -> CellOutcome:
    return CellOutcome(CellVerdict(Verdict.SKIPPED, reason), None)


def _prompts(cfg: CellConfig) -> PromptSet:
    if cfg.prompts_path is not None:
        return load_prompts(cfg.prompts_path, split_hint=cfg.split, tools_param=cfg.tools_param)
    return load_split(cfg.split, tools_param=cfg.tools_param)


def _version_block(install: Installation, reported: dict | None) -> dict:
    block = {"version": install.version, "install_source": install.source, "install": install.details}
    if install.version == UNKNOWN_VERSION and reported:
        block["version"] = reported["version"]
        block["version_source"] = f"server: GET {reported['path']}"
    return block


# Where servers report their own version: vLLM and SGLang, Ollama, llama.cpp (its build).
VERSION_ENDPOINTS = (("/version", "version"), ("/api/version", "version"), ("/props", "build_info"))


def reported_version(base_url: str) -> dict | None:
    """What the running server says its version is, or None when none of the usual places answer."""
    for path, key in VERSION_ENDPOINTS:
        try:
            response = httpx.get(f"{base_url}{path}", timeout=5.0)
            value = response.json().get(key) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return {"path": path, "version": value}
    return None


class _Endpoint:
    """An already-running server: waited for like a started one, but nothing starts or stops it."""

    def __init__(self, base_url: str, ready_path: str, timeout_s: float, budget_s: float | None = None):
        self.base_url = base_url
        self.ready_path = ready_path
        t0 = time.monotonic()
        limit = timeout_s if budget_s is None else min(timeout_s, budget_s)
        while (last := self.probe()) is not None:
            if time.monotonic() - t0 >= limit:
                capped = limit < timeout_s
                why = "cell budget reached: " if capped else ""
                raise ServerStartError(f"{why}endpoint {base_url} not ready on {ready_path} after {limit:.0f} s: "
                                       f"last {last}", capped=capped)
            time.sleep(0.25)
        self.ready_after_s: float | None = round(time.monotonic() - t0, 3)

    def probe(self) -> str | None:
        """None when the ready path answers 200, else what it did instead."""
        try:
            status = httpx.get(f"{self.base_url}{self.ready_path}", timeout=5.0).status_code
        except httpx.HTTPError as exc:
            return f"GET {self.ready_path}: {type(exc).__name__}: {exc}".rstrip(": ")
        return None if status == 200 else f"GET {self.ready_path} answered HTTP {status}"

    def exit_reason(self) -> str | None:
        return None  # not our process: the cell probes it after a level instead

    def stop(self) -> ExitInfo:
        return ExitInfo(None, None, False)  # nothing of ours to stop


def list_models(base_url: str) -> tuple[str, ...] | None:
    """The ids `/v1/models` lists, or None when the listing fails (never used to pick the model)."""
    try:
        response = httpx.get(f"{base_url}/v1/models", timeout=10.0)
        response.raise_for_status()
        return tuple(str(m["id"]) for m in response.json().get("data", []))
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None


class _LevelsRun:
    """The mutable part of a cell: servers started, levels measured, what the server said."""

    def __init__(self, cfg, adapter, install, model, prompt_set, paths: CellPaths, launch: Launcher, platform_tag):
        self.cfg, self.adapter, self.install, self.model = cfg, adapter, install, model
        self.platform_tag = platform_tag
        self.prompt_set, self.paths, self.launch = prompt_set, paths, launch
        self.summaries: list[dict] = []
        self.servers: list[dict] = []
        self.listed: tuple[str, ...] | None = None
        self.response_models: set[str] = set()
        self.start_failure: str | None = None
        self.oom: dict | None = None
        self.capped: str | None = None
        self.retried: str | None = None
        self.server_exit: str | None = None  # the server ended without being asked: where and when
        self.last_level: int | None = None
        self.reported_version: dict | None = None
        budget_from = cfg.budget_from if cfg.budget_from is not None else time.perf_counter()
        self.deadline = None if cfg.budget_s is None else budget_from + cfg.budget_s
        self.extra_body = self._extra_body()
        self.shared = cfg.share_server or cfg.endpoint is not None  # an endpoint is one server throughout

    def _extra_body(self) -> dict:
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

    def _run_group(self, levels: tuple[int, ...], sidecar) -> bool:
        """One server for `levels`; False when the cell must stop (start failure, OOM, capped)."""
        server_info: dict = {"levels": list(levels)}
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
            server_info["exit"] = exit_info.to_json()
            if sampler is not None:  # the file name, not the path: results stay valid when moved or committed
                server_info["resources"] = {**sampler.summary(), "path": sampler.path.name}
            self.oom = self.oom or exit_info.oom
        return self.oom is None and self.capped is None and self.server_exit is None

    def _start_once_more_if_transient(self, levels: tuple[int, ...], server_info: dict) -> ServerProcess | _Endpoint:
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

    def _start(self, levels: tuple[int, ...], server_info: dict) -> ServerProcess | _Endpoint:
        if self.cfg.endpoint is not None:
            server_info["external"] = self.cfg.endpoint
            return _Endpoint(self.cfg.endpoint, self.adapter.ready_path, self._ready_timeout(), self._budget_left())
        label = "shared" if len(levels) > 1 else f"c{levels[0]}"
        port = self._port()
        ctx = ServeContext(self.install, self.model, self.cfg.host, port, self.cfg.split, max(levels), self.platform_tag)
        command = replace(self.adapter.serve(ctx), cpus=self.cfg.cpus.server)
        log_path = self.paths.server_log(label)
        server_info.update(port=port, command=command.to_json(), log=str(log_path))
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

    def _run_level(self, server: ServerProcess | _Endpoint, concurrency: int, sidecar) -> bool:
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
        )
        try:
            run = run_level(level_cfg, self.prompt_set.prompts, self.prompt_set.warmup)
        except KeyboardInterrupt as exc:  # keep what the level finished, then let the interrupt end the cell
            if getattr(exc, "level_run", None) is not None:
                self._keep(exc.level_run, sidecar)
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

    def _keep(self, run, sidecar) -> None:
        """A level's summary into the result (one stopped in warm-up keeps its warm-up evidence) and
        its requests into the sidecar."""
        summary = summarize_level(run)
        if run.records or run.warmup_records:
            self.summaries.append(summary)
        self.response_models.update(summary["served_models"])
        for record in [*run.warmup_records, *run.records]:
            sidecar.write(json.dumps({"concurrency": run.config.concurrency, **record.to_json()}) + "\n")

    def _gone_during(self, server: ServerProcess | _Endpoint, run) -> str | None:
        """Why the server could no longer answer by the end of this level, with where it happened:
        our process exited, or an endpoint whose requests failed to connect stopped answering."""
        c, done, asked = run.config.concurrency, sum(r.ok for r in run.records), run.config.requests
        where = f"during c={c} after {done} of {asked} requests" if run.records or not run.warmup_records \
            else f"during warm-up at c={c} after 0 of {asked} requests"
        if (gone := server.exit_reason()) is not None:
            return f"{gone} {where}"
        if isinstance(server, _Endpoint) and any(_lost_connection(r) for r in [*run.warmup_records, *run.records]):
            if (why := server.probe()) is not None:
                return f"endpoint stopped answering {where}: {why}"
        return None


def _lost_connection(record) -> bool:
    return record.error is not None and record.error.type in (ErrorType.CONNECT, ErrorType.TRUNCATED)


def _warmed_by(shared: bool, earlier_levels: int, endpoint: str | None) -> str | None:
    """Who may have filled the server's caches before a level: an earlier level on a shared
    server, or whoever used an --endpoint server before this cell; None for a fresh server."""
    if shared and earlier_levels:
        return "an earlier level"
    if endpoint is not None:
        return "unknown: an --endpoint server's history"
    return None
