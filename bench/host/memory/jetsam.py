"""macOS's account of memory kills: jetsam lines in the unified log (`log show`).

Three line shapes name a killed pid: the jetsam report `Process <name> [<pid>] killed by jetsam
reason <reason>`, xnu's own `memorystatus: killing_... pid <pid> [<name>] (<reason> ...)`, and the
per-process fatal limit `memorystatus: <name> [<pid>] exceeded mem limit: ... (fatal)`. The
parser is tested on line shapes published from real devices; no Mac has run it here.
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime

CLOCK_SLACK_S = 2.0  # the log's wall-clock timestamps against time.time()
# xnu's kill line and the fatal-limit line do not contain "jetsam", hence the second term.
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
