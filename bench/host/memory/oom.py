"""Was a server killed for memory? Evidence from the kernel, or None.

An OOM-killed server looks like any crash in the server's own log (SIGKILL, no message), but the
fix is different: it is the machine, not the framework. So the verdict `oom` needs evidence that
names the process, never a guess:

Linux, in order of strength:
- `cgroup oom_kill`: the memory cgroup we ran the server in (`--memory-limit`) counted an OOM kill
  (v1 `memory.oom_control`, v2 `memory.events`); every process in it is the server's;
- `kernel log`: an OOM-killer report for a pid of the server's tree, from after the server started
  (bench.host.memory.kernel_log). The killed pid may be a child (vLLM's engine core), so the whole tree
  counts;
- `vmstat oom_kill` (circumstantial, only when the kernel log cannot be read): the server itself
  died of a SIGKILL nobody here sent while the system's OOM-kill counter rose.
macOS: `jetsam`, a kill line for a pid of the tree in the unified log (bench.host.memory.jetsam).

When the server died of a SIGKILL nobody here sent and no source could be read (the kernel log,
/proc/vmstat, or the unified log), detection raises `OomUndecided` instead of answering "no OOM":
the caller records the reason next to the exit, and the verdict is not `oom` for want of evidence.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import psutil

from bench.base.exits import signal_name
from bench.host.memory.jetsam import jetsam_kills
from bench.host.memory.kernel_log import kernel_kills, read_kernel_log, vmstat_oom_kills

if TYPE_CHECKING:
    from bench.host.memory.memlimit import MemoryCgroup

MAX_LINES = 12  # kernel or log lines quoted in the evidence


class OomUndecided(RuntimeError):
    """The server may have been killed for memory, but nothing that could tell was readable."""


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
    base = {"pid": pid, "process": names.get(pid) or None, "returncode": returncode, "signal": signal_name(returncode)}

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
        if now is None or vmstat_before is None:
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
        started_wall = time.time() - 600  # no start time: look back ten minutes
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
        "signal": signal_name(returncode),
        "line": first.line,
        "lines": [k.line for k in ours][:MAX_LINES],
    }


def describe_oom(evidence: dict) -> str:
    """The one-line reason for a verdict: who was killed, by what, quoting the kernel's line."""
    who = f"pid {evidence.get('pid')}" + (f" ({evidence['process']})" if evidence.get("process") else "")
    source = evidence.get("source", "?")
    limit = (evidence.get("cgroup") or {}).get("limit_bytes")
    if limit:
        from bench.host.memory.memlimit import format_size

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
