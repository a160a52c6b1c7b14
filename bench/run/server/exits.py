"""How a server's start or life ended, as a cell records it: `ServerStartError` (it never became
ready: the one-line reason, the log, whether one retry may help, OOM evidence) and `ExitInfo`
(how a started server ended), with the log's tail a reason quotes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.base.exits import signal_name
from bench.core.result.model import ServerExit


class ServerStartError(RuntimeError):
    """The server never became ready; `str()` is the one-line reason, `log_path` the evidence."""

    def __init__(self, reason: str, log_path: Path | None = None, *, transient: bool = False,
                 oom: dict | None = None, capped: bool = False):
        super().__init__(reason)
        self.log_path = log_path
        self.transient = transient  # one retry (bench.run.levels): port held, or dropped polls then exit
        self.oom = oom  # evidence that it was killed for memory while loading (bench.host.memory.oom); never retried
        self.capped = capped  # the cell's budget or hang watchdog ended the wait, not the server


@dataclass(frozen=True)
class ExitInfo:
    returncode: int | None  # None: still running when we stopped it (we did the stopping)
    signal: str | None  # the signal that ended it, if any
    stopped_by_us: bool
    oom: dict | None = None  # evidence that it (or a process of its tree) was killed for memory
    memory: dict | None = None  # the memory cgroup it ran in (limit, peak, oom kills), when limited
    oom_check_error: str | None = None  # OOM detection itself failed: whether it was an OOM is unknown

    def to_json(self) -> ServerExit:
        out: ServerExit = {"returncode": self.returncode, "signal": self.signal, "stopped_by_us": self.stopped_by_us}
        if self.oom is not None:
            out["oom"] = self.oom
        if self.oom_check_error is not None:
            out["oom_check_error"] = self.oom_check_error
        if self.memory is not None:
            out["memory"] = self.memory
        return out


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def describe_exit(code: int) -> str:
    if code < 0:
        return f"signal {signal_name(code)}"
    return f"exit code {code}"
