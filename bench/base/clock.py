"""The one wall clock for what cellbench writes down: UTC, ISO 8601, whole seconds.

Durations are measured with `time.monotonic`/`perf_counter` where they happen; this module is
only for timestamps a person reads or a later run compares (run ids, journal times, results).
"""

from __future__ import annotations

from datetime import datetime, timezone


def now() -> datetime:
    return datetime.now(timezone.utc)


def now_iso() -> str:
    """e.g. `2026-11-30T17:20:05+00:00`."""
    return now().isoformat(timespec="seconds")
