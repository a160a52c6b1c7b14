"""Ctrl-C, SIGTERM and SIGHUP: one interrupt ends the session the same way, and its closing work
(stopping servers, the journal, the reports) is never cut short by another.

Python turns SIGINT into KeyboardInterrupt, and pytest treats that as an interrupt: the running
test stops where it is, its fixtures are torn down (the server launcher stops every server it
started), the session finishes (the journal's status is `partial`) and pytest exits with code 2.
SIGTERM (`kill`, a service manager, a CI runner's cancel) and SIGHUP (a closed terminal) would
otherwise end the process at once and leave its servers running. `install` makes all three go
through one handler: the first raises (`Terminated`, a KeyboardInterrupt, for SIGTERM and SIGHUP),
so they take the same path; `pytest_configure` installs it and `pytest_unconfigure` puts the
previous handlers back.

After that first interrupt, and from the moment the session starts its closing work
(`pytest_sessionfinish`) without one, no signal raises: a second Ctrl-C prints one line saying
that the session is writing its journal and reports, and waits for them; a third quits at once
(exit code 2, its servers killed, the journal and reports as far as they got). A repeated SIGTERM
or SIGHUP (a supervisor repeating itself) is ignored; its SIGKILL still ends the process. While a
cell's report is logged (its verdict line, its journal entry: `pytest_runtest_logreport`) an
interrupt waits until that is done, so a Ctrl-C as the verdict line prints never loses the cell's
journal entry.

A cell interrupted after bench.run.cell wrote its partial result raises `CellInterrupted`, a
KeyboardInterrupt that carries that outcome: the cell reports it as any cell reports its verdict (counted,
journaled, in the HTML report), then the session stops as interrupted (exit code 2, journal
status `partial`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from bench.core.level_run import interrupt_text
from bench.host.process_groups import stop_own
from bench.plugins.verdicts import enforce
from bench.run.config import CellInterrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RESTORE = pytest.StashKey[Callable[[], None]]()
WAITING = ("cellbench: Ctrl-C: still stopping servers and writing the journal and reports; "
           "press Ctrl-C once more to quit without them")
FORCED = "cellbench: Ctrl-C again: quitting now; the journal and reports may be incomplete"


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM or SIGHUP (`signum`)."""

    def __init__(self, signum: int):
        super().__init__(f"received {signal.Signals(signum).name}")
        self.signum = signum


class _State:
    """What this process's handler has seen: the interrupt, whether the closing work has begun, a
    Ctrl-C told to wait, and an interrupt held back until a report is logged."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.interrupted = False
        self.closing = False
        self.told_to_wait = False
        self.holding = 0  # depth of `held()`
        self.held_signal: int | None = None

    def handle(self, signum: int, frame: object) -> None:
        if os.getpid() != self.pid:  # a forked child inherited the handler: die as it would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if not (self.interrupted or self.closing):
            if self.holding:
                self.held_signal = self.held_signal or signum
                return
            self.interrupted = True
            raise _interrupt(signum)
        if signum != signal.SIGINT:
            return  # a repeated SIGTERM or SIGHUP
        if not self.told_to_wait:
            self.told_to_wait = True
            _say(WAITING)
            return
        _say(FORCED)
        with contextlib.suppress(Exception):
            stop_own()  # this session's servers: nothing else would stop them now
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(pytest.ExitCode.INTERRUPTED)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """An interrupt arriving inside waits until the block is over, then raises."""
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
        if not self.holding and self.held_signal is not None and not (self.interrupted or self.closing):
            signum, self.held_signal = self.held_signal, None
            self.interrupted = True
            raise _interrupt(signum)


def _interrupt(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _say(line: str) -> None:
    """One line on stderr, written straight to its descriptor: a handler may have interrupted a
    write to the buffered streams, which must not be re-entered."""
    with contextlib.suppress(OSError):
        os.write(2, f"\n{line}\n".encode())


_STATE: _State | None = None  # the installed handler's, in this process


def install() -> Callable[[], None]:
    """Route SIGINT, SIGTERM and SIGHUP through one handler in the main thread (the module's
    docstring says what each does); returns the function that puts the previous handlers back.
    Outside the main thread, where Python cannot set handlers, it does nothing."""
    global _STATE
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    state, outer = _State(), _STATE
    previous = {sig: signal.signal(sig, state.handle) for sig in SIGNALS}
    _STATE = state

    def restore() -> None:
        global _STATE
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_DFL if old is None else old)  # None: set outside Python
        _STATE = outer

    return restore


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold an interrupt back until the block is over (nothing to hold without `install`)."""
    if _STATE is None:
        yield
        return
    with _STATE.held():
        yield


def closing() -> None:
    """The session's closing work begins: from now on no signal raises (the module's docstring)."""
    if _STATE is not None:
        _STATE.closing = True


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RESTORE] = install()


def pytest_unconfigure(config: pytest.Config) -> None:
    restore = config.stash.get(RESTORE, None)
    if restore is not None:
        restore()
        del config.stash[RESTORE]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_logreport(report: pytest.TestReport):
    with held():  # the verdict line and the journal entry (bench.plugins.recorder) are written whole
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    closing()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        return (yield)
    except KeyboardInterrupt as exc:
        if not isinstance(exc, CellInterrupted):
            raise
        item.session.shouldstop = f"cellbench: {interrupt_text(exc)}"
        enforce(item, exc.outcome)
        return None
