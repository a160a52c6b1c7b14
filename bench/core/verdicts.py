"""A cell's verdict, computed from the evidence it recorded (docs/verdicts.md).

The rules apply top to bottom; the first that matches wins, and every verdict carries a one-line
reason a user can act on. Failure rate is over all measured requests of all levels.

OOM comes right after `skipped`, before a start failure: a server the kernel killed for memory
while loading also "exited during start", and the evidence is the more useful reason. An OOM is
never retried (the machine lacks the memory, so a retry fails the same way or, on a lucky run,
reports a regression that is not there): its JSON says `"retryable": false`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from http import HTTPStatus
from typing import Any

from bench.base.defaults import DEFAULT_DEGRADED_THRESHOLD
from bench.core.annotations import annotations_for, client_limited
from bench.core.level_run import level_label
from bench.core.result.model import DominantError, Level, VerdictBlock
from bench.host.memory.oom import describe_oom


class Verdict(str, Enum):
    OK = "ok"
    FIXED = "fixed"  # ok, after an adapter edit answered this cell's failure earlier in the run (bench.run.fixes)
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

    @property
    def rank(self) -> int:
        """Worst first: the order a review sorts and counts verdicts in."""
        return VERDICT_LOOKS[self].rank

    @property
    def tone(self) -> str:
        """How a report colours it: "failure", "warning", "fixed", "ok" or "skipped"."""
        return VERDICT_LOOKS[self].tone

    @property
    def listed_as_failure(self) -> bool:
        """Whether the run's journal lists the cell under Failures (an OOM has a section of its own)."""
        return VERDICT_LOOKS[self].listed_as_failure


@dataclass(frozen=True)
class VerdictLook:
    rank: int
    tone: str
    listed_as_failure: bool


# Every verdict's place in the reports, stated once: worst first; failures red, capped and
# degraded amber (a degraded cell passes, but is not the green of ok), fixed blue (ok, with a
# repair to review), ok green, skipped grey.
VERDICT_LOOKS = {
    Verdict.FAILED: VerdictLook(0, "failure", True),
    Verdict.OOM: VerdictLook(1, "failure", False),
    Verdict.WRONG_MODEL: VerdictLook(2, "failure", True),
    Verdict.ALL_FAILED: VerdictLook(3, "failure", True),
    Verdict.CAPPED: VerdictLook(4, "warning", True),
    Verdict.DEGRADED: VerdictLook(5, "warning", True),
    Verdict.FIXED: VerdictLook(6, "fixed", False),
    Verdict.OK: VerdictLook(7, "ok", False),
    Verdict.SKIPPED: VerdictLook(8, "skipped", False),
}


# An unattended run (weekly, nightly) is green only when every cell ended with one of these;
# degraded and capped cells, fine for a pytest run, need a person's look there. A fixed cell
# measured ok; its fix is on the weekly branch as its own commit, for review there.
GREEN_VERDICTS = (Verdict.OK.value, Verdict.FIXED.value, Verdict.SKIPPED.value)
ALL_FAILED_FRACTION = 0.999
NOT_LOADED_STATUSES = (404, 409)  # the server does not have the model we asked for
KEY_STATUSES = (401, 403)  # the server wants an API key, or another one


def wants_key(status: int, key_from: str | None) -> str:
    """What a 401 or 403 means to the user, and how to give the server its key; `key_from` says
    where the key sent came from (None: none was sent)."""
    answer = f"the server answered HTTP {status} {_phrase(status)}"
    if key_from is None:
        return f"{answer}: it wants an API key; pass --api-key KEY or set OPENAI_API_KEY"
    return f"{answer} to the API key from {key_from}: it refused that key; pass the right one with --api-key KEY"


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


@dataclass(frozen=True)
class Identity:
    """What the server says it serves, against what the profile expects."""

    expected: str
    listed: tuple[str, ...] | None  # ids from /v1/models; None when the listing failed
    responses: tuple[str, ...]  # distinct `model` values in responses
    aliases: tuple[str, ...] = ()  # other ids the server names the expected model by (`<path>@main`)
    lists_served: bool = True  # False: /v1/models lists something else (a download cache), so it is no evidence

    def mismatch(self) -> str | None:
        names = {self.expected, *self.aliases}
        if self.lists_served and self.listed is not None and not names.intersection(self.listed):
            return f"/v1/models lists {', '.join(self.listed) or 'nothing'}, not {self.expected}"
        others = [m for m in self.responses if m not in names]
        if others:
            return f"responses name {', '.join(others)}, not {self.expected}"
        return None


@dataclass(frozen=True)
class Evidence:
    levels: tuple[Level, ...] = ()  # per-level summaries (bench.core.metrics.summarize_level)
    identity: Identity | None = None
    skipped: str | None = None
    start_failure: str | None = None
    server_exit: str | None = None  # the server ended (or an endpoint stopped answering) unasked: where, when
    oom: dict | str | None = None  # bench.host.memory.oom evidence (ExitInfo.oom / ServerStartError.oom), or a reason
    capped: str | None = None
    api_key_from: str | None = None  # where the API key sent came from (None: none was sent)


@dataclass(frozen=True)
class CellVerdict:
    verdict: Verdict
    reason: str
    annotations: tuple[str, ...] = field(default=())

    @property
    def retryable(self) -> bool | None:
        """False for an OOM (never retried); None: the verdict alone does not decide."""
        return False if self.verdict is Verdict.OOM else None

    def to_json(self) -> VerdictBlock:
        out: VerdictBlock = {"verdict": self.verdict.value, "reason": self.reason,
                             "annotations": list(self.annotations)}
        if self.retryable is not None:
            out["retryable"] = self.retryable
        return out

    @classmethod
    def from_json(cls, block: VerdictBlock) -> CellVerdict:
        """The verdict a result recorded (its `suspicious` note, if any, stays in the block)."""
        return cls(Verdict(block["verdict"]), block["reason"], tuple(block["annotations"]))


def _totals(levels: Sequence[Level]) -> tuple[int, int]:
    done = sum(lv["successful"] + lv["failed"] for lv in levels)
    failed = sum(lv["failed"] for lv in levels)
    return done, failed


def dominant_error(levels: Sequence[Level]) -> DominantError | None:
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


def _describe(err: DominantError | None) -> str:
    if not err:
        return "no error recorded"
    status = f" {err['http_status']}" if err.get("http_status") else ""
    return f"mostly {err['type']}{status} ({err['count']}x)"


# the error types whose message is the server's own words (an error body, an error event)
_SERVER_WORDS_TYPES = ("http_4xx", "http_5xx", "stream_error_event")
RATE_LIMITED = 429


def _samples_of(levels: Sequence[Level], err: DominantError) -> list[Mapping[str, Any]]:
    return [s for lv in levels for s in (lv.get("error_samples") or {}).get(err["type"], ())
            if s.get("http_status") == err.get("http_status")]


def _explain(levels: Sequence[Level], err: DominantError | None) -> str:
    """`_describe`, and what the server said: a 429 is "rate-limited" with the Retry-After values
    the samples recorded; an error body's or an error event's message is quoted."""
    if err and err.get("http_status") == RATE_LIMITED:
        waits = sorted({s["retry_after"] for s in _samples_of(levels, err) if s.get("retry_after")})
        wait = f"Retry-After: {', '.join(waits)}" if waits else "no Retry-After"
        return f"rate-limited: HTTP 429 x {err['count']} ({wait})"
    if err and err["type"] in _SERVER_WORDS_TYPES and (samples := _samples_of(levels, err)):
        return f"{_describe(err)}: {samples[0]['message']}"
    return _describe(err)


def classify(ev: Evidence, *, degraded_threshold: float = DEFAULT_DEGRADED_THRESHOLD) -> CellVerdict:
    notes = annotations_for(ev.levels)
    if ev.skipped:
        return CellVerdict(Verdict.SKIPPED, ev.skipped)
    if ev.oom:  # before a start failure: an OOM while loading is also an exit during start
        reason = describe_oom(ev.oom) if isinstance(ev.oom, dict) else ev.oom
        return CellVerdict(Verdict.OOM, reason, notes)
    if ev.start_failure:  # at any level; the levels measured before it stay in the result
        return CellVerdict(Verdict.FAILED, ev.start_failure, notes)
    if ev.server_exit:  # whatever it answered before it went, a server that dies is never ok
        return CellVerdict(Verdict.FAILED, ev.server_exit, notes)
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
        if dominant and (status := dominant.get("http_status")) in KEY_STATUSES:
            return CellVerdict(Verdict.ALL_FAILED, f"{failed}/{done} requests failed, {_describe(dominant)}: "
                                                   f"{wants_key(status or 0, ev.api_key_from)}", notes)
        why = _explain(ev.levels, dominant)
        return CellVerdict(Verdict.ALL_FAILED, f"{failed}/{done} requests failed, {why}", notes)
    if done:
        notes += ("uncertain",) if straddles(failed, done, degraded_threshold) else ()
    if done and failed / done >= degraded_threshold:
        return CellVerdict(Verdict.DEGRADED, f"{failed}/{done} requests failed ({_rate_ci(failed, done)}), "
                                             f"{_explain(ev.levels, dominant)}", notes)
    if limited := client_limited(ev.levels):  # saturated or starved: the numbers include the client's delay
        return CellVerdict(Verdict.DEGRADED, limited, notes)
    if not done:
        return CellVerdict(Verdict.FAILED, "no request was measured", notes)
    levels = ", ".join(f"{level_label(lv)}: {_tps(lv.get('output_throughput_tps'))}" for lv in ev.levels)
    return CellVerdict(Verdict.OK,
                       f"{done - failed}/{done} requests ok (failure rate {_rate_ci(failed, done)}); {levels}", notes)


Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


def wilson_interval(failed: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a failure rate p = failed/n:

        centre = (p + z²/2n) / (1 + z²/n)
        half   = z · sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)

    Unlike p ± z·sqrt(p(1-p)/n) it stays inside [0, 1] and does not collapse to a point at
    0 or n failures, which is where small samples mislead most (0 of 5 failed says little)."""
    if n <= 0:
        return 0.0, 1.0
    p = failed / n
    scale = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def straddles(failed: int, n: int, threshold: float) -> bool:
    """The sample cannot tell which side of `threshold` the true failure rate lies on."""
    low, high = wilson_interval(failed, n)
    return low < threshold <= high


def _tps(value: float | None) -> str:
    return "no output" if value is None else f"{value:.1f} tok/s"


def _rate_ci(failed: int, n: int) -> str:
    """"30.0%, 95% CI 18.1-45.4%": the observed failure rate and its Wilson interval."""
    low, high = wilson_interval(failed, n)
    return f"{100 * failed / n:.1f}%, 95% CI {100 * low:.1f}-{100 * high:.1f}%"
