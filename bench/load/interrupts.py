"""Interrupts that must end a level wherever they land.

An interrupt is a BaseException that is neither an error nor a cancellation: KeyboardInterrupt
(Ctrl-C, or SIGTERM/SIGHUP turned into one by bench.plugins.signals), pytest-timeout's `Failed`.
A signal handler raises it wherever the main thread is: in a task (it propagates), but also in a
loop callback or a transport (asyncio only logs it), in the HTTP client's receive callback (handed
to the request that was reading, bench.load.http.connection), in a finalizer or weakref callback
(Python only reports it as unraisable), or in a task nobody awaits (one a callback started).
`Interrupts` catches it in each of those places, cancels the level's main task and raises it
again once the loop has unwound.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def is_interrupt(exc: BaseException) -> bool:
    """A BaseException that is neither an error nor a cancellation: pytest's Failed, KeyboardInterrupt."""
    return not isinstance(exc, (Exception, asyncio.CancelledError))


def reraise_interrupt(exc: BaseException) -> None:
    """An error whose cause or context is an interrupt (one that landed in the receive callback,
    inside the C parser, comes back wrapped): the interrupt must still end the level."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if is_interrupt(cause):
            raise cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__


class Interrupts:
    """Collects the interrupts of one level and turns each into the end of the level."""

    def __init__(self) -> None:
        self.caught: list[BaseException] = []  # interrupts caught where they could not propagate
        self._main: asyncio.Task | None = None

    def catch(self, exc: BaseException) -> None:
        """An interrupt that landed where it cannot propagate: end the level, then raise it."""
        self.caught.append(exc)
        if self._main is not None and not self._main.done():
            self._main.cancel()

    def raise_caught(self) -> None:
        """Raise the first interrupt caught, if any (one that landed in the loop's shutdown or a
        finalizer, where nothing could raise it)."""
        if self.caught:
            raise self.caught[0]

    async def guard(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` as the level's main task, with a loop exception handler that hands
        interrupts to `catch`; a cancellation caused by a caught interrupt raises the interrupt."""
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        if self.caught:  # it landed before the loop ran
            coro.close()
            raise self.caught[0]

        def on_loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if exc is not None and is_interrupt(exc):
                self.catch(exc)
            else:
                loop.default_exception_handler(context)

        def task_factory(loop: asyncio.AbstractEventLoop, task_coro: Coroutine, **kwargs: Any) -> asyncio.Task:
            task = asyncio.Task(task_coro, loop=loop, **kwargs)
            task.add_done_callback(self._task_done)
            return task

        loop.set_exception_handler(on_loop_exception)
        loop.set_task_factory(task_factory)  # type: ignore[arg-type]
        try:
            return await coro
        except asyncio.CancelledError:
            self.raise_caught()
            raise

    def _task_done(self, task: asyncio.Task) -> None:
        """A task that an interrupt ended and that nobody awaits (a callback's, a library's): the
        interrupt would otherwise surface only when that task is collected, after the level ran to
        its end."""
        exc = None if task.cancelled() else task.exception()
        if exc is not None and is_interrupt(exc):
            self.catch(exc)

    @contextlib.contextmanager
    def unraisable(self) -> Iterator[None]:
        """Hand interrupts that Python could only report as unraisable to `catch`.

        A signal handler's exception raised inside a weakref callback or a finalizer is "ignored":
        the level's GC (a full collection, a dying task leaving asyncio's WeakSet of tasks) is
        where pytest-timeout's signal lands now and then on a loaded machine, and the level would
        then run to its end as if no timeout had fired."""
        previous = sys.unraisablehook

        def hook(unraisable: Any) -> None:
            if unraisable.exc_value is not None and is_interrupt(unraisable.exc_value):
                self.catch(unraisable.exc_value)
            else:
                previous(unraisable)

        sys.unraisablehook = hook
        try:
            yield
        finally:
            sys.unraisablehook = previous


def retrieve(fut: asyncio.Future) -> None:
    """Mark an abandoned future's outcome as seen (no "exception was never retrieved" noise)."""
    if not fut.cancelled():
        fut.exception()


def uncancel() -> None:
    """Python 3.11+: a cancellation we asked for and handled must not count as pending."""
    task = asyncio.current_task()
    if task is not None and hasattr(task, "uncancel"):
        task.uncancel()
