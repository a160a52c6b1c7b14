"""A cell's result document: assembled from what the cell measured, checked against the previous
result of the same cell, or kept from an earlier run (--skip-existing).

`assemble` is the one place a Result is built; `bench.core.result.write_result` validates it
against the schema as it writes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from bench.base import clock, git
from bench.base.paths import PROJECT_ROOT
from bench.core.result import SCHEMA_VERSION, CellPaths
from bench.core.result_model import Framework, Harness, Machine, ReportedVersion, Result, RunConfig
from bench.core.store import LoadedResult, load_results, select_latest, suspicious
from bench.core.verdicts import CellVerdict, Verdict
from bench.run.config import CellConfig
from bench.run.levels import LevelsRun
from bench.setup.installs import UNKNOWN_VERSION, Installation
from bench.setup.prompts import PromptSet


def assemble(cfg: CellConfig, run: LevelsRun, *, machine: dict[str, Any], prompt_set: PromptSet,
             verdict: CellVerdict, started_at: str, duration_s: float) -> Result:
    """The result of a cell whose levels `run` measured, with `verdict`."""
    adapter, model = run.adapter, run.model
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": cfg.run_id,
        "harness": cast(Harness, git.revision(PROJECT_ROOT)),
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
        "machine": cast(Machine, machine),
        "run_config": _run_config(cfg, run, prompt_set),
        "servers": run.servers,
        "started_at": started_at,
        "finished_at": clock.now_iso(),
        "duration_s": round(duration_s, 3),
        "levels": run.summaries,
        "verdict": verdict.to_json(),
        "requests_file": run.paths.requests.name,
    }


def _framework(name: str, platform_tag: str, install: Installation, reported: ReportedVersion | None) -> Framework:
    block: Framework = {"name": name, "platform": platform_tag, "version": install.version,
                        "install_source": install.source, "install": install.details}
    if install.version == UNKNOWN_VERSION and reported:
        block["version"] = reported["version"]
        block["version_source"] = f"server: GET {reported['path']}"
    return block


def _run_config(cfg: CellConfig, run: LevelsRun, prompt_set: PromptSet) -> RunConfig:
    return {
        "levels": list(cfg.levels),
        "requests_per_level": cfg.requests,
        "warmup": cfg.warmup,
        "levels_share_server": run.shared,
        "request_timeout_s": cfg.request_timeout_s,
        "request_extras": run.extra_body,
        "cpu_affinity": cast(Any, cfg.cpus.to_json()),
        "unique_prompts": cfg.unique_prompts,
        "prompts": {"source": str(prompt_set.source), "format": prompt_set.format,
                    "count": len(prompt_set.prompts), "tools_param": cfg.tools_param},
    }


def suspicious_change(paths: CellPaths, result: Result) -> str | None:
    """Why `result` is suspicious against the previous result of the same cell (machine, model,
    split, framework), chosen as comparison.json chooses (run id, then finish time, never mtime)."""
    current = LoadedResult(paths.result, result)
    loaded, _ = load_results(paths.split_dir)
    older = [r for r in loaded if r.path != paths.result and r.recency() < current.recency()]
    selection = select_latest([*older, current], machine=current.machine, model=current.model, split=current.split)
    previous = selection.previous.get(current.framework)
    return suspicious(result, previous.data) if previous else None


def existing_result(cfg: CellConfig, paths: CellPaths, machine: str) -> LoadedResult | None:
    """--skip-existing: this cell's newest result of this machine, when it is of this run (or within
    the window) and not a failure. Chosen by run id and finish time, never by mtime; another
    machine's file never counts and is never touched."""
    if cfg.skip_existing_s is None:
        return None
    loaded, _ = load_results(paths.split_dir)
    mine = [r for r in loaded if r.framework == cfg.framework and r.split == cfg.split]
    selection = select_latest(mine, machine=machine, model=cfg.profile.results_name, split=cfg.split)
    newest = selection.chosen.get(cfg.framework)
    if newest is None or Verdict(newest.data["verdict"]["verdict"]).is_failure:
        return None
    age = (clock.now() - datetime.fromisoformat(newest.finished_at)).total_seconds()
    return newest if newest.run_id == cfg.run_id or age <= cfg.skip_existing_s else None


def resumed_verdict(kept: LoadedResult) -> CellVerdict:
    """The verdict of a cell that --skip-existing kept: the kept result's own verdict, reason and
    annotations, annotated `resumed` and naming the file, so the cell counts, passes or fails,
    and is journaled and reported exactly as when it was measured."""
    recorded = CellVerdict.from_json(kept.data["verdict"])
    annotations = tuple(a for a in recorded.annotations if a != "resumed")
    reason = f"resumed: kept {kept.path.name}: {recorded.reason}"
    return CellVerdict(recorded.verdict, reason, (*annotations, "resumed"))
