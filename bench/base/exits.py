"""How a process ended, in words a reader of a verdict understands."""

from __future__ import annotations

import signal


def signal_name(returncode: int | None) -> str | None:
    """`SIGKILL` for a Popen returncode of -9; None for a normal exit or a process still running."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
