"""One cell, end to end: (framework, split) on this machine and model -> a result file and a verdict.

profile -> adapter -> server -> load generator -> metrics -> verdict -> result file. The cell
never raises for a framework's misbehaviour: everything it met becomes evidence in the result.
Servers are started through a `Launcher`, so the pytest fixture that owns their cleanup stays
the only place that can leak or reap them. With `endpoint` set the cell starts nothing: it runs
its levels against that already-running server (adapters with a `bind` hook only).

The result is written as the cell goes: after every level (its request records first,
bench.run.writes), atomically, with an `unfinished` block and a `capped` verdict whose reason
begins "unfinished:", then once more at the end without them. A session killed mid-cell leaves
every finished level on disk; a later session names it (bench.core.result.store.killed). The cell writes
under names no earlier attempt of its run id used (bench.core.result.files.free_cell_paths). A file it
cannot write (a full disk, a folder gone read-only) ends the cell with UnwritableResults, which
the pytest layer turns into one `ERROR:` line.

The parts: bench.run.config (what a cell is given and returns), bench.run.levels (servers and
levels, budget and stops), bench.run.server.probes (what a running server says), bench.run.cell_result
(the result document; `CellHistory`, the one reading of the cell's folder: --skip-existing, the
fix and suspicious checks), bench.run.fixes (`fixed`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import adapters
from bench.base import clock, git
from bench.base.paths import PROJECT_ROOT
from bench.core.level_run import interrupt_text
from bench.core.result.files import UnwritableResults, cell_paths, free_cell_paths, unfinished_block, write_result
from bench.core.result.model import Harness, Result, Unfinished, VerdictBlock
from bench.core.verdicts import CellVerdict, Evidence, Identity, Verdict, classify
from bench.host.machine import detect
from bench.run.audits import fidelity
from bench.run.cell_result import CellHistory, assemble, resumed_verdict
from bench.run.config import CellConfig, CellInterrupted, CellOutcome, Launcher
from bench.run.fixes import profile_source
from bench.run.levels.cell_run import CellRun
from bench.setup import model_files, profiles, traces
from bench.setup.adapter import Adapter, ModelRef, NotConfigured, this_platform
from bench.setup.installs.cache import Installation, InstallError, NotInstalled
from bench.setup.installs.updates import install_selected
from bench.setup.prompt_files import load_prompts, load_split
from bench.setup.prompts import PromptSet

__all__ = ["CellConfig", "CellOutcome", "Launcher", "bind", "run_cell"]


def bind(adapter: Adapter, platform_tag: str, profile: profiles.ModelProfile, endpoint: str | None,
         allow_install: bool, *, pinned: bool = False) -> tuple[Adapter, Installation, ModelRef]:
    """The adapter, installation and model a cell of this profile serves (the recorded update of the
    framework unless `pinned`: bench.setup.installs.updates); raises NotInstalled, InstallError,
    ProfileUnavailable or NotConfigured."""
    if adapter.bind is not None:  # defined by the profile or --endpoint, not by code
        bound = adapter.bind(profile, endpoint)
        return bound.adapter, bound.install, bound.model
    install = install_selected(adapter.recipe_for(platform_tag), pinned=pinned, allow_install=allow_install)
    return adapter, install, adapter.model_for_server(model_files.resolve(profile, adapter.model_format))


def run_cell(cfg: CellConfig, launch: Launcher) -> CellOutcome:
    adapter = adapters.get(cfg.framework)
    machine = detect()
    paths = cell_paths(cfg.results_root, cfg.profile.results_name, machine.folder, cfg.split, cfg.framework, cfg.run_id)
    started_at, t0 = clock.now_iso(), time.monotonic()

    platform_tag = adapter.platform_here()
    if platform_tag is None:
        why = f"{adapter.name} runs on {', '.join(sorted(adapter.platforms))}; this is {this_platform()}"
        if machine.gpu_probe_error and any(tag.endswith("+cuda") for tag in adapter.platforms):
            why += f", and whether it has a CUDA GPU is unknown: {machine.gpu_probe_error}"
        return _skipped(why)
    try:
        adapter, install, model = bind(adapter, platform_tag, cfg.profile, cfg.server.endpoint, cfg.server.install,
                                       pinned=cfg.server.pinned)
    except NotInstalled as exc:
        return _skipped(f"{exc} (or pass --install)" if exc.installable else str(exc))
    except InstallError as exc:
        return CellOutcome(CellVerdict(Verdict.FAILED, str(exc)), None)
    except (profiles.ProfileUnavailable, NotConfigured) as exc:
        return _skipped(str(exc))
    history = CellHistory.read(paths.split_dir)  # once: --skip-existing, the fix and suspicious checks
    kept = history.existing(cfg, machine.slug)
    if kept is not None:
        return CellOutcome(resumed_verdict(kept), kept.path, kept.data)
    prompt_set = _prompts(cfg)
    paths = free_cell_paths(paths)  # never over an earlier attempt's files (a killed run's among them)
    block = machine.to_json()
    # Once: the result is written after every level. The checkout, and the adapter and profile it ran.
    harness: Harness = {**git.revision(PROJECT_ROOT), "adapter": adapters.source(cfg.framework),
                        "profile": profile_source(cfg.profile.source, PROJECT_ROOT)}

    run = CellRun(cfg, adapter, install, model, prompt_set, paths, launch, platform_tag)
    run.fidelity.reference = history.reference(cfg.load.fidelity_reference, machine.slug)

    def document(verdict: VerdictBlock, ended: tuple[str, float], *, unfinished: Unfinished | None = None) -> Result:
        return assemble(cfg, run, machine=block, prompt_set=prompt_set, verdict=verdict, started_at=started_at,
                        finished_at=ended[0], duration_s=ended[1], final=unfinished is None, harness=harness,
                        unfinished=unfinished)

    def level_written() -> None:  # after each level: the result so far, marked unfinished
        done = len(run.summaries)
        planned = f" of {len(run.plan.steps())}" if run.plan.search is None else ""
        reason = (f"unfinished: written after {done}{planned} level{'s' if done != 1 or planned else ''}; "
                  "the cell was still running, or was killed if its writer (`unfinished.pid`) is gone")
        write_result(paths.result, document(CellVerdict(Verdict.CAPPED, reason).to_json(), _ended(t0),
                                            unfinished=unfinished_block(done)))

    run.on_level = level_written
    interrupted: KeyboardInterrupt | None = None
    try:
        run.execute()
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (bench.plugins.signals): keep what was measured
        interrupted = exc
        run.capped = f"interrupted ({interrupt_text(exc)}) {run.where()}"
    except OSError as exc:  # a server log or a sidecar the results folder refused (a full disk, read-only)
        if exc.filename is None or not Path(exc.filename).is_relative_to(cfg.results_root):
            raise
        raise UnwritableResults(Path(exc.filename), exc) from exc

    if run.fidelity.block is not None:  # against the reference stack's newest answers in this folder
        run.fidelity.block = fidelity.against(run.fidelity.block, run.fidelity.answers, run.fidelity.reference,
                                              cfg.load.fidelity_reference)
    measured, ended = _verdict(cfg, run), _ended(t0)
    verdict, decided = history.judge(paths.result, document(measured.to_json(), ended), measured)
    result = document(decided, ended)
    write_result(paths.result, result)
    outcome = CellOutcome(verdict, paths.result, result)
    if interrupted is not None:
        # bench.plugins reports the outcome, then ends the session
        raise CellInterrupted(interrupted, outcome).with_traceback(interrupted.__traceback__)
    return outcome


def _verdict(cfg: CellConfig, run: CellRun) -> CellVerdict:
    naming = run.adapter.naming_for(run.model, run.install)
    identity = Identity(run.model.served_id, run.listed, tuple(sorted(run.response_models)), naming.other_ids,
                        naming.lists_served)
    evidence = Evidence(
        levels=tuple(run.levels()),  # with rounds, the combined levels: a failure in any round counts
        identity=identity if run.summaries else None,
        start_failure=run.start_failure,
        server_exit=run.server_exit,
        oom=run.oom,
        capped=run.capped,
        api_key_from=cfg.server.api_key.source if cfg.server.api_key else None,
    )
    verdict = classify(evidence, degraded_threshold=cfg.reporting.degraded_threshold)
    if run.retried:
        verdict = replace(verdict, annotations=(*verdict.annotations, "retried"))
    if run.fidelity.block is not None and run.fidelity.block.get("flagged"):
        verdict = replace(verdict, annotations=(*verdict.annotations, "fidelity"))
    return verdict


def _ended(t0: float) -> tuple[str, float]:
    """Now, and the seconds since `t0` (time.monotonic): a result's `finished_at` and `duration_s`."""
    return clock.now_iso(), time.monotonic() - t0


def _skipped(reason: str) -> CellOutcome:
    return CellOutcome(CellVerdict(Verdict.SKIPPED, reason), None)


def _prompts(cfg: CellConfig) -> PromptSet:
    plan = cfg.load.plan
    if plan is not None and (trace := plan.trace) is not None:  # made to the trace's lengths, split's warm-up
        synth = traces.Synthesiser(traces.tokenizer_path(cfg.profile.builtin, cfg.profile.name), seed=plan.seed)
        return PromptSet(traces.trace_prompts(trace, synth), load_split(cfg.split).warmup, trace.path,
                         f"{trace.format} trace")
    if (asked := cfg.load.sessions) is not None and asked.file is not None:  # --sessions-file
        if asked.weka:  # made to the traces' lengths when the levels are planned; the split's warm-up
            return PromptSet((), load_split(cfg.split).warmup, asked.file, "weka trace")
        return load_prompts(asked.file, split_hint=cfg.split, tools_param=cfg.client.tools_param)
    if cfg.prompts is not None:
        return load_prompts(cfg.prompts, split_hint=cfg.split, tools_param=cfg.client.tools_param)
    return load_split(cfg.split, tools_param=cfg.client.tools_param)
