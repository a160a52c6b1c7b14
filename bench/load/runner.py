"""`run_level`: one level, blocking, on an event loop of its own.

The loop is uvloop when importable (cheaper per read than asyncio's own). Around the loop:
the process is pinned to `LevelConfig.client_cpus` when given, the garbage collector is kept from
traversing the caller's heap, and interrupts end the level wherever they land
(`bench.load.interrupts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, Generic, TypeVar

from bench.core.level_run import LevelConfig, LevelInterrupted, LevelRun
from bench.host.cpus import placement
from bench.load.arrivals import OpenLoopLevel
from bench.load.closed_loop import ClosedLoopLevel
from bench.load.interrupts import Interrupts
from bench.load.sessions import SessionLevel
from bench.setup.prompts import Prompt

try:
    import uvloop
except ImportError:  # optional (the `fast` extra)
    uvloop = None  # type: ignore[assignment]

EVENT_LOOP = "uvloop" if uvloop is not None else "asyncio"
T = TypeVar("T")


def run_level(cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> LevelRun:
    """Run one level to completion (or until it stops early, see `LevelRun.stop_reason`); blocking.

    An interrupt propagates: pytest-timeout's Failed as it is, a KeyboardInterrupt as the
    `LevelInterrupted` that carries what the level finished, so the caller may keep it."""
    ol = cfg.open_loop
    if (ol is None and cfg.concurrency < 1) or cfg.requests < 0 or cfg.warmup < 0:
        raise ValueError(f"bad level: concurrency={cfg.concurrency}, requests={cfg.requests}, warmup={cfg.warmup}")
    if ol is not None and (not ol.rate > 0 or not ol.burstiness > 0 or (ol.max_concurrency or 1) < 1):
        raise ValueError(f"bad open-loop level: {ol}")
    if cfg.requests and not prompts and cfg.sessions is None:  # a session level's turns are its conversations'
        raise ValueError("no prompts for the measured requests")
    if cfg.warmup and not warmup_prompts:
        raise ValueError("no warm-up prompts")
    kind = SessionLevel if cfg.sessions is not None else ClosedLoopLevel if ol is None else OpenLoopLevel
    level = kind(cfg, prompts, warmup_prompts)
    interrupts = Interrupts()
    try:
        with placement.pinned(cfg.client_cpus), interrupts.unraisable(), _quiet_gc():
            run = _run_on_own_loop(interrupts.guard(level.run()))
        interrupts.raise_caught()  # it landed where nothing could raise it (the loop's shutdown, a finalizer)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP made one (bench.plugins.signals)
        raise LevelInterrupted(exc, level.interrupted_run(exc)).with_traceback(exc.__traceback__) from None
    return run


def _run_on_own_loop(coro: Coroutine[Any, Any, T]) -> T:
    runner = getattr(asyncio, "Runner", None)
    if runner is None:  # Python 3.10: no loop_factory; the default loop
        return asyncio.run(_boxed(coro)).value
    with runner(loop_factory=uvloop.new_event_loop if uvloop else None) as r:
        return r.run(_boxed(coro)).value


class _Box(Generic[T]):
    """The main task's result, kept out of the task's repr: asyncio.Runner formats that repr on its
    way out (restoring the SIGINT handler builds an enum error message naming its handler, which
    holds the task), and a LevelRun's repr is every chunk time of the level: about 1 us of CPU
    per chunk, after the level but in the process's time all the same."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


async def _boxed(coro: Coroutine[Any, Any, T]) -> _Box[T]:
    return _Box(await coro)


@contextlib.contextmanager
def _quiet_gc() -> Iterator[None]:
    """Collect once, then freeze what exists, so that the level's full (gen-2) collections
    traverse only the objects the level creates: a full collection of a pytest-sized heap pauses
    the loop for tens of milliseconds (23 ms at 5,000 chunks/s on a 2-core machine), which lands
    in schedule lag. Skipped when the caller manages frozen objects itself."""
    if gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
