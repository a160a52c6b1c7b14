"""The fixtures a cell test takes, and how its verdict becomes a pytest outcome.

- `cell_config`: the cell's CellConfig, from the session's options (bench/plugins/options.py).
- `server_launcher`: a Launcher (bench.run.cell) that holds the host for the cell's whole life
  (`host_lock`) and can never leak a server: a server joins the launcher's list right after
  `Popen`, before the readiness wait, so a timeout or Ctrl-C during start still stops it.
- `enforce_verdict`: settles the cell with its CellOutcome. The pytest outcome is coarse (ok and
  degraded pass, wrong-model / all-failed / failed / oom fail, skipped skips; --strict-verdicts
  fails degraded and capped too); the fine verdict travels in the cell's CellRecord
  (bench/plugins/transport.py).
- `settle_before_call`: a fixture that finds during setup that the cell cannot run (the host
  lock timed out) settles it the same way, and its body never runs.

Servers left by a killed session are stopped when a session starts (on the controller).
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest

import adapters
from bench.base.clock import now_iso
from bench.base.paths import host_lock_path
from bench.core.result_model import NoResult, Result
from bench.core.verdicts import CellVerdict, Verdict, dominant_error
from bench.host import memlimit
from bench.host.machine import detect
from bench.host.process_groups import reap_orphans
from bench.load.progress import ProgressLine, terminal_writer
from bench.plugins import transport
from bench.plugins.budget import cell_budget
from bench.plugins.cells import cell_id_of
from bench.plugins.hooks import BENCHMARK, CellRecord
from bench.plugins.options import results_root, settings
from bench.reports import html_review
from bench.run.cell import CellConfig, CellOutcome, Launcher
from bench.run.server import ServerProcess
from bench.setup.adapter import Adapter, ServeCommand
from bench.setup.profiles import ApiKey

CELL_OUTCOME = pytest.StashKey[CellOutcome]()
SETTLED = pytest.StashKey[CellOutcome]()  # decided during setup: the body is not run
IN_CALL = pytest.StashKey[bool]()  # the test's body has started


@pytest.fixture
def cell_config(cell_id: tuple[str, str], request: pytest.FixtureRequest) -> CellConfig:
    framework, split = cell_id
    s = settings(request.config)
    return CellConfig(
        framework=framework,
        split=split,
        profile=s.profile,
        results_root=results_root(request.config),
        run_id=s.run_id,
        levels=s.levels,
        requests=s.requests,
        warmup=s.warmup,
        share_server=s.share_server,
        port=s.port,
        request_timeout_s=s.request_timeout_s,
        ready_timeout_s=s.ready_timeout_s,
        install=s.install,
        pinned=s.pinned,
        ignore_eos=s.ignore_eos,
        tools_param=s.tools_param,
        prompts_path=s.prompts_path,
        degraded_fraction=s.degraded_fraction,
        endpoint=s.endpoint,
        progress=ProgressLine(f"{framework}-{split}", terminal_writer(request.config),
                              interval_s=s.progress_interval_s),
        budget_s=cell_budget(request.node),
        budget_from=time.perf_counter(),  # this fixture runs first: the lock wait and an install count
        stall_timeout_s=s.hang_s.get(split) or None,
        memory_limit_bytes=s.memory_limit_bytes,
        skip_existing_s=s.skip_existing_s,
        cpus=s.cpus,
        client_procs=s.client_procs,
        unique_prompts=s.unique_prompts,
        load=s.load,
        keep_alive=s.keep_alive,
        api_key=s.api_key,
    )


@pytest.fixture
def enforce_verdict(request: pytest.FixtureRequest):
    """Settle the cell with its outcome, then assert its verdict as a pytest outcome."""
    return partial(enforce, request.node)


def enforce(item: pytest.Item, outcome: CellOutcome) -> None:
    item.stash[CELL_OUTCOME] = outcome
    transport.finish(item, cell_record(item, outcome))
    verdict, reason = outcome.verdict.verdict, outcome.verdict.reason
    if verdict is Verdict.SKIPPED:
        pytest.skip(reason)
    strict = settings(item.config).strict_verdicts
    failing = verdict.is_failure or (strict and verdict not in (Verdict.OK, Verdict.FIXED))
    if failing:
        where = f"\nresult: {outcome.result_path}" if outcome.result_path else ""
        pytest.fail(f"{verdict.value}: {reason}{where}", pytrace=False)


def cell_outcome(item: pytest.Item) -> CellOutcome | None:
    """The outcome `item`'s cell was settled with, on the process that ran it."""
    return item.stash.get(CELL_OUTCOME, None)


def settle_before_call(item: pytest.Item, outcome: CellOutcome) -> None:
    """Settle a test with `outcome` without running its body: its call phase reports `outcome`
    through the same path as a cell's verdict, so it is counted, journaled and in the HTML
    report. Called from inside a running body (a fixture requested there), it fails the test at once."""
    if item.stash.get(IN_CALL, False):
        pytest.fail(f"{outcome.verdict.verdict.value}: {outcome.verdict.reason}", pytrace=False)
    item.stash[SETTLED] = outcome


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    item.stash[IN_CALL] = True
    settled = item.stash.get(SETTLED, None)
    if settled is not None:  # raising here keeps pytest from running the body
        enforce(item, settled)


def cell_record(item: pytest.Item, outcome: CellOutcome) -> CellRecord:
    """What the journal, the HTML report and the terminal learn about the cell."""
    framework = cast(dict[str, Any], outcome.result).get("framework")
    cell_id = cell_id_of(item)
    where: dict[str, Any] = {}
    if cell_id is not None:  # a benchmark cell, not a plugin test's stand-in: it goes in the journal
        where = {"framework": cell_id[0], "split": cell_id[1], "model": settings(item.config).profile.results_name,
                 "machine": detect().slug, "results_root": str(results_root(item.config))}
    return CellRecord(
        kind=BENCHMARK,
        verdict=outcome.verdict.verdict.value,
        reason=outcome.verdict.reason,
        annotations=tuple(outcome.verdict.annotations),
        result_path=str(outcome.result_path) if outcome.result_path else None,
        evidence=_evidence(outcome.result),
        row=html_review.row_data(outcome.result),
        framework_version=(framework["name"], framework["version"]) if framework else None,
        **where,
    )


def _evidence(cell_result: Result | NoResult) -> dict[str, Any]:
    """What the journal shows: the dominant error and the server logs of a failure, why the cell
    is suspicious (bench.run.cell compared it with the cell's previous result), and the failure a
    `fixed` cell's adapter edit answered."""
    result = cast(dict[str, Any], cell_result)  # {} when the cell wrote no result
    evidence: dict[str, Any] = {"server_logs": [s["log"] for s in result.get("servers", []) if s.get("log")]}
    dominant = dominant_error(tuple(result.get("levels", ())))
    if dominant:
        evidence["dominant_error"] = dominant
    suspicious = result.get("verdict", {}).get("suspicious")
    if suspicious:
        evidence["suspicious"] = suspicious
    fix = result.get("verdict", {}).get("fix")
    if fix:  # the journal's Auto-Fixes section
        evidence["fix"] = {**fix, "run_id": result["run_id"]}
    return evidence


# ------------------------------------------------------------------ servers and the host lock


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    reaped = reap_orphans()
    memlimit.reap_stale()  # empty memory cgroups of sessions that are gone
    if reaped:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write_line(f"cellbench: stopped {len(reaped)} server(s) left by a killed session: {reaped}")


@pytest.fixture
def server_launcher(host_lock):
    """The launcher of one cell, which holds the host for its whole life."""
    with launching() as launch:
        yield launch


@contextmanager
def launching() -> Iterator[Launcher]:
    """A `bench.run.cell.Launcher` for the block: every server it starts is stopped when the block ends."""
    started: list[ServerProcess] = []

    def launch(command: ServeCommand, adapter: Adapter, host: str, port: int, log_path: Path,
               memory_limit_bytes: int | None = None, budget_s: float | None = None,
               stall_timeout_s: float | None = None, api_key: ApiKey | None = None) -> ServerProcess:
        server = ServerProcess(command, host=host, port=port, ready_path=adapter.ready_path,
                               startup_timeout_s=adapter.startup_timeout_s, log_path=log_path,
                               memory_limit_bytes=memory_limit_bytes, api_key=api_key)
        started.append(server)
        server.start()
        try:
            server.wait_ready(budget_s=budget_s, stall_timeout_s=stall_timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    try:
        yield launch
    finally:
        for server in reversed(started):
            server.stop()


@pytest.fixture
def host_lock(request: pytest.FixtureRequest):
    """Hold the host-wide lock for the whole cell: two cells never share a machine. The holder
    writes its pid, command line and start time into the lock file. A cell that waits
    --host-lock-timeout seconds in vain is settled `failed` (naming the holder and how long it
    has held the lock) and its body never runs; the fixture then yields None. A cell whose
    framework cannot run on this platform starts nothing: it skips without waiting for the lock."""
    if _runs_nothing_here(request):
        yield None
        return
    timeout = float(settings(request.config).host_lock_timeout_s)
    path = host_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        if not _wait_for_lock(handle, timeout):
            reason = f"host busy: waited {timeout:g} s for the host lock {path}, held by {_holder(handle)}"
            settle_before_call(request.node, CellOutcome(CellVerdict(Verdict.FAILED, reason), None))
            yield None
            return
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_holder_record(request.config)) + "\n")
        handle.flush()
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _runs_nothing_here(request: pytest.FixtureRequest) -> bool:
    cell = cell_id_of(request.node)
    if cell is None or settings(request.config).endpoint:
        return False
    adapter = adapters.registry().get(cell[0])
    return adapter is not None and adapter.platform_here() is None


def _wait_for_lock(handle, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)


def _holder_record(config: pytest.Config) -> dict:
    """What the lock file says about the process holding it. An xdist worker's own command line is
    `python -c ...`, which tells a waiting user nothing: it names the session's command instead."""
    argv = getattr(config, "workerinput", {}).get("mainargv") or sys.orig_argv
    command, key = shlex.join(argv), settings(config).api_key
    return {"pid": os.getpid(), "command": key.redact(command) if key else command, "since": time.time(),
            "started_at": now_iso()}


def _holder(handle) -> str:
    """'pid P (command) for 2 min 5 s', from the lock file the holder wrote."""
    handle.seek(0)
    text = handle.read().strip()
    try:
        record = json.loads(text)
        command = record["command"] if len(record["command"]) <= 200 else record["command"][:197] + "..."
        return f"pid {record['pid']} ({command}) for {_duration(time.time() - float(record['since']))}"
    except (ValueError, KeyError, TypeError):  # a holder still writing it, or a file of another format
        return f"an unknown holder (the lock file reads {text!r})"


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
