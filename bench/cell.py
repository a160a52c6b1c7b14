"""One cell, end to end: (framework, split) on this machine and model -> a result file and a verdict.

profile -> adapter -> server -> load generator -> metrics -> verdict -> result file. The cell
never raises for a framework's misbehaviour: everything it met becomes evidence in the result.
Servers are started through a `Launcher`, so the pytest fixture that owns their cleanup stays
the only place that can leak or reap them. With `endpoint` set the cell starts nothing: it runs
its levels against that already-running server (adapters with a `bind` hook only).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

import adapters
from bench import profiles
from bench.adapter import Adapter, NotConfigured, ServeCommand, ServeContext, this_platform
from bench.installs import UNKNOWN_VERSION, Installation, InstallError, NotInstalled, ensure_installed
from bench.loadgen import LevelConfig, run_level
from bench.machine import detect
from bench.metrics import summarize_level
from bench.prompts import PromptSet, load_prompts, load_split
from bench.results import SCHEMA_VERSION, CellPaths, cell_paths, now_iso, write_json_atomic
from bench.server import ExitInfo, ServerProcess, ServerStartError, free_port
from bench.verdicts import CellVerdict, Evidence, Identity, Verdict, classify

Launcher = Callable[[ServeCommand, Adapter, str, int, Path], ServerProcess]
"""Start a server for (command, adapter, host, port, log path) and return it ready, or raise
ServerStartError. The launcher owns the server's cleanup; the cell stops it early when it can."""


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
        return _skipped(f"{adapter.name} runs on {', '.join(sorted(adapter.platforms))}; this is {this_platform()}")
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
    prompt_set = _prompts(cfg)

    run = _LevelsRun(cfg, adapter, install, model, prompt_set, paths, launch, platform_tag)
    run.execute()

    evidence = Evidence(
        levels=tuple(run.summaries),
        identity=Identity(model.served_id, run.listed, tuple(sorted(run.response_models))) if run.summaries else None,
        start_failure=run.start_failure,
    )
    verdict = classify(evidence, degraded_fraction=cfg.degraded_fraction)
    result = {
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
    write_json_atomic(paths.result, result)
    return CellOutcome(verdict, paths.result, result)


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
    """An already-running server: answers like a started one, but nothing starts or stops it."""

    def __init__(self, base_url: str, ready_path: str):
        self.base_url = base_url
        self.ready_after_s: float | None = None
        try:
            status = httpx.get(f"{base_url}{ready_path}", timeout=10.0).status_code
        except httpx.HTTPError as exc:
            raise ServerStartError(f"endpoint {base_url} does not answer GET {ready_path}: {exc!r}") from exc
        if status != 200:
            raise ServerStartError(f"endpoint {base_url} answers GET {ready_path} with HTTP {status}")

    def stop(self) -> ExitInfo:
        return ExitInfo(None, None, False)


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
        self.reported_version: dict | None = None
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
        server_info: dict = {"levels": list(levels)}
        self.servers.append(server_info)
        try:
            server = self._start(levels, server_info)
        except ServerStartError as exc:
            self.start_failure = str(exc)
            server_info["start_error"] = str(exc)
            return False
        server_info["ready_after_s"] = server.ready_after_s
        try:
            listed = list_models(server.base_url)
            if listed is not None:
                self.listed = listed
            if self.install.version == UNKNOWN_VERSION:
                server_info["reported_version"] = self.reported_version = reported_version(server.base_url)
            for concurrency in levels:
                self._run_level(server, concurrency, sidecar)
        finally:
            exit_info = server.stop()
            server_info["exit"] = {"returncode": exit_info.returncode, "signal": exit_info.signal,
                                   "stopped_by_us": exit_info.stopped_by_us}
        return True

    def _start(self, levels: tuple[int, ...], server_info: dict) -> ServerProcess | _Endpoint:
        if self.cfg.endpoint is not None:
            server_info["external"] = self.cfg.endpoint
            return _Endpoint(self.cfg.endpoint, self.adapter.ready_path)
        label = "shared" if len(levels) > 1 else f"c{levels[0]}"
        port = self._port()
        ctx = ServeContext(self.install, self.model, self.cfg.host, port, self.cfg.split, max(levels), self.platform_tag)
        command = self.adapter.serve(ctx)
        log_path = self.paths.server_log(label)
        server_info.update(port=port, command=command.to_json(), log=str(log_path))
        return self.launch(command, self.adapter, self.cfg.host, port, log_path)

    def _port(self) -> int:
        if self.cfg.port == 0:
            return free_port(self.cfg.host)
        return self.cfg.port or self.adapter.default_port

    def _run_level(self, server: ServerProcess | _Endpoint, concurrency: int, sidecar) -> None:
        level_cfg = LevelConfig(
            base_url=server.base_url,
            model=self.model.served_id,
            concurrency=concurrency,
            requests=self.cfg.requests,
            warmup=self.cfg.warmup,
            request_timeout_s=self.cfg.request_timeout_s,
            extra_body=self.extra_body,
        )
        run = run_level(level_cfg, self.prompt_set.prompts, self.prompt_set.warmup)
        summary = summarize_level(run)
        self.summaries.append(summary)
        self.response_models.update(summary["served_models"])
        for record in [*run.warmup_records, *run.records]:
            sidecar.write(json.dumps({"concurrency": concurrency, **record.to_json()}) + "\n")
