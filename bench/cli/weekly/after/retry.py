"""One retry for a cell whose failures were transient, as SiliconBench's runbook retries them.

After the splits, each cell of this run that ended failed, all-failed or degraded and whose every
failed request failed in a way that passes (a connection refused or reset, an HTTP 5xx, a
timeout; `transient_failure`) is run once more, in one pytest session per split with a run id
of its own, so both attempts keep their result files. Never an `oom` or `wrong-model` cell (the
verdicts are not retried at all), nor one whose server exited by itself (a crash: its log says
why, and a second run would say it again), nor one already retried or fix-attempted that day
(one retry per cell per run). Both attempts are in the journal: the cell's entry is the retry's,
its Notes name the first attempt, and Fix Attempts has the line with both. A retry that fails
again is triaged skip (bench.reports.journal.triage).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench.base.clock import now_iso
from bench.base.defaults import SPLITS
from bench.cli.weekly.sessions import Session, run_session, split_marker
from bench.core.result.files import new_run_id
from bench.core.verdicts import Verdict
from bench.reports.journal import RETRIED, Journal

RETRIED_VERDICTS = (Verdict.FAILED.value, Verdict.ALL_FAILED.value, Verdict.DEGRADED.value)
TRANSIENT_TYPES = ("http_5xx", "connect", "timeout")  # bench.core.records.ErrorType values
# a stream cut mid-answer is transient when its samples say the connection was reset or went away
_RESET_WORDS = ("reset", "went away", "broken pipe", "connectionerror", "remoteprotocolerror")


def _crashed(result: dict[str, Any]) -> bool:
    for server in result.get("servers", []):
        end = server.get("exit") or {}
        if end.get("oom") or server.get("oom"):
            return True
        if end and not end.get("stopped_by_us") and (end.get("signal") or end.get("returncode") not in (None, 0)):
            return True
    return False


def transient_failure(result: dict[str, Any]) -> str | None:
    """What makes the cell's failures transient ("12 http_5xx (HTTP 500, 503), 2 connect"), or
    None: a verdict that is not retried, a server that died, no failed request, or one failed
    request of another kind (a 4xx, a malformed stream, an empty answer...)."""
    if (result.get("verdict") or {}).get("verdict") not in RETRIED_VERDICTS or _crashed(result):
        return None
    counts: Counter[str] = Counter()
    statuses: dict[str, set[int]] = {}
    for level in result.get("levels", []):
        for kind, n in (level.get("errors") or {}).items():
            counts[kind] += n
            samples = (level.get("error_samples") or {}).get(kind, [])
            statuses.setdefault(kind, set()).update(s["http_status"] for s in samples if s.get("http_status"))
            if kind == "truncated" and not all(any(w in s.get("message", "").lower() for w in _RESET_WORDS)
                                               for s in samples):
                return None
    if not counts or any(kind not in (*TRANSIENT_TYPES, "truncated") for kind in counts):
        return None
    return ", ".join(f"{n} {kind}" + (f" (HTTP {', '.join(map(str, sorted(statuses[kind])))})"
                                      if statuses.get(kind) else "") for kind, n in counts.most_common())


def _read(path: str | None) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text()) if path else None
    except (OSError, ValueError):
        return None


def due(journal: Journal, run_id: str) -> dict[str, list[tuple[str, str]]]:
    """Split -> (framework, why) of this run's cells to retry once."""
    found: dict[str, list[tuple[str, str]]] = {}
    for cell in sorted(journal.cells.values(), key=lambda c: c.key):
        key = f"{cell.framework}/{cell.split}"
        if run_id not in (cell.result_path or "") or key in journal.retries or key in journal.fix_attempts:
            continue
        result = _read(cell.result_path)
        why = transient_failure(result) if result else None
        if why:
            found.setdefault(cell.split, []).append((cell.framework, why))
    return found


def _reopened(journal: Journal) -> Journal:
    """The day's journal as the sessions left it on disk."""
    return Journal.open(journal.directory, model=journal.model, machine=journal.machine, day=journal.day)


def retry_transient(journal: Journal, run_id: str, args: argparse.Namespace, log: Path) -> list[Session]:
    """Run each due cell once more (one session per split); journal both attempts."""
    sessions = []
    journal = _reopened(journal)
    for split, cells in sorted(due(journal, run_id).items(), key=lambda item: SPLITS.index(item[0])):
        retry_id = new_run_id()
        journal = _reopened(journal)
        for framework, why in cells:
            first = journal.cells[(framework, split)]
            journal.retries[f"{framework}/{split}"] = {
                "kind": "transient", "why": why, "run_id": retry_id, "at": now_iso(), "edited": "nothing",
                "from_verdict": first.verdict, "from_run_id": run_id, "outcome": None,
                "first": {"verdict": first.verdict, "reason": first.reason, "result": first.result_path}}
        journal.notes.append(f"Retry of {', '.join(f'{fw}/{split}' for fw, _ in cells)} (transient failures), "
                             f"run {retry_id}")
        journal.save()
        sessions.append(run_session(split, args, retry_id, log, split_marker(split, [fw for fw, _ in cells])))
        journal = settle(journal, retry_id)
        if sessions[-1].interrupted:
            break
    return sessions


def settle(journal: Journal, retry_id: str) -> Journal:
    """Each transient retry's outcome, from the journal the retry session wrote to; returns it."""
    journal = _reopened(journal)
    for key, retry in journal.retries.items():
        framework, _, split = key.partition("/")
        cell = journal.cells.get((framework, split))
        if retry.get("run_id") != retry_id or retry.get("outcome") is not None:
            continue
        first = retry["first"]
        said = f"retried once, its failures transient ({retry['why']}): first {first['verdict']} ({first['reason']}; " \
               f"{Path(first['result'] or '').name})"
        if cell is None or retry_id not in (cell.result_path or ""):
            retry["outcome"], retry["outcome_line"] = "not run", f"{said}; the retry wrote no result"
            continue
        retry["outcome"] = cell.verdict
        retry["outcome_line"] = f"{said}, then {cell.verdict} ({cell.reason}; {Path(cell.result_path or '').name})"
        cell.evidence[RETRIED] = {"verdict": first["verdict"], "result": Path(first["result"] or "").name,
                                  "why": retry["why"]}
    journal.save()
    return journal
