"""The runbook's triage line for a failed cell: fix, retry or skip, and why.

The rules, first match wins, as SiliconBench's weekly runbook decides them:

- skip, when the cell's one fix attempt or its one retry of the run already failed (no loops),
  or when it failed the same way in the previous journal (do not re-fight last week's battle);
- skip, when the telemetry shows memory pressure: an adapter edit cannot add memory;
- retry once, when the failure looks transient: a port held by another process, a connection
  reset, the GPU throttling;
- fix, when something upstream changed since the cell's last pass (the framework's version), or
  the server answered as another model (the profile's served id or the adapter's model flag):
  an edit of `adapters/<framework>.py` or `models/<profile>.yaml` with an upstream reference;
- skip otherwise: nothing points at a cause a local edit would fix.
"""

from __future__ import annotations

from typing import Any

from bench.core.verdicts import Verdict
from bench.reports.journal.names import LAST_PASS, TELEMETRY

PRIOR_FAILURE = "prior_failure"  # evidence key: how the previous journal's entry of the cell failed the same way
PRIOR_OCCURRENCES = "prior_occurrences"  # evidence key: the previous journal's word on a failure that is new

_TRANSIENT = ("already held", "address already in use", "connection reset", "throttling", "temporarily")


def decision(cell: Any, attempt: dict[str, Any] | None, retry: dict[str, Any] | None = None) -> str:
    """`<fix|retry|skip> — <why>`, with the command that carries it out where there is one."""
    ev: dict[str, Any] = cell.evidence
    rerun = f"`cellbench weekly --splits {cell.split} --frameworks {cell.framework}`"
    record = f"`cellbench weekly skip {cell.framework} {cell.split} --reason \"...\"` records the diagnosis"
    if attempt is not None and attempt.get("outcome") is not None:
        return (f"skip — its one fix attempt of the run ({attempt.get('edited', 'an edit')}) ended "
                f"{attempt['outcome']}; no second attempt this run; {record}")
    if retry is not None and retry.get("outcome") is not None:
        return f"skip — its one retry of the run ended {retry['outcome']} too; {record}"
    if ev.get(PRIOR_FAILURE):
        return f"skip — {ev[PRIOR_FAILURE]}: do not re-diagnose it from scratch; {record}"
    telemetry = str(ev.get(TELEMETRY) or "")
    if "memory pressure" in telemetry:
        return f"skip — the samples show memory pressure ({telemetry}): lower the concurrency or the model, not an edit"
    said = f"{cell.reason} {telemetry}".lower()
    if any(word in said for word in _TRANSIENT):
        return f"retry — it looks transient ({cell.reason}); run it once more: {rerun}"
    last = ev.get(LAST_PASS) or {}
    if last.get("version_then") and last.get("version_now") and last["version_then"] != last["version_now"]:
        return (f"fix — {cell.framework} moved from {last['version_then']} to {last['version_now']} since its last "
                f"pass ({last.get('file')}): read the release notes, edit its adapter or profile, then {rerun} "
                "with `--fix-ref <upstream commit, changelog entry or issue URL>`")
    if cell.verdict == Verdict.WRONG_MODEL.value:
        return (f"fix — the server answered as another model: the profile's served id or the adapter's model "
                f"argument; edit it, then {rerun} with `--fix-ref <reference>`")
    why = "no earlier pass to compare with" if not last else f"nothing changed upstream since {last.get('file')}"
    return f"skip — {why}, so no local edit is known to fix it; {record}"
