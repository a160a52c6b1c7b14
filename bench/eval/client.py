"""A row's client as a process: its argument list run in a process group of its own under a
wall-clock limit (at the limit, or on Ctrl-C, the whole group is stopped: a client never outlives
its row), its output in a log, and the excerpt of a log that explains a failure."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from bench.run.server.exits import log_tail

KILL_GRACE_S = 10.0
# Lines worth quoting when a client or server fails without a traceback.
_ERROR_LINE = re.compile(r"error|failed|exception|out of memory|outofmemory|killed|modulenotfound|refused",
                         re.IGNORECASE)


def excerpt(*logs: Path, limit: int = 2000) -> str:
    """The last traceback in the first log that has one, else the last error-looking line."""
    for log in logs:
        text = log_tail(log, 400)
        start = text.rfind("Traceback (most recent call last)")
        if start >= 0:
            return text[start:][-limit:]
    for log in logs:
        lines = [line for line in log_tail(log, 50).splitlines() if _ERROR_LINE.search(line)]
        if lines:
            return lines[-1][-limit:]
    return ""


def path_with(python: str, env: dict[str, str]) -> str:
    """PATH with the clients' Python's folder first: a command that says `python` gets that one
    (sglang-omni's runner does the same with its venv)."""
    return os.pathsep.join([str(Path(python).parent), env.get("PATH", os.environ.get("PATH", ""))])


def run_client(argv: list[str], cwd: Path, env: dict[str, str], log: Path, timeout_s: float) -> dict:
    """Run the client in its own process group; at the limit the whole group is stopped."""
    t0 = time.monotonic()
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return {"argv": argv, "returncode": None, "timed_out": False, "duration_s": 0.0,
                    "error": f"cannot start: {exc}"}
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            stop_group(proc)  # also on Ctrl-C: a client never outlives its row
    return {"argv": argv, "returncode": proc.returncode, "timed_out": timed_out,
            "duration_s": round(time.monotonic() - t0, 3), "tail": log_tail(log, 20)}


def stop_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)  # children it left behind, even when it has exited itself
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            if sig is signal.SIGTERM:
                return
        except subprocess.TimeoutExpired:
            continue
