"""Was a server killed for memory? Evidence from the kernel, or None.

An OOM-killed server looks like any crash in the server's own log (SIGKILL, no message), but the
fix is different: it is the machine, not the framework (seed, Phase 3 "OOM pre-check"). So the
verdict `oom` needs evidence that names the process, never a guess:

Linux, in order of strength:
- `cgroup oom_kill`: the memory cgroup we ran the server in (`--memory-limit`) counted an OOM kill
  (v1 `memory.oom_control`, v2 `memory.events`); every process in it is the server's;
- `kernel log`: an OOM-killer report for a pid of the server's tree, read from /dev/kmsg (or
  `dmesg`) and only from after the server started: `Out of memory: Killed process 1234 (name)`,
  `Memory cgroup out of memory: Killed process 1234 (name)`, with the `oom-kill:...,pid=1234,`
  line before it. The killed pid may be a child (vLLM's engine core), so the whole tree counts;
- `vmstat oom_kill` (circumstantial, only when the kernel log cannot be read): the server itself
  died of a SIGKILL nobody here sent while the system's OOM-kill counter rose.
macOS: `jetsam`, from `log show` (the unified log): `Process <name> [<pid>] killed by jetsam
reason <reason>` or xnu's `memorystatus: killing_... pid <pid> [<name>] (<reason> ...)`.
The parser is tested on line shapes published from real devices; no Mac ran it here.

When the server died of a SIGKILL nobody here sent and no source could be read (the kernel log,
/proc/vmstat, or the unified log), detection raises `OomUndecided` instead of answering "no OOM":
the caller records the reason next to the exit, and the verdict is not `oom` for want of evidence.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from bench.host.memlimit import MemoryCgroup

CLOCK_SLACK_S = 2.0  # kernel timestamps (local_clock) against time.monotonic()
MAX_LINES = 12

_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_OOM_KILL = re.compile(r"oom-kill:(.*)$")
_REAPED = re.compile(r"oom_reaper: reaped process (\d+) \(([^)]*)\)")


class OomUndecided(RuntimeError):
    """The server may have been killed for memory, but nothing that could tell was readable."""


@dataclass(frozen=True)
class KernelLine:
    t: float | None  # seconds since boot, the kernel's clock
    text: str


# --- reading the kernel log ---------------------------------------------------------------------


def read_kernel_log() -> tuple[list[KernelLine], str | None]:
    """Every record in the kernel's ring buffer, and why it could not be read (None when it was)."""
    lines, why = _read_kmsg()
    if lines is not None:
        return lines, None
    lines, why_dmesg = _read_dmesg()
    if lines is not None:
        return lines, None
    return [], f"{why}; {why_dmesg}"


def _read_kmsg(path: str = "/dev/kmsg") -> tuple[list[KernelLine] | None, str]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    out = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten while we read: go on from the next
                continue
            except OSError as exc:
                return (out or None), f"cannot read {path}: {exc.strerror}"
            if not record:
                break
            head, _, rest = record.decode("utf-8", "replace").partition(";")
            message = rest.split("\n", 1)[0]
            fields = head.split(",")
            try:
                t = int(fields[2]) / 1e6
            except (IndexError, ValueError):
                t = None
            out.append(KernelLine(t, _unescape(message)))
    finally:
        os.close(fd)
    return out, ""


def _unescape(text: str) -> str:
    return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


_DMESG_LINE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")


def _read_dmesg() -> tuple[list[KernelLine] | None, str]:
    try:
        done = subprocess.run(["dmesg"], check=False, capture_output=True, text=True, timeout=10, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"dmesg: {exc}"
    if done.returncode != 0:
        return None, f"dmesg: {done.stderr.strip() or f'exit code {done.returncode}'}"
    out = []
    for line in done.stdout.splitlines():
        m = _DMESG_LINE.match(line)
        out.append(KernelLine(float(m.group(1)), m.group(2)) if m else KernelLine(None, line))
    return out, ""


@dataclass
class KernelKill:
    pid: int
    process: str | None = None
    line: str | None = None  # the "Killed process" line
    lines: list[str] = field(default_factory=list)
    memcg: str | None = None
    t: float | None = None


def kernel_kills(
    lines: Iterable[KernelLine], *, pids: Iterable[int] = (), memcg: str | None = None, since: float | None = None
) -> list[KernelKill]:
    """OOM kills in the kernel log of one of `pids`, or of any process in cgroup `memcg`.

    `since` (kernel clock, seconds since boot) drops older reports, so a reused pid is not
    blamed for an earlier process's death.
    """
    wanted = set(pids)
    kills: dict[int, KernelKill] = {}

    def ours(pid: int, cg: str | None) -> bool:
        if pid in wanted:
            return True
        return bool(memcg and cg and (cg == memcg or cg.startswith(memcg.rstrip("/") + "/")))

    for kl in lines:
        if since is not None and kl.t is not None and kl.t < since - CLOCK_SLACK_S:
            continue
        text = kl.text
        if m := _OOM_KILL.search(text):
            info = dict(part.split("=", 1) for part in m.group(1).split(",") if "=" in part)
            try:
                pid = int(info.get("pid", ""))
            except ValueError:
                continue
            if ours(pid, info.get("task_memcg")):
                wanted.add(pid)  # the "Killed process" line that follows is ours too
                kill = kills.setdefault(pid, KernelKill(pid))
                kill.memcg = info.get("task_memcg")
                kill.process = kill.process or info.get("task")
                kill.lines.append(text)
                kill.t = kill.t or kl.t
        elif m := _KILLED.search(text):
            pid = int(m.group(1))
            if ours(pid, None):
                kill = kills.setdefault(pid, KernelKill(pid))
                kill.process, kill.line = m.group(2), text
                kill.lines.append(text)
                kill.t = kill.t or kl.t
        elif (m := _REAPED.search(text)) and int(m.group(1)) in kills:
            kills[int(m.group(1))].lines.append(text)
    return list(kills.values())


def vmstat_oom_kills() -> int | None:
    """The system-wide OOM-kill counter (Linux >= 4.13), or None."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return None


# --- macOS: jetsam --------------------------------------------------------------------------------

# The seed greps for "jetsam"; xnu's own kill line ("memorystatus: killing_... pid N [name]") and
# the fatal-limit line do not contain that word, hence the second term.
JETSAM_PREDICATE = 'eventMessage CONTAINS "jetsam" OR eventMessage CONTAINS "memorystatus"'
# `log show --style default` lines start with "2024-05-01 10:23:45.123456-0700".
_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d{4})?")
_JETSAM_REPORT = re.compile(r"Process (.+?) \[(\d+)\] killed by jetsam reason (\S+)")
_XNU_KILL = re.compile(r"(killing_\w+) pid (\d+) \[([^\]]*)\](?: \((\S+?)[ )])?")
_FATAL_LIMIT = re.compile(r"memorystatus: (.+?) \[(\d+)\] exceeded mem limit: (.*?) \(fatal\)")


@dataclass(frozen=True)
class JetsamKill:
    pid: int
    process: str
    reason: str | None
    line: str
    wall: float | None  # epoch seconds, when the line had a timestamp


def parse_jetsam(text: str) -> list[JetsamKill]:
    """Jetsam kills in `log show` output (one entry per line that names a pid)."""
    kills = []
    for raw in text.splitlines():
        line = raw.strip()
        if m := _JETSAM_REPORT.search(line):
            process, pid, reason = m.group(1), int(m.group(2)), m.group(3)
        elif m := _XNU_KILL.search(line):
            pid, process, reason = int(m.group(2)), m.group(3), m.group(4)
        elif m := _FATAL_LIMIT.search(line):
            process, pid, reason = m.group(1), int(m.group(2)), f"per-process-limit ({m.group(3)})"
        else:
            continue
        kills.append(JetsamKill(pid, process, reason, line, _log_time(line)))
    return kills


def _log_time(line: str) -> float | None:
    m = _LOG_TIME.match(line)
    if not m:
        return None
    stamp, zone = m.group(1), m.group(2)
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S"
    try:
        if zone:
            return datetime.strptime(stamp + zone, fmt + "%z").timestamp()
        return datetime.strptime(stamp, fmt).timestamp()  # local time
    except ValueError:
        return None


def jetsam_kills(since_wall: float) -> tuple[list[JetsamKill], str | None]:
    """Jetsam kills since `since_wall`, read from the unified log (slow: seconds)."""
    minutes = max(1, math.ceil((time.time() - since_wall) / 60) + 1)
    argv = ["log", "show", "--style", "default", "--last", f"{minutes}m", "--predicate", JETSAM_PREDICATE]
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"log show: {exc}"
    if done.returncode != 0:
        return [], f"log show: {done.stderr.strip()[:200] or f'exit code {done.returncode}'}"
    kills = [k for k in parse_jetsam(done.stdout) if k.wall is None or k.wall >= since_wall - CLOCK_SLACK_S]
    return kills, None


# --- the decision ---------------------------------------------------------------------------------


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def detect_oom(
    pid: int,
    *,
    started_monotonic: float,
    returncode: int | None,
    pids: Mapping[int, str] | Iterable[int] = (),
    cgroup: MemoryCgroup | None = None,
    killed_by_us: bool = False,
    clean_stop: bool = False,
    started_wall: float | None = None,
    vmstat_before: int | None = None,
) -> dict | None:
    """Evidence that the server `pid` (or a process of its tree, `pids`) was killed for memory.

    `started_monotonic` is `time.monotonic()` when the server started: kernel log lines from
    before it are ignored. `killed_by_us`: we SIGKILLed it after the stop grace period, so its
    SIGKILL alone means nothing; only the kernel or the cgroup can still say OOM. `clean_stop`:
    we stopped it and it went on SIGTERM; on macOS the (slow) unified log is then not read.
    Returns None when there is no such evidence (an exit 1, our own SIGKILL, a crash). Raises
    `OomUndecided` when the server died of a SIGKILL nobody here sent and no source was readable.
    """
    names = dict(pids) if isinstance(pids, Mapping) else {p: "" for p in pids}
    names.setdefault(pid, "")
    if sys.platform == "darwin":
        return None if clean_stop else _detect_jetsam(pid, names, returncode, started_wall, killed_by_us)
    base = {"pid": pid, "process": names.get(pid) or None, "returncode": returncode, "signal": _signal_name(returncode)}

    cgroup_kills = cgroup.oom_kills() if cgroup is not None else None
    lines, log_error = read_kernel_log()
    kills = kernel_kills(lines, pids=names, memcg=cgroup.relpath if cgroup else None, since=started_monotonic)
    kills.sort(key=lambda k: (k.pid != pid, k.t or 0.0))  # the server itself first, then by time

    evidence: dict | None = None
    if cgroup_kills:
        evidence = {"source": "cgroup oom_kill", **base, "line": None, "lines": []}
    elif kills:
        evidence = {"source": "kernel log", **base, "line": None, "lines": []}
    elif log_error and returncode == -signal.SIGKILL and not killed_by_us:
        now = vmstat_oom_kills() if vmstat_before is not None else None
        if now is None:
            raise OomUndecided(f"died of a SIGKILL nobody here sent; the kernel log was not readable ({log_error}) "
                               "and /proc/vmstat has no oom_kill counter")
        if now <= vmstat_before:
            return None  # no OOM kill anywhere on the system since the server started
        return {
            "source": "vmstat oom_kill",
            **base,
            "line": None,
            "lines": [],
            "note": f"SIGKILL sent by no one here while the system's OOM-kill counter rose by "
            f"{now - vmstat_before}; the kernel log was not readable ({log_error})",
        }
    if evidence is None:
        return None
    if kills:
        first = kills[0]
        evidence.update(pid=first.pid, process=first.process or names.get(first.pid) or None,
                        line=first.line or first.lines[0])
        evidence["lines"] = [line for k in kills for line in k.lines][:MAX_LINES]
        if len(kills) > 1:
            evidence["killed_pids"] = [k.pid for k in kills]
    elif log_error:
        evidence["note"] = f"kernel log not readable: {log_error}"
    if cgroup is not None:
        evidence["cgroup"] = {"path": str(cgroup.path), "version": cgroup.version,
                              "limit_bytes": cgroup.limit_bytes, "oom_kill": cgroup_kills}
    return evidence


def _detect_jetsam(
    pid: int, names: Mapping[int, str], returncode: int | None, started_wall: float | None, killed_by_us: bool
) -> dict | None:
    if started_wall is None:
        started_wall = time.time() - 600  # the seed's `--last 10m`
    kills, log_error = jetsam_kills(started_wall)
    if log_error and returncode == -signal.SIGKILL and not killed_by_us:  # jetsam kills with SIGKILL
        raise OomUndecided(f"died of a SIGKILL nobody here sent; the unified log was not readable ({log_error})")
    ours = [k for k in kills if k.pid in names]
    if not ours:
        return None
    ours.sort(key=lambda k: k.pid != pid)
    first = ours[0]
    return {
        "source": "jetsam",
        "pid": first.pid,
        "process": first.process,
        "reason": first.reason,
        "returncode": returncode,
        "signal": _signal_name(returncode),
        "line": first.line,
        "lines": [k.line for k in ours][:MAX_LINES],
    }


def describe_oom(evidence: dict) -> str:
    """The one-line reason for a verdict: who was killed, by what, quoting the kernel's line."""
    who = f"pid {evidence.get('pid')}" + (f" ({evidence['process']})" if evidence.get("process") else "")
    source = evidence.get("source", "?")
    limit = (evidence.get("cgroup") or {}).get("limit_bytes")
    if limit:
        from bench.host.memlimit import format_size

        source += f", limit {format_size(limit)}"
    if evidence.get("line"):
        return f"killed for memory ({source}): {evidence['line']}"
    if evidence.get("note"):
        return f"{who} killed for memory ({source}): {evidence['note']}"
    return f"{who} killed for memory ({source})"


class OomWatch:
    """What OOM detection needs about one server, collected while it runs.

    The kernel names the pid it killed; after the fact, a dead child's pid cannot be traced back
    to the server. So the tree's pids are noted while they are alive: `note()` (children of the
    leader) and `note_group()` (the whole process group, for when the leader has died first).
    """

    def __init__(self, pid: int, cgroup: MemoryCgroup | None = None):
        self.pid = pid
        self.cgroup = cgroup
        self.started_monotonic = time.monotonic()
        self.started_wall = time.time()
        self.vmstat_before = vmstat_oom_kills()
        self.tree: dict[int, str] = {pid: ""}
        self.note()

    def add(self, pids: Mapping[int, str] | Iterable[int]) -> None:
        items = pids.items() if isinstance(pids, Mapping) else ((p, "") for p in pids)
        for p, name in items:
            if name or p not in self.tree:
                self.tree[p] = name or self.tree.get(p, "")

    def note(self) -> None:
        procs: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            leader = psutil.Process(self.pid)
            procs = [leader, *leader.children(recursive=True)]
        if self.cgroup is not None:
            for p in self.cgroup.pids():
                with contextlib.suppress(psutil.Error):
                    procs.append(psutil.Process(p))
        self._add_procs(procs)

    def note_group(self) -> None:
        members = []
        for proc in psutil.process_iter():
            with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
                if os.getpgid(proc.pid) == self.pid:
                    members.append(proc)
        self._add_procs(members)

    def _add_procs(self, procs: Iterable[psutil.Process]) -> None:
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                self.tree[proc.pid] = proc.name()

    def detect(self, returncode: int | None, *, killed_by_us: bool = False, clean_stop: bool = False) -> dict | None:
        return detect_oom(
            self.pid,
            started_monotonic=self.started_monotonic,
            returncode=returncode,
            pids=self.tree,
            cgroup=self.cgroup,
            killed_by_us=killed_by_us,
            clean_stop=clean_stop,
            started_wall=self.started_wall,
            vmstat_before=self.vmstat_before,
        )
