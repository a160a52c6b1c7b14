"""`fixed`: a cell that failed earlier in this run and passes now because its adapter was edited.

The weekly run's way of repairing a cell (a person, or an agent following the runbook): edit the
framework's adapter module, verify, re-run the cell. The re-run then ends `fixed` rather than
`ok`, so the week's record says a repair happened and which earlier failure it answered. The
evidence must hold on both sides, never a guess:

- the previous result of the same cell (`bench.run.cell_result.previous_result`, chosen as the
  reports choose it) ended with a verdict an adapter can cause: failed, all-failed, wrong-model,
  capped or degraded. Never `oom`: the machine lacked memory, which no adapter edit fixes;
- it finished on or after the run's day (`bench.base.clock.run_day`), so last week's failure
  followed by this week's pass is not passed off as a fix made today;
- both results record the adapter module's sha256 (`harness.adapter`), and they differ. An
  unchanged adapter that passes on a second try is a retry, not a fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from bench.core.result_model import FixBlock, Result
from bench.core.store import LoadedResult
from bench.core.verdicts import CellVerdict, Verdict

FIXABLE = (Verdict.FAILED, Verdict.ALL_FAILED, Verdict.WRONG_MODEL, Verdict.CAPPED, Verdict.DEGRADED)


@dataclass(frozen=True)
class Fix:
    """The earlier failure an adapter edit answered, and the two adapter digests."""

    verdict: str
    reason: str
    result_file: str
    run_id: str
    finished_at: str
    adapter_file: str
    sha256_before: str
    sha256_after: str

    def to_json(self) -> FixBlock:
        return {"from_verdict": self.verdict, "from_reason": self.reason, "from_result": self.result_file,
                "from_run_id": self.run_id, "from_finished_at": self.finished_at, "adapter": self.adapter_file,
                "sha256_before": self.sha256_before, "sha256_after": self.sha256_after}

    def verdict_after(self, ok: CellVerdict) -> CellVerdict:
        """The re-run's verdict: `fixed`, its reason naming the failure and the edited file."""
        at = datetime.fromisoformat(self.finished_at).astimezone().strftime("%H:%M")
        reason = (f"ok after an edit of {self.adapter_file}; it was {self.verdict} at {at} "
                  f"(run {self.run_id}): {self.reason}")
        return CellVerdict(Verdict.FIXED, reason, ok.annotations)


def verified_fix(previous: LoadedResult | None, result: Result, day: str) -> Fix | None:
    """The fix `result` verifies, or None (see the module docstring for the three conditions)."""
    if previous is None or result["verdict"]["verdict"] != Verdict.OK.value:
        return None
    old = previous.data
    if Verdict(old["verdict"]["verdict"]) not in FIXABLE:
        return None
    if datetime.fromisoformat(previous.finished_at).astimezone().date() < date.fromisoformat(day):
        return None
    before, after = old.get("harness", {}).get("adapter"), result.get("harness", {}).get("adapter")
    if not before or not after or before["sha256"] == after["sha256"]:
        return None
    return Fix(old["verdict"]["verdict"], old["verdict"]["reason"], previous.path.name, old["run_id"],
               previous.finished_at, after["file"], before["sha256"], after["sha256"])
