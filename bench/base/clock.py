"""The one wall clock for what cellbench writes down: UTC, ISO 8601, whole seconds.

Durations are measured with `time.monotonic`/`perf_counter` where they happen; this module is
only for timestamps a person reads or a later run compares (run ids, journal times, results).
"""

from __future__ import annotations

import os
from datetime import date, datetime, timezone

# The day a run's journal is named after, when a caller fixes it (YYYY-MM-DD): the weekly run sets
# it for its pytest sessions, so a run that crosses midnight keeps one journal and one day.
RUN_DAY_ENV = "CELLBENCH_JOURNAL_DAY"


def now() -> datetime:
    return datetime.now(timezone.utc)


def now_iso() -> str:
    """e.g. `2026-11-30T17:20:05+00:00`."""
    return now().isoformat(timespec="seconds")


def run_day() -> str:
    """The run's day, YYYY-MM-DD: $CELLBENCH_JOURNAL_DAY when a caller fixed it, else today (local)."""
    return os.environ.get(RUN_DAY_ENV) or date.today().isoformat()
