"""What a level's server files are called: `<stem>_<label>.server.log` and `<stem>.<label>.resources.jsonl`."""

from __future__ import annotations

from bench.core.level_run import rate_text
from bench.load import OpenLoop


def file_label(steps: list[tuple[int | OpenLoop, int]], rounds: int) -> str:
    """The label of a server's log and resource files, from the (level, round) steps it serves:
    "shared", "c8" or "r4", and with rounds the round's ("c8.r2"), so no round's files overwrite
    another's."""
    if len(steps) != 1:
        return "shared"
    point, k = steps[0]
    label = f"c{point}" if isinstance(point, int) else "trace" if point.trace else f"r{rate_text(point.rate)}"
    return label if rounds < 2 else f"{label}.r{k}"
