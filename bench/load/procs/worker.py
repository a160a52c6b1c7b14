"""One worker process of a split level: its own event loop, its share of the slots and requests.

Started with multiprocessing's `spawn` method (a fresh interpreter: nothing of the parent's
threads, locks or event loop comes along, as it would with `fork` from pytest's threaded
process), it tells the parent it is ready, waits for the shared start time, runs the level
function on its share (`bench.load.run_level` by default, whichever loop that runs) and sends
its raw records back. The callables a level config carries cannot cross the process boundary,
so the worker fills them in: progress goes to the parent about once a second, and "is the server
gone?" is answered with what the parent, which owns the server, says (`_ask_parent`).

It never outlives its parent: on Linux the kernel kills it when the parent dies
(PR_SET_PDEATHSIG), and everywhere a thread checks four times a second that its parent is still
the one that started it. SIGINT, SIGTERM and SIGHUP end its level as Ctrl-C ends a single
process's: what finished is kept and sent back; later signals are ignored, so a second one cannot
cut the report short.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection

import psutil

from bench.core.level_run import LevelConfig, LevelInterrupted, LevelRun, Progress
from bench.load.procs import channel
from bench.load.procs.merge import WorkerReport
from bench.load.watch.health import unmeasured_health
from bench.setup.prompts import Prompt

LevelFn = Callable[[LevelConfig, Sequence[Prompt], Sequence[Prompt]], LevelRun]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1
PARENT_CHECK_S = 0.25


@dataclass
class WorkerSpec:
    """What the parent hands a worker (pickled into the new interpreter)."""

    worker: int
    parent_pid: int
    cfg: LevelConfig  # its share (bench.load.procs.split.worker_config), callables unset
    prompts: list[Prompt]
    level_fn: LevelFn  # a module-level function, pickled by name
    probe: bool  # the level has a server to probe
    server_pid: int | None = None  # its process, when the parent knows it


def main(spec: WorkerSpec, conn: Connection, probe_conn: Connection) -> None:
    """The worker process's entry point (multiprocessing's target)."""
    _die_with_parent(spec.parent_pid)
    _stop_on_signals()
    try:
        try:
            channel.send(conn, ("ready", os.getpid()))
            message = channel.recv(conn)
        except (EOFError, OSError):  # the parent is gone
            return
        if message[0] != "go":  # the level ended before its measured phase
            return
        time.sleep(max(0.0, message[1] - time.perf_counter()))  # the shared start: one clock for all
        cfg = replace(spec.cfg, progress=_progress_to(conn),
                      server_gone=_ask_parent(probe_conn, spec.server_pid) if spec.probe else None)
        run = spec.level_fn(cfg, spec.prompts, ())
        report = WorkerReport(spec.worker, os.getpid(), run.records, run.partial, run.stop_reason, run.client)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, or the parent ending the level
        kept = exc.level_run if isinstance(exc, LevelInterrupted) else None
        report = WorkerReport(spec.worker, os.getpid(), kept.records if kept else [], True,
                              kept.stop_reason if kept else f"interrupted ({exc})",
                              kept.client if kept else unmeasured_health(spec.cfg.client_cpus is not None),
                              interrupted=True)
    except BaseException:  # noqa: BLE001 - a bug (a cancellation included): the parent raises it with this text
        _ignore_signals()
        with contextlib.suppress(OSError):
            channel.send(conn, ("failed", traceback.format_exc()))
        return
    _ignore_signals()
    with contextlib.suppress(OSError):
        channel.send(conn, ("done", report))


def _progress_to(conn: Connection) -> Callable[[Progress], None]:
    def send(progress: Progress) -> None:
        channel.send(conn, ("progress", progress))

    return send


def _ask_parent(probe_conn: Connection, server_pid: int | None) -> Callable[[], str | None]:
    """`server_gone` for the worker. The parent owns the server handle and says when the server is
    gone: it tells every worker as soon as its own probe (four times a second) finds it, and
    answers a worker that asks, which the worker waits for, so that a lost connection stops it at
    once, as it stops a single process, and no request goes to a server known gone. A worker
    that knows the server's pid looks at that process itself (a /proc read) and asks only once it
    has ended: its routine probes then never wait for the parent, whose answer comes as late as
    the host lets the parent run. Without the pid every probe asks. Once gone, always gone."""
    gone: list[str] = []
    server = _process(server_pid)

    def take(message: tuple[str, str | None]) -> None:
        if message[1] is not None and not gone:
            gone.append(message[1])

    def server_gone() -> str | None:
        if gone:
            return gone[0]
        try:
            with channel.signals_deferred():
                while probe_conn.poll():
                    take(probe_conn.recv())
                if not gone and (server is None or not _running(server)):
                    probe_conn.send("ask")
                    take(probe_conn.recv())
        except (EOFError, OSError):
            return None
        return gone[0] if gone else None

    return server_gone


def _process(pid: int | None) -> psutil.Process | None:
    try:
        return None if pid is None else psutil.Process(pid)
    except psutil.Error:
        return None


def _running(server: psutil.Process) -> bool:
    """The process has not ended (a zombie has: only its parent's wait is missing)."""
    try:
        return server.is_running() and server.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _stop_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt once; later ones are ignored. SIGINT is
    set explicitly: a parent that ignores it (started in the background) would pass that on."""
    fired: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if fired:
            return
        fired.append(signum)
        raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def _ignore_signals() -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _die_with_parent(parent_pid: int) -> None:
    """Never outlive the parent: the kernel's parent-death signal where there is one (Linux), and
    a thread that exits the process once the parent is no longer there."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before the signal was armed
        os._exit(1)

    def watch() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # they are for the main thread
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
