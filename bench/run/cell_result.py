"""A cell's result document: assembled from what the cell measured, checked against the previous
result of the same cell, or kept from an earlier run (--skip-existing); `CellHistory` is the one
reading of the cell's folder both checks consult.

`assemble` is the one place a Result is built; `bench.core.result.files.write_result` validates it
against the schema as it writes it.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.base import clock, git
from bench.base.paths import PROJECT_ROOT
from bench.core.lenses.fidelity import Fidelity
from bench.core.level_run import rate_json
from bench.core.open_loop import Load, slo_json
from bench.core.result.files import SCHEMA_VERSION
from bench.core.result.model import (
    Framework,
    Harness,
    MachineBlock,
    ReportedVersion,
    Result,
    RunConfig,
    Unfinished,
    VerdictBlock,
)
from bench.core.result.store import LoadedResult, load_results, select_latest, suspicious
from bench.core.verdicts import CellVerdict, Verdict
from bench.run.config import CellConfig, LoadPlan
from bench.run.fixes import verified_fix
from bench.run.levels.cell_run import CellRun
from bench.run.levels.plan import point_json
from bench.run.levels.sweep import ConcurrencySweep
from bench.setup.installs.cache import UNKNOWN_VERSION, Installation
from bench.setup.prompts import PromptSet


def assemble(cfg: CellConfig, run: CellRun, *, machine: MachineBlock, prompt_set: PromptSet,
             verdict: VerdictBlock, started_at: str, finished_at: str, duration_s: float, final: bool = True,
             harness: Harness | None = None, unfinished: Unfinished | None = None) -> Result:
    """The result of a cell whose levels `run` measured, with `verdict` as decided; not `final`: as
    it stands between two levels (a sweep's search still running), `unfinished` saying so.
    `harness`: the checkout's revision (and the adapter's and profile's digests), when the caller
    asked once for every write of the cell."""
    adapter, model = run.adapter, run.model
    result: Result = {
        "schema_version": SCHEMA_VERSION,
        "run_id": cfg.run_id,
        "harness": harness if harness is not None else {**git.revision(PROJECT_ROOT)},
        "framework": _framework(adapter.name, run.platform_tag, run.install, run.reported_version),
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
        "machine": machine,
        "run_config": _run_config(cfg, run, prompt_set),
        "servers": run.servers,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_s": round(duration_s, 3),
        "levels": run.levels(),
        "verdict": verdict,
        "requests_file": run.paths.requests.name,
    }
    if cfg.model_source is not None:
        result["model"]["profile_source"] = cfg.model_source
    if isinstance(search := run.finished_search(final=final), ConcurrencySweep):
        result["concurrency_sweep"] = search.concurrency_outcome()
    elif search is not None:
        result["sweep"] = search.outcome()
    if run.fidelity.block is not None:
        result["fidelity"] = run.fidelity.block
    if unfinished is not None:
        result["unfinished"] = unfinished
    return result


def _framework(name: str, platform_tag: str, install: Installation, reported: ReportedVersion | None) -> Framework:
    block: Framework = {"name": name, "platform": platform_tag, "version": install.version,
                        "install_source": install.source, "install": install.details}
    if install.version == UNKNOWN_VERSION and reported:
        block["version"] = reported["version"]
        block["version_source"] = f"server: GET {reported['path']}"
    if install.version_choice is not None:  # a cached install: the adapter's pin, or the recorded update
        block["version_choice"] = install.version_choice
    if install.pinned_version is not None:
        block["pinned_version"] = install.pinned_version
    return block


def _run_config(cfg: CellConfig, run: CellRun, prompt_set: PromptSet) -> RunConfig:
    block: RunConfig = {
        "levels": ["sweep"] if run.plan.search is not None else [point_json(p) for p in run.plan.points()],
        "requests_per_level": run.plan.requests(run.plan.points()[0]) if run.plan.search is None else cfg.load.requests,
        "warmup": cfg.load.warmup,
        "levels_share_server": run.shared,
        "request_timeout_s": cfg.client.request_timeout_s,
        "request_extras": run.extra_body,
        "cpu_affinity": cfg.client.cpus.to_json(),
        "unique_prompts": cfg.client.unique_prompts,
        "keep_alive": cfg.client.keep_alive,
        "server_metrics": cfg.server.server_metrics_s is not None,
        "prompts": {"source": str(prompt_set.source), "format": prompt_set.format,
                    "count": len(prompt_set.prompts), "tools_param": cfg.client.tools_param},
    }
    asked = cfg.load.sessions
    if cfg.load.plan is not None or asked is not None:
        block["load"] = _load(cfg.load.plan) if cfg.load.plan is not None else {"mode": "closed", "slo": None}
    if asked is not None:
        block["load"]["sessions"] = {"count": asked.count, "turns": asked.turns, "think_s": asked.think_s,
                                     "think": ("recorded" if asked.think_s is None else
                                               "exponential" if asked.think_drawn else "fixed"),
                                     "header": asked.header}
        if asked.rate_per_s is not None:
            block["load"]["sessions"]["rate_per_s"] = asked.rate_per_s
        if (source := asked.file_json()) is not None:
            block["load"]["sessions"]["file"] = source
    if run.plan.rounds > 1:  # absent with one round, as in every result written before rounds
        block["rounds"] = run.plan.rounds
    return block


def _load(plan: LoadPlan) -> Load:
    """run_config.load: how the levels were sent; a closed-loop run without --slo or --duration has none."""
    load = _sent(plan)
    if plan.ramp_up is not None:
        load["ramp_up"] = {"shape": plan.ramp_up, "start_rps": plan.ramp_up_start}
    if plan.duration_s is not None:
        load["duration_s"] = plan.duration_s
    if plan.stops_over_saturated:
        load["stop_over_saturated"] = True
    return load


def _sent(plan: LoadPlan) -> Load:
    slo = slo_json(plan.slos) or None
    if (trace := plan.trace) is not None:
        return {"mode": "trace", "trace": {"file": trace.name, "sha256": trace.sha256, "format": trace.format,
                                           "entries": len(trace.entries), "skipped": trace.skipped},
                "max_concurrency": plan.max_concurrency, "seed": plan.seed, "slo": slo}
    if not plan.open_loop:
        closed: Load = {"mode": "closed", "slo": slo}
        if (search := plan.concurrency_sweep) is not None:
            closed["concurrency_sweep"] = {"start": int(search.start), "tolerance": search.tolerance,
                                           "max_levels": search.max_levels}
        return closed
    sweep = plan.sweep
    load: Load = {"mode": "open", "request_rates": [rate_json(r) for r in plan.rates], "burstiness": plan.burstiness,
                  "max_concurrency": plan.max_concurrency, "seed": plan.seed, "slo": slo,
                  "sweep": None if sweep is None else {"start_rps": sweep.start, "tolerance": sweep.tolerance,
                                                       "max_levels": sweep.max_levels}}
    if sweep is not None:
        del load["request_rates"]
    return load


@dataclass(frozen=True)
class CellHistory:
    """The results already in a cell's split folder, read once as the cell begins: --skip-existing
    (`existing`), the fix check (`previous`) and the suspicious check (`suspicious`) all consult
    this one reading. Cells of one host run one at a time (the host lock, fixtures/servers.py)
    and a cell writes under names no earlier file took (free_cell_paths), so what a later read
    would add is only the cell's own file, which `previous` leaves out anyway."""

    results: tuple[LoadedResult, ...]

    @classmethod
    def read(cls, split_dir: Path) -> CellHistory:
        loaded, _ = load_results(split_dir)
        return cls(tuple(loaded))

    def previous(self, path: Path, result: Result) -> LoadedResult | None:
        """The result before `result` (to be written at `path`) in its cell (machine, model, split,
        framework), chosen as comparison.json chooses (run id, then finish time, never mtime)."""
        current = LoadedResult(path, result)
        older = [r for r in self.results if r.path != path and r.recency() < current.recency()]
        selection = select_latest([*older, current], machine=current.machine, model=current.model,
                                  split=current.split)
        return selection.previous.get(current.framework)

    def reference(self, framework: str, machine: str) -> tuple[Path, Fidelity] | None:
        """The newest result of `framework` on `machine` in the folder that has a fidelity run (the
        reference --fidelity compares with), with its block; None without one."""
        found = [r for r in self.results if r.framework == framework and r.machine == machine
                 and "fidelity" in r.data and "error" not in r.data["fidelity"]]
        newest = max(found, key=lambda r: r.recency(), default=None)
        return None if newest is None else (newest.path, newest.data["fidelity"])

    def suspicious(self, path: Path, result: Result) -> str | None:
        """Why `result` is suspicious against the previous result of the same cell."""
        previous = self.previous(path, result)
        return suspicious(result, previous.data) if previous else None

    def judge(self, path: Path, measured: Result, verdict: CellVerdict) -> tuple[CellVerdict, VerdictBlock]:
        """The cell's verdict and its block once checked against the previous result of the cell:
        `fixed` when an ok re-run verifies a fix (bench.run.fixes), annotated `suspicious` (never
        another verdict) when its throughput moved too far. `measured`: the result as the levels
        left it, under `verdict`, the one they gave; the result written is assembled with these."""
        previous = self.previous(path, measured)
        block = verdict.to_json()
        fix = verified_fix(previous, measured, clock.run_day())
        if fix is not None:  # ok, and the adapter edit made since this cell failed earlier in the run is why
            verdict = fix.verdict_after(verdict)
            block = {**verdict.to_json(), "fix": fix.to_json()}
        flagged = suspicious(measured, previous.data) if previous else None
        if flagged:  # an annotation: it never changes the verdict
            reading = gpu_reading(path.parent, measured)  # the GPU's side of the story, when sampled
            flagged = f"{flagged}; {reading}" if reading else flagged
            verdict = replace(verdict, annotations=(*verdict.annotations, "suspicious"))
            block = {**block, **verdict.to_json(), "suspicious": flagged}
        return verdict, block

    def existing(self, cfg: CellConfig, machine: str) -> LoadedResult | None:
        """--skip-existing: this cell's newest result of this machine, when it is of this run (or
        within the window), not a failure and not unfinished (a killed run's levels so far:
        measured again, under names of its own, its files left as they are). Chosen by run id and
        finish time, never by mtime; another machine's file never counts and is never touched, and
        neither does an imported result (another benchmark measured it: keeping it would report a
        cell cellbench never ran)."""
        if cfg.budget.skip_existing_s is None:
            return None
        mine = [r for r in self.results
                if r.framework == cfg.framework and r.split == cfg.split and "imported" not in r.data]
        selection = select_latest(mine, machine=machine, model=cfg.profile.results_name, split=cfg.split)
        newest = selection.chosen.get(cfg.framework)
        if newest is None or Verdict(newest.data["verdict"]["verdict"]).is_failure or "unfinished" in newest.data:
            return None  # a failure, or a killed run's levels so far, is measured again
        age = (clock.now() - datetime.fromisoformat(newest.finished_at)).total_seconds()
        return newest if newest.run_id == cfg.run_id or age <= cfg.budget.skip_existing_s else None


def resumed_verdict(kept: LoadedResult) -> CellVerdict:
    """The verdict of a cell that --skip-existing kept: the kept result's own verdict, reason and
    annotations, annotated `resumed` and naming the file, so the cell counts, passes or fails,
    and is journaled and reported exactly as when it was measured."""
    recorded = CellVerdict.from_json(kept.data["verdict"])
    annotations = tuple(a for a in recorded.annotations if a != "resumed")
    reason = f"resumed: kept {kept.path.name}: {recorded.reason}"
    return CellVerdict(recorded.verdict, reason, (*annotations, "resumed"))


IDLE_UTIL_PERCENT = 25.0  # below this mean utilisation the GPU was not what limited the cell
THROTTLE_FREQ_DROP = 0.85  # the last third's mean frequency below this share of the first third's


def gpu_case(samples: list[dict]) -> str | None:
    """Which of the weekly run's three readings a slower cell's GPU samples fit: GPU mostly idle
    (a serving or client problem), frequency falling while busy (throttling), or busy throughout
    (a real slowdown). None with fewer than 3 samples that have a GPU utilisation."""
    utils = [statistics.fmean(u) for s in samples
             if (u := [g["util_percent"] for g in s.get("gpu", ()) if g.get("util_percent") is not None])]
    if len(utils) < 3:
        return None
    mean_util = statistics.fmean(utils)
    if mean_util < IDLE_UTIL_PERCENT:
        return (f"GPU mostly idle during the levels (mean utilisation {mean_util:.0f}%): a serving or client "
                "problem, not the GPU")
    # the GPU's clock: `clock_mhz` (NVML's SM clock, metalstat's frequency); sidecars of an earlier
    # cellbench have metalstat's `freq_mhz` only
    freqs = [f for s in samples for g in s.get("gpu", ())[:1] if (f := g.get("clock_mhz") or g.get("freq_mhz"))]
    third = len(freqs) // 3
    if third and statistics.fmean(freqs[-third:]) < THROTTLE_FREQ_DROP * statistics.fmean(freqs[:third]):
        return (f"GPU frequency fell from {statistics.fmean(freqs[:third]):.0f} to "
                f"{statistics.fmean(freqs[-third:]):.0f} MHz while busy (mean utilisation {mean_util:.0f}%): "
                "throttling")
    return f"GPU busy during the levels (mean utilisation {mean_util:.0f}%): the slowdown looks real"


def resource_samples(result_dir: Path, result: Mapping[str, Any], *, after_ready: bool = True) -> list[dict]:
    """Every sample of the cell's resource sidecars, from each server's readiness on unless
    `after_ready` is False (a crash while loading shows only before it). `result`: a Result, or a
    result file's JSON unchecked (the journal reads a failed cell's file as it finds it)."""
    samples: list[dict] = []
    for server in result.get("servers", []):
        sidecar = server.get("resources")
        if not sidecar:
            continue
        ready = (server.get("ready_after_s") or 0.0) if after_ready else float("-inf")
        try:
            lines = (result_dir / sidecar["path"]).read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            with contextlib.suppress(ValueError):
                sample = json.loads(line)
                if isinstance(sample, dict) and sample.get("t", 0.0) >= ready:
                    samples.append(sample)
    return samples


def gpu_reading(result_dir: Path, result: Mapping[str, Any]) -> str | None:
    """`gpu_case` of the cell's resource sidecars, from each server's readiness on (loading a
    model leaves the GPU idle and would read as a serving problem)."""
    return gpu_case(resource_samples(result_dir, result))

