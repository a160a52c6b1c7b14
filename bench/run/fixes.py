"""`fixed`: a cell that failed earlier in this run and passes now because its adapter or its model
profile was edited, with the upstream change that explains it named.

The weekly run's way of repairing a cell (a person, or an agent following the runbook): edit the
framework's adapter module (`adapters/<framework>.py`) or the model profile (`models/<profile>.yaml`,
SiliconBench's `models/<profile>.sh`), verify, re-run the cell with the upstream reference. The
re-run then ends `fixed` rather than `ok`, so the week's record says a repair happened, which
earlier failure it answered and which upstream change it follows. The evidence must hold on
both sides, never a guess:

- the previous result of the same cell (`bench.run.cell_result.CellHistory.previous`, chosen as the
  reports choose it) ended with a verdict an adapter can cause: failed, all-failed, wrong-model,
  capped or degraded. Never `oom`: the machine lacked memory, which no adapter edit fixes;
- it finished on or after the run's day (`bench.base.clock.run_day`), so last week's failure
  followed by this week's pass is not passed off as a fix made today;
- both results record the adapter module's sha256 (`harness.adapter`) or the profile's
  (`harness.profile`), and one of them differs. An unchanged cell that passes on a second try is
  a retry, not a fix;
- an upstream reference was given ($CELLBENCH_FIX_REFERENCE, `cellbench weekly --fix-ref`): a
  commit, a changelog entry or an issue URL. Without one the re-run stays `ok`: a fix nobody can
  trace to an upstream change is not recorded as one.

A cell gets one fix attempt per run (`FixAttempt`): the weekly run refuses a second re-run of a
cell whose attempt of the day is on record, and journals the refusal.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from bench.core.result.model import FixBlock, ProfileSource, Result
from bench.core.result.store import LoadedResult
from bench.core.verdicts import CellVerdict, Verdict

FIXABLE = (Verdict.FAILED, Verdict.ALL_FAILED, Verdict.WRONG_MODEL, Verdict.CAPPED, Verdict.DEGRADED)
FIX_REFERENCE_ENV = "CELLBENCH_FIX_REFERENCE"

_URL = re.compile(r"^https?://\S+\.\S+")
_COMMIT = re.compile(r"(^|[\s@/:])[0-9a-f]{7,40}\b")
_CHANGELOG = re.compile(r"change ?log|release[ _-]?notes|news\.md|changes\.(md|rst|txt)", re.I)


def reference_problem(text: str) -> str | None:
    """Why `text` is not an upstream reference, or None when it is one: an http(s) URL (an issue,
    a pull request, a release page), a commit hash (7 to 40 hex digits, alone or in `repo@sha`),
    or a changelog entry (text naming a CHANGELOG, NEWS or release notes)."""
    text = text.strip()
    if _URL.match(text) or _COMMIT.search(text.lower()) or _CHANGELOG.search(text):
        return None
    return (f"{text!r} is not an upstream reference: give a commit hash, a changelog entry "
            "(e.g. 'CHANGELOG.md 0.8.2: renamed --no-webui') or an issue URL")


def profile_source(path: Path, root: Path) -> ProfileSource:
    """`{"file": "models/<profile>.yaml", "sha256": ...}` of the profile file a cell ran."""
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = str(path)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:  # removed while the session ran: the cell's result still gets written
        digest = f"unreadable: {exc.strerror or exc}"
    return {"file": rel, "sha256": digest}


@dataclass(frozen=True)
class Fix:
    """The earlier failure an edit answered, the two digests of the edited file, and the upstream
    change it follows."""

    verdict: str
    reason: str
    result_file: str
    run_id: str
    finished_at: str
    adapter_file: str  # the edited file: the adapter module, or the model profile
    sha256_before: str
    sha256_after: str
    reference: str

    def to_json(self) -> FixBlock:
        return {"from_verdict": self.verdict, "from_reason": self.reason, "from_result": self.result_file,
                "from_run_id": self.run_id, "from_finished_at": self.finished_at, "adapter": self.adapter_file,
                "sha256_before": self.sha256_before, "sha256_after": self.sha256_after, "reference": self.reference}

    def verdict_after(self, ok: CellVerdict) -> CellVerdict:
        """The re-run's verdict: `fixed`, its reason naming the failure, the file and the reference."""
        at = datetime.fromisoformat(self.finished_at).astimezone().strftime("%H:%M")
        reason = (f"ok after an edit of {self.adapter_file} (upstream: {self.reference}); it was {self.verdict} "
                  f"at {at} (run {self.run_id}): {self.reason}")
        return CellVerdict(Verdict.FIXED, reason, ok.annotations)


def _edited(old: dict[str, Any], new: dict[str, Any]) -> tuple[str, str, str] | None:
    """(file, sha before, sha after) of the adapter, else the profile, when it differs between the
    two results' harness blocks; None when neither recorded differs."""
    for key in ("adapter", "profile"):
        before, after = old.get("harness", {}).get(key), new.get("harness", {}).get(key)
        if before and after and before["sha256"] != after["sha256"]:
            return after["file"], before["sha256"], after["sha256"]
    return None


def verified_fix(previous: LoadedResult | None, result: Result, day: str, reference: str | None = None) -> Fix | None:
    """The fix `result` verifies, or None (the module docstring's four conditions). `reference`
    defaults to $CELLBENCH_FIX_REFERENCE."""
    reference = (reference if reference is not None else os.environ.get(FIX_REFERENCE_ENV, "")).strip()
    if previous is None or result["verdict"]["verdict"] != Verdict.OK.value:
        return None
    old = previous.data
    if Verdict(old["verdict"]["verdict"]) not in FIXABLE or "unfinished" in old:
        return None  # a killed run's levels so far ("capped: unfinished") are no failure a fix answered
    if datetime.fromisoformat(previous.finished_at).astimezone().date() < date.fromisoformat(day):
        return None
    edited = _edited(dict(old), dict(result))
    if edited is None or not reference or reference_problem(reference):
        return None
    return Fix(old["verdict"]["verdict"], old["verdict"]["reason"], previous.path.name, old["run_id"],
               previous.finished_at, *edited, reference)


@dataclass(frozen=True)
class FixAttempt:
    """A re-run of a cell that failed earlier in the day's run, with its adapter or profile edited
    since: the cell's one fix attempt of the run."""

    framework: str
    split: str
    from_verdict: str
    from_run_id: str
    edited: str  # the files, e.g. "adapters/llamacpp.py"
    reference: str | None
    at: str

    def to_json(self) -> dict[str, Any]:
        return {"from_verdict": self.from_verdict, "from_run_id": self.from_run_id, "edited": self.edited,
                "reference": self.reference, "at": self.at, "outcome": None}


def attempt_refusal(key: str, recorded: dict[str, Any] | None) -> str | None:
    """Why a new attempt of cell `key` (`framework/split`) is refused, or None when it is its first."""
    if recorded is None:
        return None
    outcome = recorded.get("outcome") or "not finished"
    return (f"{key}: a second fix attempt this run (its first, at {recorded['at']} editing {recorded['edited']}, "
            f"ended {outcome}); one fix attempt per cell per run: record a skip or wait for the next run")
