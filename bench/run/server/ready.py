"""Waiting for a started server to answer HTTP 200 on its ready path, and every reason to stop;
then whether the port's listener is the server we started.

The ready path is polled (with the API key, when there is one) every READY_POLL_S until it
answers 200. The wait ends with a ServerStartError when the process exits (the caller says how it
died), when the ready path answers 401/403 to the key (a key it wants: no wait makes that 200),
after the adapter's startup timeout (naming the last answer), when the cell's budget is spent, or
when for `stall_timeout_s` the log did not grow and the ready path gave no HTTP answer at all (the
hang watchdog: a 503 while loading is a sign of life); the last two with `capped=True`. Polls the
port took and dropped unanswered are counted: a server that dropped them and then exited was
bound, so its flags and model were fine (a transient start failure). Once ready, a listener on
the port outside the server's process tree means another process answered.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from bench.host.ports import listeners
from bench.run.server.answers import answer_text, refused_key
from bench.run.server.exits import ServerStartError
from bench.setup.profiles import ApiKey

READY_POLL_S = 0.05  # between readiness polls: bounds how late a ready server is noticed
TREE_EVERY_S = 0.2  # between process-tree walks while a server starts
# Polls a bound port took and dropped (unlike a refused one); a reset before connect() returns too.
DROPPED = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, ConnectionResetError)


def poll_until_ready(
    proc: subprocess.Popen,
    *,
    url: str,
    ready_path: str,
    api_key: ApiKey | None,
    log_path: Path,
    started_at: float,
    startup_timeout_s: float,
    budget_s: float | None,
    stall_timeout_s: float | None,
    note_tree: Callable[[], None],
    died: Callable[[int, int], ServerStartError],
) -> float:
    """Poll `url` until HTTP 200; return when the last poll that found the server not ready began
    (time.monotonic(), `started_at` if none did). `note_tree` is called every TREE_EVERY_S (the
    server's processes, for OOM evidence); `died(exit code, dropped polls)` is the error raised
    when the process exits first (dropped polls count only while no poll was ever answered)."""
    timeout_at = started_at + startup_timeout_s
    seen_size, seen_at = -1, time.monotonic()
    deadline = None if budget_s is None else seen_at + budget_s
    last_miss, tree_at = started_at, 0.0
    last_answer = "no HTTP answer"
    resets, answered_once = 0, False  # for `died`: did the port take connections and drop them?
    with httpx.Client(timeout=5.0, headers=api_key.headers if api_key else None) as client:
        while True:
            code = proc.poll()
            if code is not None:
                raise died(code, 0 if answered_once else resets)
            if time.monotonic() - tree_at >= TREE_EVERY_S:  # a process-tree walk costs a loading server CPU
                note_tree()
                tree_at = time.monotonic()
            try:
                response = client.get(url)
                answered: int | None = response.status_code
            except httpx.HTTPError as exc:
                answered = None
                last_answer = f"no HTTP answer ({type(exc).__name__})"
                resets += _dropped(exc)
            else:
                answered_once = True
                last_answer = f"last answer {answer_text(response, api_key)}"
                if (why := refused_key(response, api_key)) is not None:  # no wait makes it 200
                    raise ServerStartError(f"server not ready on {ready_path}: {why}; log: {log_path}", log_path)
            if answered == 200:
                return last_miss
            now = last_miss = time.monotonic()
            size = _size(log_path)
            if size != seen_size or answered is not None:  # a log line or an answer: alive
                seen_size, seen_at = size, now
            if now > timeout_at:
                raise ServerStartError(
                    f"server not ready on {ready_path} after {startup_timeout_s:.0f} s: "
                    f"{last_answer}; log: {log_path}",
                    log_path,
                )
            if deadline is not None and now > deadline:
                raise ServerStartError(f"cell budget reached while the server was starting "
                                       f"({now - started_at:.0f} s); log: {log_path}",
                                       log_path, capped=True)
            if stall_timeout_s is not None and now - seen_at > stall_timeout_s:
                raise ServerStartError(f"no progress for {_span(now - seen_at)} while starting: no answer on "
                                       f"{ready_path} and the log silent; log: {log_path}",
                                       log_path, capped=True)
            time.sleep(READY_POLL_S)


def foreign_listener(port: int, pid: int) -> str | None:
    """"pid N" of a process listening on `port` outside `pid`'s process tree, or None."""
    ours = {pid}
    with contextlib.suppress(psutil.Error):
        ours |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
    for conn in listeners(port):
        if conn.pid and conn.pid not in ours:
            return f"pid {conn.pid}"
    return None


def _dropped(exc: BaseException | None) -> bool:
    while exc is not None and not isinstance(exc, DROPPED):
        exc = exc.__cause__ or exc.__context__
    return exc is not None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
