"""A result's standing in a report: `ok`, or the marks that keep its figures out of any order.

A figure may be set beside another's only when both results stand `ok`: verdict ok or fixed,
finished, measured by cellbench, and from the run the report is about. Any other result keeps its
figures in the report, each carrying its marks, and out of every "faster than" or ranking
sentence; it sorts after the ok ones. The marks, in the order they are shown:

- `interrupted`: the result is unfinished (its `unfinished` block: the cell writes one after each
  level while it runs) and its writer is gone: the run was killed. Its verdict (`capped`,
  "unfinished: ...") is replaced by this mark. An unfinished result whose writer still runs keeps
  its verdict's mark (`capped`) and its reason ("unfinished: ...").
- its verdict, where it is not ok or fixed: `degraded`, `capped`, `wrong-model`, `all-failed`,
  `failed`, `oom`. A wrong-model result's figures are the served model's (`served_model`).
- `imported`: converted from another benchmark's file (bench.core.result.imported); its run is that tool's.
- `not from this run`: its run id is not this run's (`this_run`); the mark names its run and day.
  No `this_run` (a comparison of two named runs) gives no such mark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from bench.core.result import imported, store
from bench.core.verdicts import Verdict

OK = "ok"
INTERRUPTED = "interrupted"
IMPORTED = "imported"
NOT_THIS_RUN = "not from this run"
OK_VERDICTS = (Verdict.OK.value, Verdict.FIXED.value)
# The short tag each mark has at a number ("512.3 (degraded)"); a verdict's is its own name.
TAGS = {INTERRUPTED: INTERRUPTED, IMPORTED: IMPORTED, NOT_THIS_RUN: "not this run"}


@dataclass(frozen=True)
class Mark:
    """One reason a result's figures stand apart: its kind, and what a reader needs to know of it."""

    kind: str  # a verdict, INTERRUPTED, IMPORTED or NOT_THIS_RUN
    detail: str  # the verdict's reason; "run X of 2026-12-01"; "its writer, pid 12 on vm, is gone"
    brief: str = ""  # the part of the detail a flag field carries: "served other-model", "run X of 2026-12-01"

    @property
    def tag(self) -> str:
        return TAGS.get(self.kind, self.kind)

    def text(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind

    def short(self) -> str:
        """"degraded", "not from this run (run X of 2026-12-01)": the mark as one CSV cell holds it."""
        return f"{self.kind} ({self.brief})" if self.brief else self.kind


class MarkBlock(TypedDict):
    """One `Mark`, as a StandingBlock lists it."""

    kind: str
    detail: str
    brief: str


class _StandingBlockRequired(TypedDict):
    standing: str
    ok: bool
    short: str
    text: str
    marks: list[MarkBlock]


class StandingBlock(_StandingBlockRequired, total=False):
    """`Standing.to_json()`: a result's flag in comparison.json and merged.json."""

    served_model: str


@dataclass(frozen=True)
class Standing:
    marks: tuple[Mark, ...] = ()
    served_model: str | None = None  # wrong-model: the model the figures are of ("unknown" when none answered)

    @property
    def ok(self) -> bool:
        return not self.marks

    @property
    def word(self) -> str:
        """`ok`, or the first mark's kind."""
        return self.marks[0].kind if self.marks else OK

    @property
    def tags(self) -> str:
        """"degraded, not this run": what follows a marked number in parentheses; "" when ok."""
        return ", ".join(m.tag for m in self.marks)

    def short(self) -> str:
        """"ok", or every mark's short form: "degraded; not from this run (run X of 2026-12-01)"."""
        return "; ".join(m.short() for m in self.marks) or OK

    def text(self) -> str:
        return "; ".join(m.text() for m in self.marks) or OK

    def without(self, kind: str) -> Standing:
        return Standing(tuple(m for m in self.marks if m.kind != kind), self.served_model)

    def to_json(self) -> StandingBlock:
        """comparison.json's and merged.json's flag of one result: `standing` ("ok" or the first
        mark), `ok`, `short` (the CSV's flag), `text` and each mark."""
        found: StandingBlock = {"standing": self.word, "ok": self.ok, "short": self.short(), "text": self.text(),
                                 "marks": [{"kind": m.kind, "detail": m.detail, "brief": m.brief} for m in self.marks]}
        if self.served_model is not None:
            found["served_model"] = self.served_model
        return found

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Standing:
        return cls(tuple(Mark(m["kind"], m["detail"], m.get("brief", "")) for m in data.get("marks", ())),
                   data.get("served_model"))


def run_text(run_id: str, finished_at: str | None) -> str:
    """"run 20261201T220000Z-ab12 of 2026-12-01" (the day it finished), or without the day."""
    return f"run {run_id}" + (f" of {finished_at[:10]}" if finished_at else "")


def served_model(result: Mapping[str, Any]) -> str:
    """The model a wrong-model result's server served: the one its responses named, else the one
    its /v1/models listed, other than the one asked for; "unknown" when neither names one."""
    model = result.get("model") or {}
    asked, served = model.get("requested"), model.get("served") or {}
    for names in (served.get("responses") or (), served.get("listed") or ()):
        others = [n for n in names if n != asked]
        if others:
            return ", ".join(others)
    return "unknown"


def writer_gone(unfinished: Mapping[str, Any]) -> str | None:
    """Why the writer of an unfinished result is gone ("its writer, pid 12 on vm, is gone"), or None
    while it still runs (bench.core.result.store.writer_gone decides). A writer on another host is taken
    for gone: it cannot be asked from here, and a results folder is one machine's."""
    pid, host, at = unfinished.get("pid"), unfinished.get("host"), _instant(unfinished.get("updated_at"))
    if not isinstance(pid, int) or not isinstance(host, str) or at is None:
        return "it names no writer"
    gone = store.writer_ended(pid, host, at)
    if gone is None:
        return f"it was written on {host}, not here"
    return f"its writer, pid {pid} on {host}, is gone" if gone else None


def _instant(iso: Any) -> float | None:
    try:
        moment = datetime.fromisoformat(str(iso))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.astimezone()).timestamp()


@dataclass(frozen=True)
class ChosenRun:
    """A run a report is about, with who chose it, in the words REPORT.md's *Runs* line gives
    after its id: "this pytest session's", "the weekly run's"."""

    ids: tuple[str, ...]
    by: str


ThisRunIds = str | Sequence[str] | ChosenRun | None
"""The run a report is about: one run id, several (a weekly run's sessions: its splits share one,
its retries have their own), either with who chose it (ChosenRun), or None (no run: two named
runs compared)."""


def run_ids(this_run: ThisRunIds) -> tuple[str, ...]:
    """`this_run` as a tuple of run ids, the first the run's own: () for None."""
    if this_run is None:
        return ()
    if isinstance(this_run, ChosenRun):
        return tuple(dict.fromkeys(this_run.ids))
    return (this_run,) if isinstance(this_run, str) else tuple(dict.fromkeys(this_run))


def runs_text(this_run: ThisRunIds) -> str:
    """"R1", or "R1 (with R2, R3)" for a run of several sessions."""
    ids = run_ids(this_run)
    return ids[0] + (f" (with {', '.join(ids[1:])})" if len(ids) > 1 else "") if ids else "none"


def standing_of(result: Mapping[str, Any], this_run: ThisRunIds = None) -> Standing:
    """The standing of `result` (a result document, or the part of one a report row carries:
    run_id, finished_at, verdict, model, imported, unfinished) in a report about run `this_run`
    (a run id, or the ids of a run's several sessions)."""
    marks: list[Mark] = []
    verdict = (result.get("verdict") or {}).get("verdict", "")
    reason = (result.get("verdict") or {}).get("reason", "")
    unfinished = result.get("unfinished")
    gone = writer_gone(unfinished) if isinstance(unfinished, Mapping) else None
    served = None
    if gone is not None:
        done = unfinished.get("levels_done") if isinstance(unfinished, Mapping) else None
        kept = f"{done} level{'' if done == 1 else 's'} kept" if isinstance(done, int) else "its finished levels kept"
        marks.append(Mark(INTERRUPTED, f"unfinished and {gone}; {kept}", kept))
    elif verdict not in OK_VERDICTS:
        if verdict == Verdict.WRONG_MODEL.value:
            served = served_model(result)
            asked = (result.get("model") or {}).get("requested")
            marks.append(Mark(verdict, f"{reason}; its figures are {served}'s, not {asked}'s", f"served {served}"))
        else:
            marks.append(Mark(verdict or "no verdict", reason))
    source = imported.origin(result)
    if source is not None:
        marks.append(Mark(IMPORTED, f"{source.label} from {source.file}", source.tool))
    elif (ids := run_ids(this_run)) and result.get("run_id") not in ids:
        run = run_text(str(result.get("run_id")), result.get("finished_at"))
        marks.append(Mark(NOT_THIS_RUN, f"{run}; this run is {runs_text(ids)}", run))
    return Standing(tuple(marks), served)


def facts(result: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a result `standing_of` reads, small enough to travel with an HTML row."""
    found = {k: result[k] for k in ("run_id", "finished_at", "verdict", "unfinished") if k in result}
    if "model" in result:
        found["model"] = {k: result["model"][k] for k in ("requested", "served") if k in result["model"]}
    if (source := imported.origin(result)) is not None:
        found["imported"] = {"label": source.tool, "file": source.file}
    return found


def this_run_of(results: Iterable[Mapping[str, Any]]) -> str | None:
    """The run a folder's report is about when no one says: the run of its newest measured result
    (latest run id, then finish time: bench.core.result.store's order); None without one."""
    measured = [r for r in results if imported.origin(r) is None]
    newest = max(measured, key=lambda r: (str(r["run_id"])[:16], _instant(r.get("finished_at")) or 0.0,
                                          str(r["run_id"])), default=None)
    return None if newest is None else str(newest["run_id"])


def order(names: Iterable[str], standings: Mapping[str, Standing]) -> list[str]:
    """`names` with the ok ones first, each group in its given order."""
    names = list(names)
    return [n for n in names if standings[n].ok] + [n for n in names if not standings[n].ok]
