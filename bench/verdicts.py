"""A cell's verdict, computed from the evidence it recorded (../design/verdicts.md).

The rules apply top to bottom; the first that matches wins, and every verdict carries a one-line
reason a user can act on. Failure rate is over all measured requests of all levels.

OOM comes right after `skipped`, before a start failure: a server the kernel killed for memory
while loading also "exited during start", and the evidence is the more useful reason. An OOM is
never retried (the machine lacks the memory; a retry chases a ghost regression, seed Phase 3):
its JSON says `"retryable": false`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from bench.oom import describe_oom


class Verdict(str, Enum):
    OK = "ok"
    DEGRADED = "degraded"
    ALL_FAILED = "all-failed"
    WRONG_MODEL = "wrong-model"
    CAPPED = "capped"
    OOM = "oom"
    FAILED = "failed"
    SKIPPED = "skipped"

    @property
    def is_failure(self) -> bool:
        return self in (Verdict.FAILED, Verdict.OOM, Verdict.WRONG_MODEL, Verdict.ALL_FAILED)


ALL_FAILED_FRACTION = 0.999
NOT_LOADED_STATUSES = (404, 409)  # the server does not have the model we asked for


@dataclass(frozen=True)
class Identity:
    """What the server says it serves, against what the profile expects."""

    expected: str
    listed: tuple[str, ...] | None  # ids from /v1/models; None when the listing failed
    responses: tuple[str, ...]  # distinct `model` values in responses

    def mismatch(self) -> str | None:
        if self.listed is not None and self.expected not in self.listed:
            return f"/v1/models lists {', '.join(self.listed) or 'nothing'}, not {self.expected}"
        others = [m for m in self.responses if m != self.expected]
        if others:
            return f"responses name {', '.join(others)}, not {self.expected}"
        return None


@dataclass(frozen=True)
class Evidence:
    levels: tuple[dict, ...] = ()  # per-level summaries (bench.metrics.summarize_level)
    identity: Identity | None = None
    skipped: str | None = None
    start_failure: str | None = None
    oom: dict | str | None = None  # bench.oom evidence (ExitInfo.oom / ServerStartError.oom), or a reason
    capped: str | None = None


@dataclass(frozen=True)
class CellVerdict:
    verdict: Verdict
    reason: str
    annotations: tuple[str, ...] = field(default=())

    @property
    def retryable(self) -> bool | None:
        """False for an OOM (never retried); None: the verdict alone does not decide."""
        return False if self.verdict is Verdict.OOM else None

    def to_json(self) -> dict:
        out = {"verdict": self.verdict.value, "reason": self.reason, "annotations": list(self.annotations)}
        if self.retryable is not None:
            out["retryable"] = self.retryable
        return out


def _totals(levels: tuple[dict, ...]) -> tuple[int, int]:
    done = sum(lv["successful"] + lv["failed"] for lv in levels)
    failed = sum(lv["failed"] for lv in levels)
    return done, failed


def dominant_error(levels: tuple[dict, ...]) -> dict | None:
    """The most frequent (error type, HTTP status) over all levels, with its count."""
    counts: dict[tuple, int] = {}
    for lv in levels:
        dom = lv.get("dominant_error")
        if dom:
            key = (dom["type"], dom.get("http_status"))
            counts[key] = counts.get(key, 0) + dom["count"]
    if not counts:
        return None
    (etype, status), count = max(counts.items(), key=lambda kv: kv[1])
    return {"type": etype, "http_status": status, "count": count}


def _describe(err: dict | None) -> str:
    if not err:
        return "no error recorded"
    status = f" {err['http_status']}" if err.get("http_status") else ""
    return f"mostly {err['type']}{status} ({err['count']}x)"


def annotations_for(levels: tuple[dict, ...]) -> tuple[str, ...]:
    notes = []
    if any(lv.get("itl_per_chunk") for lv in levels):
        notes.append("chunk-bundling")
    return tuple(notes)


def classify(ev: Evidence, *, degraded_fraction: float = 0.2) -> CellVerdict:
    notes = annotations_for(ev.levels)
    if ev.skipped:
        return CellVerdict(Verdict.SKIPPED, ev.skipped)
    if ev.oom:  # before a start failure: an OOM while loading is also an exit during start
        reason = describe_oom(ev.oom) if isinstance(ev.oom, dict) else ev.oom
        return CellVerdict(Verdict.OOM, reason, notes)
    if ev.start_failure:  # at any level; the levels measured before it stay in the result
        return CellVerdict(Verdict.FAILED, ev.start_failure, notes)
    done, failed = _totals(ev.levels)
    dominant = dominant_error(ev.levels)
    if ev.identity is not None and (why := ev.identity.mismatch()):
        return CellVerdict(Verdict.WRONG_MODEL, why, notes)
    if ev.capped:  # stopped by the budget or the hang watchdog: its cancellations are not the server's failures
        return CellVerdict(Verdict.CAPPED, ev.capped, notes)
    if done and failed / done >= ALL_FAILED_FRACTION:
        if dominant and dominant.get("http_status") in NOT_LOADED_STATUSES:
            return CellVerdict(
                Verdict.WRONG_MODEL,
                f"every request answered HTTP {dominant['http_status']}: the server does not have the model",
                notes,
            )
        return CellVerdict(Verdict.ALL_FAILED, f"{failed}/{done} requests failed, {_describe(dominant)}", notes)
    if done and failed / done >= degraded_fraction:
        return CellVerdict(Verdict.DEGRADED, f"{failed}/{done} requests failed, {_describe(dominant)}", notes)
    bound = [lv["concurrency"] for lv in ev.levels if lv.get("client", {}).get("client_bound")]
    if bound:
        return CellVerdict(
            Verdict.DEGRADED, f"client-bound at concurrency {', '.join(map(str, bound))}: numbers measure the client", notes
        )
    if not done:
        return CellVerdict(Verdict.FAILED, "no request was measured", notes)
    levels = ", ".join(f"c={lv['concurrency']}: {lv['output_throughput_tps']:.1f} tok/s" for lv in ev.levels)
    suffix = f" ({failed} failed)" if failed else ""
    return CellVerdict(Verdict.OK, f"{done - failed}/{done} requests ok{suffix}; {levels}", notes)
