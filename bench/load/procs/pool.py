"""`run_level_procs`: one level on N worker processes, each with its own event loop.

The parent starts the workers (multiprocessing's `spawn`: fresh interpreters, never a `fork` of
pytest's threaded process), runs the level's warm-up itself meanwhile (sequential, kept apart),
waits until every worker is ready, and gives them one start time. That start time, the level's
deadline and every timestamp in the records are `time.perf_counter()` values, which compare
across processes: on Linux perf_counter is `clock_gettime(CLOCK_MONOTONIC)` (see
`time.get_clock_info("perf_counter")`), one clock for the whole system since boot, and on macOS
it is `mach_absolute_time()`, system-wide too; `tests/load/test_client_procs.py` checks that a
child's reading falls between two of the parent's.

While the workers run, the parent answers their "is the server gone?" (it owns the server
handle), adds their progress into the level's, and collects their records. What stops a level
stops every worker, as it stops a single process: the deadline (the same perf_counter value in
every worker), the hang watchdog (each worker's, over its own requests; with the default request
timeout below the watchdog's, a worker only goes quiet when the whole server does), a server
gone (the parent probes its server handle as a single process does and tells every worker; a
worker that lost a connection asks at once), and interrupts (Ctrl-C,
SIGTERM, pytest-timeout's signal in the parent: each worker is sent SIGINT, and what they finished
comes back on a KeyboardInterrupt as the `LevelInterrupted` that carries it, as a single
process keeps it). Once one worker
has stopped early, the others get `PEER_GRACE_S` to stop on their own, then are interrupted. No
worker outlives the level: the parent waits for each, then terminates and kills what is left,
and a worker dies with its parent (see `bench.load.procs.worker`).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from bench.core.level_run import LevelConfig, LevelInterrupted, LevelRun, Progress, arrived
from bench.host.cpus import placement
from bench.load.procs import channel
from bench.load.procs.merge import WorkerReport, merge, renumbered
from bench.load.procs.plan import ProcPlan
from bench.load.procs.split import Share, split, worker_config, worker_prompts
from bench.load.procs.worker import LevelFn, WorkerSpec, main
from bench.load.runner import run_level
from bench.setup.prompts import Prompt

_perf = time.perf_counter
READY_TIMEOUT_S = 120.0  # a fresh interpreter importing the load generator, on a loaded host
GO_MARGIN_S = 0.05  # the start time lies this far ahead of the "go", so every worker has it in time
PEER_GRACE_S = 5.0  # after one worker stopped early, the others' time to stop on their own
REPORT_GRACE_S = 15.0  # an interrupted worker's time to send what it finished
SILENT_S = 120.0  # a worker that sent nothing for this long in its measured phase is wedged
TICK_S = 0.25
PROBE_S = 0.25  # as bench.load.watch.ticker probes a single process's server
PROGRESS_S = 1.0
_log = logging.getLogger(__name__)


class WorkerError(RuntimeError):
    """A worker process failed: a bug in the load generator, or it died; the level is lost."""


@dataclass
class _Worker:
    share: Share
    process: BaseProcess
    conn: Connection  # ready, progress and the report from the worker; go to it
    probe: Connection  # "the server is gone" to the worker, and its questions about that
    pid: int | None = None
    report: WorkerReport | None = None
    progress: Progress | None = None
    heard_at: float = field(default_factory=_perf)
    interrupted: bool = False
    lost: bool = False  # it died or failed without a report
    ended: set[Connection] = field(default_factory=set)  # its pipes that reached their end

    @property
    def running(self) -> bool:
        return self.report is None and not self.lost


def run_level_procs(cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt], plan: ProcPlan,
                    level_fn: LevelFn = run_level, *, server_pid: int | None = None) -> LevelRun:
    """Run one level on `plan.procs` processes (in this process when that is one); blocking, as
    `run_level`. `level_fn` is the level function each worker runs on its share: a module-level
    function (it is pickled by name), `run_level` by default. `server_pid`, the process behind
    `cfg.server_gone` when there is one, lets each worker see the server end without asking."""
    if cfg.open_loop is not None and plan.procs > 1:  # its schedule is one process's
        plan = ProcPlan(1, plan.cpus[:1], f"{plan.how}; an open-loop level runs on one process")
    if cfg.sessions is not None and plan.procs > 1:  # its conversations are dealt out as slots free up
        plan = ProcPlan(1, plan.cpus[:1], f"{plan.how}; a session level runs on one process")
    # One process needs no split (nor has an open-loop level any slots to split).
    shares = split(cfg.concurrency, cfg.requests, plan.procs) if plan.procs > 1 else []
    if len(shares) < 2:
        try:
            run = level_fn(cfg, prompts, warmup_prompts)
        except LevelInterrupted as exc:
            exc.level_run.client = replace(exc.level_run.client, procs=1, procs_how=plan.how)
            raise
        run.client = replace(run.client, procs=1, procs_how=plan.how)
        return run
    return _Pool(cfg, prompts, warmup_prompts, shares, plan, level_fn, server_pid).run()


class _Pool:
    def __init__(self, cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt],
                 shares: list[Share], plan: ProcPlan, level_fn: LevelFn, server_pid: int | None) -> None:
        self.cfg, self.plan, self.shares, self.server_pid = cfg, plan, shares, server_pid
        self.prompts, self.warmup_prompts, self.level_fn = prompts, warmup_prompts, level_fn
        self.workers: list[_Worker] = []
        self.arrived: list[WorkerReport] = []  # reports in the order they came: the first stop names the level's
        self.gone: str | None = None  # the server handle's reason, once it has one
        self.next_probe = 0.0
        self.t_go = 0.0
        self.started_at = time.time()
        self.first_stop: float | None = None
        self.warm: LevelRun | None = None  # the warm-up's run, which this process runs
        self.warming = False
        self.last_progress: tuple[float, int] | None = None

    def run(self) -> LevelRun:
        """The level; an interrupt that lands anywhere in it, the workers' shutdown included,
        raises the `LevelInterrupted` that carries what it finished, as `run_level` does."""
        try:
            try:
                return self._run()
            except KeyboardInterrupt:
                if not self.warming:  # the workers have what was measured: they are asked for it
                    self._interrupt_all()
                    self._collect(REPORT_GRACE_S)
                raise
            finally:
                self._close()
        except KeyboardInterrupt as exc:
            kept = self._merged(interrupted=arrived(exc))
            raise LevelInterrupted(exc, kept).with_traceback(exc.__traceback__) from None

    def _run(self) -> LevelRun:
        self._start()
        if self.cfg.warmup:  # in this process, while the workers start
            self.warming = True
            try:
                self.warm = self.level_fn(replace(self.cfg, requests=0, progress=None), (), self.warmup_prompts)
            except LevelInterrupted as exc:
                self.warm = exc.level_run  # its records are kept; no worker has begun
                raise
            self.warming = False
            self.started_at = self.warm.started_at
        if self.warm is not None and self.warm.stop_reason is not None:  # stopped in warm-up: nothing measured
            return self._merged()
        with placement.pinned(self.cfg.client_cpus):
            self._measure()
        return self._merged()

    def _merged(self, interrupted: BaseException | None = None) -> LevelRun:
        return merge(self.cfg, self.warm, self.arrived, started_at=self.started_at, t_go=self.t_go or _perf(),
                     procs=len(self.shares), procs_how=self.plan.how, interrupted=interrupted)

    # ------------------------------------------------------------ start

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for share, cpus in zip(self.shares, self.plan.cpus, strict=False):  # shares may be fewer
            spec = WorkerSpec(share.worker, os.getpid(), worker_config(self.cfg, share, cpus),
                              worker_prompts(self.prompts, share), self.level_fn, self.cfg.server_gone is not None,
                              self.server_pid)
            conn, child_conn = ctx.Pipe()
            probe, child_probe = ctx.Pipe()
            process = ctx.Process(target=main, args=(spec, child_conn, child_probe), daemon=True,
                                  name=f"cellbench-client-{share.worker + 1}-of-{len(self.shares)}")
            try:
                process.start()
            finally:
                child_conn.close()
                child_probe.close()
            self.workers.append(_Worker(share, process, conn, probe))

    def _measure(self) -> None:
        """Ready, go, then serve the workers until each has reported."""
        limit = _perf() + READY_TIMEOUT_S
        while any(w.pid is None for w in self.workers):
            if _perf() > limit:
                slow = [w.share.worker + 1 for w in self.workers if w.pid is None]
                raise WorkerError(f"client processes {slow} not ready after {READY_TIMEOUT_S:.0f} s")
            self._serve(TICK_S)
        self.t_go = _perf() + GO_MARGIN_S
        for w in self.workers:
            channel.send(w.conn, ("go", self.t_go))
            w.heard_at = self.t_go
        while any(w.running for w in self.workers):
            self._serve(TICK_S)
            now = _perf()
            if self.first_stop is not None and now - self.first_stop >= PEER_GRACE_S:
                self._interrupt_all()
            for w in self.workers:
                if w.running and not w.interrupted and now - w.heard_at > SILENT_S:
                    raise WorkerError(f"client process {w.share.worker + 1} (pid {w.pid}) sent nothing for "
                                      f"{SILENT_S:.0f} s")
        self._report_progress(final=True)

    # ------------------------------------------------------------ serving the workers

    def _serve(self, timeout: float) -> None:
        """Wait up to `timeout` for a message, a probe or a worker's end, and handle what came."""
        live = [w for w in self.workers if w.running]
        pipes = [c for w in live for c in (w.conn, w.probe) if c not in w.ended]  # an ended pipe is always "ready"
        ready = set(wait([*pipes, *(w.process.sentinel for w in live)], timeout))
        self._probe_server()
        for w in live:
            if w.probe in ready:
                self._answer_probe(w)
            if w.conn in ready:
                self._receive(w)
        for w in live:  # a worker that ended: its last message may have come with its end
            if w.running and w.process.sentinel in ready:
                while w.running and w.conn not in w.ended and w.conn.poll():
                    self._receive(w)
                if w.running:
                    w.lost = True
                    w.process.join(1.0)
                    raise WorkerError(f"client process {w.share.worker + 1} (pid {w.pid}) ended with exit code "
                                      f"{w.process.exitcode} before it reported its requests")

    def _answer_probe(self, w: _Worker) -> None:
        """A worker that saw the server's process end asks for the reason in words. Question and
        answer go as one, signals held: a worker that asked waits for its answer."""
        with channel.signals_deferred():
            try:
                w.probe.recv()
            except (EOFError, OSError):
                w.ended.add(w.probe)
                return
            self._probe_server(force=True)
            self._tell(w, self.gone)

    def _probe_server(self, force: bool = False) -> None:
        """Ask the server handle, as the single-process ticker does four times a second; once it
        says gone, tell every worker still running."""
        now = _perf()
        if self.gone is not None or self.cfg.server_gone is None or (not force and now < self.next_probe):
            return
        self.next_probe = now + PROBE_S
        self.gone = self.cfg.server_gone()
        if self.gone is not None:
            for w in self.workers:
                if w.running:
                    self._tell(w, self.gone)

    @staticmethod
    def _tell(w: _Worker, gone: str | None) -> None:
        try:
            channel.send(w.probe, ("gone", gone))
        except OSError:
            pass  # it ended meanwhile

    def _receive(self, w: _Worker) -> None:
        """One message from a worker, taken and kept with signals held: an interrupt landing
        between the two would lose a worker's report, and the records in it."""
        with channel.signals_deferred():
            try:
                kind, payload = w.conn.recv()
            except (EOFError, OSError):
                w.ended.add(w.conn)
                return  # it ended: its sentinel says how
            w.heard_at = _perf()
            if kind == "ready":
                w.pid = payload
            elif kind == "progress":
                w.progress = payload
            elif kind == "done":
                w.report = renumbered(payload, w.share)
                self.arrived.append(payload)
                if payload.stop_reason is not None and self.first_stop is None:
                    self.first_stop = _perf()
            elif kind == "failed":
                w.lost = True
        if kind == "progress":
            self._report_progress()
        elif kind == "failed":
            raise WorkerError(f"client process {w.share.worker + 1} (pid {w.pid}) failed:\n{payload}")

    def _report_progress(self, final: bool = False) -> None:
        """The level's progress from the workers' latest, at most about once a second."""
        if self.cfg.progress is None or not self.t_go:
            return
        now = _perf()
        if not final and self.last_progress is not None and now - self.last_progress[0] < PROGRESS_S:
            return
        latest = [w.progress for w in self.workers if w.progress is not None]
        events = sum(p.output_events for p in latest)
        since = self.last_progress or (self.t_go, 0)
        if final:
            since = (self.t_go, 0)
        rate = (events - since[1]) / (now - since[0]) if now > since[0] else 0.0
        self.last_progress = (now, events)
        try:
            self.cfg.progress(Progress(done=sum(p.done for p in latest), total=self.cfg.requests,
                                       failed=sum(p.failed for p in latest), output_tps=rate,
                                       elapsed_s=now - self.t_go, output_events=events))
        except Exception:  # noqa: BLE001 - as bench.load.watch.ticker: a broken callback never ends the level
            self.cfg = replace(self.cfg, progress=None)
            _log.exception("progress callback failed; disabled for the rest of the level")

    # ------------------------------------------------------------ stopping

    def _interrupt_all(self) -> None:
        """SIGINT to every worker still running: each ends its level as Ctrl-C would and reports."""
        for w in self.workers:
            if w.running and not w.interrupted and w.process.is_alive() and w.process.pid is not None:
                w.interrupted = True
                try:
                    os.kill(w.process.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

    def _collect(self, grace_s: float) -> None:
        """Serve the workers until each has reported or `grace_s` is over; a worker that died or
        failed meanwhile is left out."""
        limit = _perf() + grace_s
        while any(w.running for w in self.workers) and _perf() < limit:
            try:
                self._serve(TICK_S)
            except WorkerError as exc:  # its records are lost; the others' are kept
                _log.warning("%s", exc)

    def _close(self) -> None:
        """No worker outlives the level: a worker still waiting for its start is told to leave,
        then whatever still runs gets SIGTERM, then SIGKILL."""
        with channel.signals_deferred():
            if not self.t_go:
                for w in self.workers:
                    with contextlib.suppress(OSError):
                        w.conn.send(("stop", None))
            for w in self.workers:
                if w.process.is_alive():
                    w.process.join(0.5 if w.report is not None or not self.t_go else 0.0)
                if w.process.is_alive():
                    w.process.terminate()
            for w in self.workers:
                w.process.join(2.0)
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(2.0)
                for conn in (w.conn, w.probe):
                    conn.close()
                if w.process.exitcode is not None:
                    w.process.close()
