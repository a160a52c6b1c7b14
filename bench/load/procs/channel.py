"""Messages between the parent and its workers, safe from signals landing halfway.

A signal handler that raises (Ctrl-C's KeyboardInterrupt, SIGTERM's, pytest-timeout's SIGALRM)
can run between any two bytecodes of the main thread, inside `Connection.send` too: half a
message would leave the pipe unreadable for good, and the records of the level with it. Blocking
the signals in the main thread is not enough, because the kernel then delivers them to another
thread (a resource sampler, an executor's) and Python still runs the handler in the main thread.
So for the length of one message the handlers are swapped for one that only notes the signal,
and each noted signal is raised again, to the real handler, once the message is through.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

DEFERRED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Note the stop signals inside the block; raise them again, in order, after it."""
    if threading.current_thread() is not threading.main_thread():  # handlers run in the main thread only
        yield
        return
    noted: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for sig in DEFERRED:
            previous[sig] = signal.signal(sig, lambda signum, frame: noted.append(signum))
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


def send(conn: Connection, message: Any) -> None:
    with signals_deferred():
        conn.send(message)


def recv(conn: Connection) -> Any:
    """One whole message (the caller knows one is there, or means to wait for it)."""
    with signals_deferred():
        return conn.recv()
