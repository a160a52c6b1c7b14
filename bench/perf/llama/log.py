"""llama-server's own account of a run, read from its log: when each request's slot started and
was released, and how many tokens it generated in how long.

`cellbench perf compare --llama-server` prints it beside what every client reports, because the
clients disagree about the same server by more than their reading of the stream can explain: a
client that takes CPU from the server's threads (on a 2-core host every process shares the
server's cores) makes the server itself slower. The server's log tells the two apart. A client
whose throughput equals the server's own read the stream correctly, however low both are; one
whose figure differs from the server's mis-measured it.

llama-server (b11434) logs, per request (task), with a `minutes.seconds.ms.us` timestamp since
its start:
    0.00.393.902 I slot launch_slot_: id  3 | task 0 | processing task, is_child = 0
    0.00.440.397 I slot print_timing: id  3 | task 0 |        eval time =      34.74 ms /   100 tokens (...)
    0.00.440.571 I slot      release: id  3 | task 0 | stop processing: n_tokens = 372, truncated = 0
The `eval time` line's tokens are the tokens it generated (its usage `completion_tokens`; the
`prompt eval time` line before it is the prompt's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_STAMP = r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) I slot +"
_TASK = r": id +\d+ \| task (\d+) \|"
LAUNCH = re.compile(_STAMP + "launch_slot_" + _TASK)
EVAL = re.compile(_STAMP + "print_timing" + _TASK + r" +eval time = +([\d.]+) ms / +(\d+) tokens")
RELEASE = re.compile(_STAMP + "release" + _TASK)


@dataclass(frozen=True)
class ServedRequest:
    task: int
    started_s: float  # its slot launched, seconds since the server started
    released_s: float
    tokens: int  # generated
    decode_ms: float  # the server's time generating them


def _seconds(m: re.Match[str]) -> float:
    minutes, seconds, ms, us = (int(x) for x in m.groups()[:4])
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


def served_requests(text: str) -> list[ServedRequest]:
    """Every request the log shows from launch to release, in the order they were released."""
    started: dict[int, float] = {}
    evals: dict[int, tuple[float, int]] = {}
    done = []
    for line in text.splitlines():
        if m := LAUNCH.match(line):
            started[int(m[5])] = _seconds(m)
        elif m := EVAL.match(line):
            evals[int(m[5])] = (float(m[6]), int(m[7]))
        elif (m := RELEASE.match(line)) and (task := int(m[5])) in started and task in evals:
            decode_ms, tokens = evals[task]
            done.append(ServedRequest(task, started[task], _seconds(m), tokens, decode_ms))
    return done


def server_throughput(log: Path, last: int) -> float | None:
    """The server's own output tokens per second over the run's `last` requests (the ones after
    the client's warm-up): their generated tokens over the time from the first of them starting
    to the last released. None when the log holds fewer."""
    served = served_requests(log.read_text(errors="replace")) if log.is_file() else []
    if last <= 0 or len(served) < last:
        return None
    timed = served[-last:]
    span = max(r.released_s for r in timed) - min(r.started_s for r in timed)
    return sum(r.tokens for r in timed) / span if span > 0 else None
