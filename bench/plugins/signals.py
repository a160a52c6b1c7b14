"""SIGTERM and SIGHUP end a pytest session the way Ctrl-C does.

Python turns SIGINT into KeyboardInterrupt, and pytest treats that as an interrupt: the running
test stops where it is, its fixtures are torn down (the server launcher stops every server it
started), the session finishes (the journal's status is `partial`) and pytest exits with code 2.
SIGTERM (`kill`, a service manager, a CI runner's cancel) and SIGHUP (a closed terminal) would
otherwise end the process at once and leave its servers running. `install` makes both raise
`Terminated`, a KeyboardInterrupt, so they take the same path.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


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
