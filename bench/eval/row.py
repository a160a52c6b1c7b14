"""One eval row: start its server, run its client, read its result, compute its table cells.

Per round (`round_<k>/` under the row's directory): a server through the same launcher as the
benchmark cells, the client as an argument list with a wall-clock limit in its own process
group, then the result JSON checked for sanity and turned into cell texts. A failed round ends
the row with the reason and an excerpt of the log that explains it; the next row still runs.
Nothing here edits a table: `row_edit` only says what a row's edit is; the controller makes it.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import adapters
from bench.eval.client import excerpt, path_with, run_client
from bench.eval.config.schema import EvalRow
from bench.eval.runlog import RUN_LOG, RunLog
from bench.eval.tables import Claim, Locator, RowEdit
from bench.host.ports import free_port
from bench.run.cell import Launcher
from bench.run.server.exits import ServerStartError
from bench.run.server.probes import list_models
from bench.setup import model_files, profiles
from bench.setup.adapter import Adapter, ModelRef, ServeCommand, ServeContext
from bench.setup.installs.cache import UNKNOWN_VERSION, Installation
from bench.setup.installs.updates import install_selected


class RowUnavailable(Exception):
    """The row cannot run on this machine (framework, model or GPUs missing): a skip, with the reason."""


@dataclass(frozen=True)
class RowContext:
    run_dir: Path
    repo_root: Path  # the eval root: {repo_root}, the clients' cwd
    auto_env: dict[str, str]
    python: str = sys.executable  # the clients' Python ({python}; a bare `python` finds it first on PATH)
    hardware: str = ""  # this machine's tag, for a row's server_extra_by_hardware
    rounds: int = 1
    smoke: int | None = None
    table_from: str = "round1"  # or "mean"
    host: str = "127.0.0.1"
    port: int | None = 0  # 0: any free port; None: the adapter's
    install: bool = False
    pinned: bool = False  # the adapter's version, not the recorded update (bench.setup.installs.updates)
    gpus: tuple[int, ...] = ()
    # Rounds already run this session, by (run signature, round): rows that run the same client
    # against the same server (an accuracy row and a speed row of one benchmark) share one run.
    shared_rounds: dict | None = None
    log: RunLog | None = None  # run.log and the console's stage lines


@dataclass
class RowRun:
    row_id: str
    status: str = "fail"  # "ok" | "fail"
    reason: str = ""
    excerpt: str = ""
    gpus: list[int] = field(default_factory=list)
    rounds: list[dict] = field(default_factory=list)
    cells: dict[str, str] | None = None  # the text each table column gets; None when the row failed
    spread: dict[str, dict] = field(default_factory=dict)
    source_note: str = ""

    def to_json(self) -> dict:
        return {"id": self.row_id, "status": self.status, "reason": self.reason, "fail_excerpt": self.excerpt,
                "gpus": self.gpus, "rounds": self.rounds, "cells": self.cells, "spread": self.spread,
                "source_note": self.source_note}


def _model_profile(hf_model_id: str) -> profiles.ModelProfile | None:
    """A cellbench model profile by name, else the shipped profile that declares this repo id."""
    try:
        return profiles.load_profile(hf_model_id)
    except profiles.ProfileError:
        pass
    for name in profiles.available_profiles():
        profile = profiles.load_profile(name)
        if any(entry.repo == hf_model_id for entry in profile.formats.values()):
            return profile
    return None


def _model(row: EvalRow, adapter: Adapter) -> ModelRef:
    """The row's model: through its cellbench profile when one names or declares it; else the id
    as it is, for servers that load a Hugging Face id themselves (and for a row's own `server`
    template, which names its model itself)."""
    profile = _model_profile(row.hf_model_id)
    if profile is not None:
        return adapter.model_for_server(model_files.resolve(profile, adapter.model_format))
    if adapter.model_format != "hf" and "shell" not in row.server_profile.options:
        raise RowUnavailable(f"{adapter.name} needs a {adapter.model_format} file, and no model profile is named or "
                             f"declares {row.hf_model_id!r} (shipped: {', '.join(profiles.available_profiles())})")
    served = row.server_profile.options.get("model_name") or row.hf_model_id
    return ModelRef(path=Path(row.hf_model_id), served_id=served, alias=served)


class _Server:
    """What a row needs from its server profile, resolved once: adapter, install, model."""

    def __init__(self, row: EvalRow, ctx: RowContext):
        sp = row.server_profile
        adapter = adapters.get(sp.framework)
        platform = adapter.platform_here()
        if platform is None:
            raise RowUnavailable(f"{adapter.name} does not run on this machine")
        self.platform: str = platform
        if sp.server_gpus > len(ctx.gpus):
            raise RowUnavailable(f"server profile {sp.name!r} needs {sp.server_gpus} GPU(s); "
                                 f"{len(ctx.gpus)} leased (pass --gpu-pool)")
        try:
            if sp.in_users_environment:  # cellbench installs nothing there: it is the clients' environment
                self.install = Installation(adapter.name, UNKNOWN_VERSION, Path(ctx.python).parent.parent,
                                            {"python": ctx.python}, source=f"the clients' Python {ctx.python}")
            else:
                self.install = install_selected(adapter.recipe_for(self.platform), pinned=ctx.pinned,
                                                allow_install=ctx.install)
            self.model = _model(row, adapter)
        except (profiles.ProfileUnavailable, LookupError) as exc:
            raise RowUnavailable(str(exc)) from exc
        if sp.boot_timeout_s is not None:
            adapter = replace(adapter, startup_timeout_s=sp.boot_timeout_s)
        if row.server_health is not None:  # "http://localhost:{port}/health": only its path is ours to poll
            adapter = replace(adapter, ready_path=urlsplit(row.server_health).path or "/")
        self.adapter = adapter
        self.profile, self.ctx, self.row = sp, ctx, row

    def command(self, port: int, workdir: Path) -> ServeCommand:
        sp, ctx = self.profile, self.ctx
        gpus = ",".join(str(g) for g in ctx.gpus[: sp.server_gpus])
        options = {**sp.options, "repo_root": str(ctx.repo_root), "python": ctx.python, "gpus": gpus,
                   "extra_args": self.row.server_extra_by_hardware.get(ctx.hardware, "")}
        serve = ServeContext(self.install, self.model, ctx.host, port, sp.split, sp.max_concurrency, self.platform,
                             options=options, workdir=workdir)
        command = self.adapter.serve(serve)
        if options["extra_args"] and not self.adapter.places_extra_args:
            command = replace(command, argv=[*command.argv, *shlex.split(options["extra_args"])])
        env = {**command.env, **ctx.auto_env, **sp.env}
        if sp.in_users_environment:
            env["PATH"] = path_with(ctx.python, command.env)
        if sp.server_gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        return replace(command, env=env, cwd=command.cwd or ctx.repo_root)

    def port(self) -> int:
        if self.ctx.port == 0:
            return free_port(self.ctx.host)
        return self.ctx.port or self.adapter.default_port


def _asr_device(row: EvalRow, ctx: RowContext) -> str:
    """`{asr_gpu}`: the GPU leased beyond the server's, as `cuda:N`, or `cpu` when there is none."""
    spare = ctx.gpus[row.server_profile.server_gpus:]
    return f"cuda:{spare[0]}" if spare else "cpu"


def _max_samples(row: EvalRow, smoke: int | None) -> int | str:
    """The row's sample count, lowered to N under `--smoke N` (never raised by it)."""
    caps = [n for n in (smoke, row.max_samples) if n]
    return min(caps) if caps else ""


def sanity(result: Any) -> str | None:
    """Why a client's result cannot be trusted, or None. Only run health is judged here, never the
    model's quality: a model that answers everything wrong still refreshes its row."""
    if not isinstance(result, dict) or not isinstance(result.get("summary"), dict):
        return "result has no summary block"
    summary = result["summary"]
    total = summary.get("total_samples")
    failed = summary.get("failed_requests", result.get("speed", {}).get("failed_requests"))
    if isinstance(total, int) and total <= 0:
        return "result covers no samples"
    if isinstance(total, int) and isinstance(failed, int) and failed * 2 > total:
        return f"{failed} of {total} requests failed"
    return None


def _round(row: EvalRow, server: _Server, ctx: RowContext, k: int, launch: Launcher) -> dict:
    round_dir = ctx.run_dir / row.id / f"round_{k}"
    out_dir = round_dir / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    server_log, client_log = round_dir / "server.log", round_dir / "client.log"
    info: dict[str, Any] = {"round": k, "status": "fail", "dir": str(round_dir), "server_log": str(server_log),
                            "client_log": str(client_log)}
    port = server.port()
    command = server.command(port, round_dir)
    info["server"] = {"framework": server.adapter.name, "version": server.install.version, "port": port,
                      "command": {**command.to_json(), **command.setup_json()}}
    log = ctx.log or RunLog(ctx.run_dir / RUN_LOG)
    log.stage(row.id, f"START round {k}: {server.adapter.name} server on {ctx.host}:{port}")
    with log.following(row.id, {"server": server_log, "client": client_log}):
        return _serve_and_run(row, server, ctx, k, launch, info, command, log)


def _serve_and_run(row: EvalRow, server: _Server, ctx: RowContext, k: int, launch: Launcher, info: dict,
                   command: ServeCommand, log: RunLog) -> dict:
    round_dir = ctx.run_dir / row.id / f"round_{k}"
    out_dir, server_log, client_log = round_dir / "out", round_dir / "server.log", round_dir / "client.log"
    port = info["server"]["port"]
    try:
        running = launch(command, server.adapter, ctx.host, port, server_log)
    except ServerStartError as exc:
        log.stage(row.id, f"server did not start: {exc}")
        return {**info, "reason": f"server boot: {exc}", "fail_excerpt": excerpt(server_log)}
    try:
        info["server"]["ready_after_s"] = running.ready_after_s
        log.stage(row.id, f"server ready after {running.ready_after_s:.1f} s")
        listed, naming = list_models(running.base_url), server.adapter.naming_for(server.model, server.install)
        names = {server.model.served_id, *naming.other_ids}
        if listed is not None and naming.lists_served and not names.intersection(listed):
            return {**info, "reason": f"wrong model: server lists {list(listed)}, not {server.model.served_id!r}"}
        values = {"python": ctx.python, "host": ctx.host, "port": port, "output_dir": out_dir,
                  "max_samples": _max_samples(row, ctx.smoke),
                  "model": server.model.served_id, "hf_model_id": row.hf_model_id, "repo_root": ctx.repo_root,
                  "row_id": row.id, "round": k, "asr_gpu": _asr_device(row, ctx)}
        argv = row.client_argv(values, smoke=ctx.smoke)
        env = {**os.environ, **ctx.auto_env, "OUTPUT_DIR": str(out_dir), "PATH": path_with(ctx.python, {})}
        log.stage(row.id, f"client running: {shlex.join(argv)}")
        info["client"] = run_client(argv, ctx.repo_root, env, client_log, row.timeout_s)
        log.stage(row.id, f"client exit {info['client']['returncode']} after {info['client']['duration_s']:.0f} s")
    finally:
        stopped = running.stop()
        info["server"]["exit"] = {"returncode": stopped.returncode, "signal": stopped.signal,
                                  "stopped_by_us": stopped.stopped_by_us}
    client = info["client"]
    if client.get("error") or client["timed_out"] or client["returncode"] != 0:
        why = client.get("error") or (f"client timed out after {row.timeout_s:g} s" if client["timed_out"]
                                      else f"client exit {client['returncode']}")
        return {**info, "reason": why, "fail_excerpt": excerpt(client_log, server_log)}
    return _read_result(row, info, out_dir / row.result_json)


def _read_result(row: EvalRow, info: dict, path: Path) -> dict:
    info["result_json"] = str(path)
    if not path.is_file():
        wrote = sorted(p.name for p in path.parent.iterdir())
        return {**info, "reason": f"result.json missing: {path.name} (client wrote {wrote})"}
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {**info, "reason": f"result.json unreadable: {exc}"}
    problem = sanity(result)
    if problem:
        return {**info, "reason": f"sanity: {problem}"}
    values, cells = {}, {}
    for column, spec in row.cells.items():
        try:
            values[column] = spec.values(result)
            cells[column] = spec.render(values[column])
        except KeyError as exc:
            return {**info, "reason": f"column {column}: {exc.args[0]}"}
        except ValueError as exc:
            return {**info, "reason": f"column {column}: format error: {exc}"}
    return {**info, "status": "ok", "values": values, "cells": cells}


def spread(rounds: list[dict]) -> dict[str, dict]:
    """Per column and value: every round's value and, where numeric, mean, sample stdev, min, max."""
    out: dict[str, dict] = {}
    for column in rounds[0]["values"]:
        out[column] = {}
        for alias in rounds[0]["values"][column]:
            series = [r["values"][column][alias] for r in rounds]
            entry: dict[str, Any] = {"values": series}
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in series):
                entry.update(mean=statistics.fmean(series), min=min(series), max=max(series),
                             stdev=statistics.stdev(series) if len(series) > 1 else 0.0)
            out[column][alias] = entry
    return out


def clean_mean(entry: dict) -> Any:
    """The mean a table cell shows. Counts (every round an integer) average to one decimal, and to an
    integer when that is exact: `{v}/{t}` gives "4/4" or "4.3/5", never "4.333333333333333/5.0"."""
    mean = entry["mean"]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in entry["values"]):
        mean = round(mean, 1)
        return int(mean) if mean == int(mean) else mean
    return mean


def run_signature(row: EvalRow) -> tuple:
    """Rows with equal signatures would run the very same client against the very same server."""
    return (row.server_profile.name, row.hf_model_id, row.client, row.max_samples, row.timeout_s)


def _shared_round(row: EvalRow, ctx: RowContext, k: int) -> dict | None:
    """Another row's round k with this row's signature, re-read for this row's cells."""
    earlier = (ctx.shared_rounds or {}).get((run_signature(row), k))
    if earlier is None:
        return None
    info = {key: value for key, value in earlier.items() if key not in ("values", "cells", "reason", "status")}
    info["shared_with"] = earlier.get("shared_with", earlier["row"])
    client = info.get("client") or {}
    if "result_json" not in earlier or client.get("returncode") != 0:
        return {**info, "status": "fail", "reason": earlier["reason"]}
    return _read_result(row, info, Path(earlier["result_json"]).parent / row.result_json)


def row_edit(row: EvalRow, hardware: str, prefix: str, cells: dict[str, str], note: str = "",
             mean_of: int = 1) -> RowEdit:
    """The table edit a row's result makes; its model's names keep it to this model's rows."""
    return RowEdit(row_id=row.id, locate=Locator(**asdict(row.locate)), hardware=hardware, source_prefix=prefix,
                   cells=cells, source_note=note, new_row=row.new_row, model=row.model_hint,
                   aliases=row.other_model_names, mean_of=mean_of)


def row_claim(row: EvalRow) -> Claim:
    """What the row says about the table row it will write, to check it against the other rows."""
    return Claim(row.id, Locator(**asdict(row.locate)), row.model_hint, row.other_model_names, row.new_row)


def run_row(row: EvalRow, ctx: RowContext, launch: Launcher) -> RowRun:
    """All rounds of one row (raises RowUnavailable before starting anything when it cannot run here)."""
    server = _Server(row, ctx)
    run = RowRun(row.id, gpus=list(ctx.gpus[: row.server_profile.server_gpus]))
    for k in range(1, ctx.rounds + 1):
        outcome = _shared_round(row, ctx, k)
        if outcome is None:
            outcome = {"row": row.id, **_round(row, server, ctx, k, launch)}
            if ctx.shared_rounds is not None:
                ctx.shared_rounds[(run_signature(row), k)] = outcome
        run.rounds.append(outcome)
        if outcome["status"] != "ok":
            run.reason = f"round {k}: {outcome['reason']}"
            run.excerpt = outcome.get("fail_excerpt", "")
            return run
    run.spread = spread(run.rounds)
    if ctx.table_from == "mean" and ctx.rounds > 1:
        try:
            means = {column: {alias: clean_mean(entry) for alias, entry in aliases.items()}
                     for column, aliases in run.spread.items()}
            run.cells = {column: row.cells[column].render(means[column]) for column in row.cells}
        except (KeyError, ValueError) as exc:
            run.reason = f"cannot average the rounds: a value is not numeric or does not format ({exc})"
            return run
        run.source_note = f"(n={ctx.rounds} mean)"
    else:
        run.cells = dict(run.rounds[0]["cells"])
    run.status = "ok"
    return run
