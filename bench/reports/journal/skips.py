"""Skips on a diagnosis ("skipped: diagnosed, not fixed"): recorded by a person, or carried from
the prior journals, and whether each still holds.

A person records one with `cellbench weekly skip FRAMEWORK SPLIT --reason "..."`, into
`weekly_skips.json` beside the journals (`results/<model>/<machine>/`); `--clear` ends it. The
skips of the two most recent prior journals count too (SiliconBench's `## Skipped Cells`, and
the diagnosed skips cellbench's own journals carried), unless cleared after that journal's day
or the cell ran in a newer one.

A skip holds while nothing it was diagnosed against moved: the framework's release (this run's
update did not install another one) and, for a recorded skip, its adapter module (the sha256 it
was recorded with). A skip that holds keeps the cell from running and is one line in the journal;
one that lapsed lets the cell run, and a pass then clears it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.base.clock import now_iso
from bench.base.files import atomic_write
from bench.reports.journal.prior import recent

SKIPS_FILE = "weekly_skips.json"
RECORDED = f"recorded with `cellbench weekly skip` ({SKIPS_FILE})"


def read_store(directory: Path) -> dict[str, dict[str, Any]]:
    """`{"skips": {"fw/split": {...}}, "cleared": {"fw/split": day}}`; empty when there is none."""
    try:
        data = json.loads((directory / SKIPS_FILE).read_text())
    except (OSError, ValueError):
        data = {}
    return {"skips": dict(data.get("skips") or {}), "cleared": dict(data.get("cleared") or {})}


def _write(directory: Path, store: dict[str, dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / SKIPS_FILE, json.dumps(store, indent=1, sort_keys=True) + "\n")


def record_skip(directory: Path, key: str, reason: str, day: str, adapter_sha256: str | None) -> None:
    store = read_store(directory)
    store["skips"][key] = {"reason": reason, "recorded": day, "at": now_iso(), "adapter_sha256": adapter_sha256}
    store["cleared"].pop(key, None)
    _write(directory, store)


def clear_skip(directory: Path, key: str, day: str) -> bool:
    """End the skip of `key` from `day` on (prior journals' skips of it too); whether one was recorded."""
    store = read_store(directory)
    had = store["skips"].pop(key, None) is not None
    store["cleared"][key] = day
    _write(directory, store)
    return had


def diagnosed_skips(directory: Path, day: str) -> dict[str, dict[str, Any]]:
    """Every skip on a diagnosis in force for a run of `day`, by `framework/split`: its reason,
    since when, where it comes from, and the adapter digest it was recorded with (if any)."""
    store = read_store(directory)
    found: dict[str, dict[str, Any]] = {}
    for prior in reversed(recent(directory, day)):  # the newer journal's word wins
        for framework, split in prior.ran:  # a cell that ran since is no longer skipped
            found.pop(f"{framework}/{split}", None)
        for skip in prior.skips:
            key = f"{skip.framework}/{skip.split}"
            cleared = store["cleared"].get(key)
            if cleared is None or cleared < prior.day:
                found[key] = {"reason": skip.reason, "since": skip.since, "source": skip.source}
    for key, skip in store["skips"].items():
        found[key] = {"reason": skip["reason"], "since": skip["recorded"], "source": RECORDED,
                      "adapter_sha256": skip.get("adapter_sha256")}
    return found


def lapse(skip: dict[str, Any], update: dict[str, Any] | None, adapter_sha256: str | None) -> str | None:
    """Why the skip no longer holds, or None while it does. `update` is this run's update record
    of the framework (bench.setup.installs.updates.UpdateRecord.to_json), None when none ran."""
    if update and update.get("after") and update.get("before") != update["after"]:
        if not update.get("before"):  # e.g. SiliconBench's "not installed": it is now
            return f"{update['framework']} {update['after']} was installed this run"
        return f"{update['framework']} moved from {update['before']} to {update['after']} this run"
    recorded = skip.get("adapter_sha256")
    if recorded and adapter_sha256 and recorded != adapter_sha256:
        return "its adapter module changed since the skip was recorded"
    return None


def holds_line(update: dict[str, Any] | None, adapter_checked: bool) -> str:
    """Why a skip still holds, in words for its journal line."""
    version = (f"{update['framework']} is still {update['after']}" if update and update.get("after")
               else "no framework update ran")
    return f"still holds: {version}" + (", its adapter unchanged" if adapter_checked else "")
