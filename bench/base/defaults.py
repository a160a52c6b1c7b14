"""The defaults more than one layer states, each stated here once.

A cell's splits and its level defaults are read by the prompt loader, the load generator's level
config, the cell config, the pytest options, `cellbench serve` and `cellbench weekly`, the
nightly matrix and the importers; each imports them from here, so a changed default cannot leave
a stale copy behind in a help text or a second dataclass.
"""

from __future__ import annotations

SPLITS = ("chat", "agent")  # the prompt splits, in the order a run takes them
DEFAULT_MODEL = "tiny"  # the model profile (models/tiny.yaml): the built-in tiny model, no download
DEFAULT_LEVELS = (1, 8, 16)  # closed-loop concurrency levels of a cell
DEFAULT_REQUESTS = 100  # measured requests per level
DEFAULT_WARMUP = 3  # warm-up requests per level, not measured
DEFAULT_REQUEST_TIMEOUT_S = 300.0  # one request's whole life, seconds
DEFAULT_DEGRADED_THRESHOLD = 0.2  # the share of failed requests that makes a cell degraded


def levels_text(levels: tuple[int, ...] = DEFAULT_LEVELS) -> str:
    """(1, 8, 16) -> `1,8,16`, as --concurrency takes it."""
    return ",".join(str(level) for level in levels)
