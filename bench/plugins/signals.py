"""SIGTERM and SIGHUP end a pytest session the way Ctrl-C does.

Python turns SIGINT into KeyboardInterrupt, and pytest treats that as an interrupt: the running
test stops where it is, its fixtures are torn down (the server launcher stops every server it
started), the session finishes (the journal's status is `partial`) and pytest exits with code 2.
SIGTERM (`kill`, a service manager, a CI runner's cancel) and SIGHUP (a closed terminal) would
otherwise end the process at once and leave its servers running. `install` makes both raise
`Terminated`, a KeyboardInterrupt, so they take the same path; `pytest_configure` installs it
and `pytest_unconfigure` puts the previous handlers back.

A cell interrupted after bench.run.cell wrote its partial result finds that outcome on the
interrupt (`cell_outcome`): the cell reports it as any cell reports its verdict (counted,
journaled, in the HTML report), then the session stops as interrupted (exit code 2, journal
status `partial`).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import pytest

from bench.plugins.verdicts import enforce

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
RESTORE = pytest.StashKey[Callable[[], None]]()


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM or SIGHUP (`signum`)."""

    def __init__(self, signum: int):
        super().__init__(f"received {signal.Signals(signum).name}")
        self.signum = signum


def install() -> Callable[[], None]:
    """Make SIGTERM and SIGHUP raise `Terminated` in the main thread; returns the function that
    puts the previous handlers back. Only the first signal raises: one that follows while the
    session stops its servers and writes its files is ignored, so it cannot cut that short (a
    supervisor's SIGKILL still ends the process). Outside the main thread, where Python cannot
    set handlers, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    received: list[int] = []
    pid = os.getpid()

    def handler(signum: int, frame: object) -> None:
        if os.getpid() != pid:  # a forked child inherited the handler: die as it would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if received:
            return
        received.append(signum)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)  # None: set outside Python

    return restore


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESTORE] = install()


def pytest_unconfigure(config: pytest.Config) -> None:
    restore = config.stash.get(RESTORE, None)
    if restore is not None:
        restore()
        del config.stash[RESTORE]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except KeyboardInterrupt as exc:
        outcome = getattr(exc, "cell_outcome", None)
        if outcome is None:
            raise
        item.session.shouldstop = f"cellbench: {str(exc) or type(exc).__name__}"
        enforce(item, outcome)
        return None
