"""Which cells a weekly run runs, and `cellbench weekly skip`.

Before the sessions start (`plan_cells`):
- a skip on a diagnosis that still holds (bench.reports.journal.skips: recorded by a person, or
  carried from the prior journals, SiliconBench's among them) keeps its cell out of the sessions
  and is journaled as one `skipped` line; one that lapsed lets the cell run, and says why;
- a cell that failed earlier in the day and whose adapter or profile was edited since is the
  cell's fix attempt of the run, one re-run with nothing edited is its retry; a second of either
  is refused (the cell is not run) and journaled;
- a cell that ended `oom` earlier in the day is not run again that day (the machine lacked
  memory, which a re-run does not add), and the journal says so;
- the prior journals' auto-fixes are listed in the journal.

After them (`settle_cells`): each attempt's outcome, a lapsed skip whose cell passed is cleared,
and a failure that repeats the previous journal's is marked so its triage says skip; every
failure gets its prior occurrences (the previous journal's word on the cell) for its block.

`cellbench weekly skip FRAMEWORK SPLIT --reason TEXT` records a skip, `--clear` ends one,
`--list` prints those in force.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import adapters
from bench.base.clock import now_iso, run_day
from bench.base.defaults import SPLITS
from bench.base.paths import PROJECT_ROOT
from bench.cli.choice import choose
from bench.core.result.store import RESULT_NAME
from bench.core.verdicts import GREEN_VERDICTS, Verdict
from bench.plugins.opts.settings import cell_option
from bench.reports.journal import DIAGNOSED_SKIP, CellEntry, Journal
from bench.reports.journal.prior import recent
from bench.reports.journal.skips import clear_skip, diagnosed_skips, holds_line, lapse, record_skip
from bench.reports.journal.triage import PRIOR_FAILURE, PRIOR_OCCURRENCES
from bench.run.fixes import FIXABLE, FixAttempt, attempt_refusal
from bench.setup.profiles import ProfileError

_VARIABLE = re.compile(r"\d+(\.\d+)?|/\S+|'[^']*'")


@dataclass
class CellPlan:
    held: dict[str, set[str]] = field(default_factory=dict)  # split -> frameworks not run (skip or refusal)
    lapsed: list[str] = field(default_factory=list)  # "fw/split" of diagnosed skips that lapsed this run

    def left_out(self, split: str) -> list[str]:
        return sorted(self.held.get(split, ()))


def _adapter_sha(framework: str) -> str | None:
    return adapters.source(framework)["sha256"] if framework in adapters.registry() else None


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _edited_since(entry: CellEntry, repo: Path, profile_file: Path, edits: list[str]) -> list[str]:
    """The adapter module and profile file of the failed cell that differ from what it ran: by the
    digests its result recorded, else (no result, or an older one) by git's word against HEAD.
    The adapter is the module the sessions run (this checkout's, as this process read it), named
    relative to `repo` when it lies there."""
    ran: dict = {}
    if entry.result_path:
        try:
            ran = json.loads(Path(entry.result_path).read_text()).get("harness") or {}
        except (OSError, ValueError):
            ran = {}
    files = []
    if entry.framework in adapters.registry():
        module = PROJECT_ROOT / adapters.source(entry.framework)["file"]
        files.append(("adapter", _relative(module, repo), _adapter_sha(entry.framework)))
    files.append(("profile", _relative(profile_file, repo), _sha(profile_file)))
    edited = []
    for key, rel, now in files:
        recorded = (ran.get(key) or {}).get("sha256")
        if (recorded and recorded != now) or (not recorded and rel in edits):
            edited.append(rel)
    return edited


def _relative(path: Path, repo: Path) -> str:
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return str(path)


def plan_cells(journal: Journal, frameworks: list[str], splits: list[str], updates: list[dict], repo: Path,
               profile_file: Path, edits: list[str], reference: str | None) -> CellPlan:
    """Journal the carried skips, the fix attempts and refusals of this run; say which cells to leave out."""
    plan = CellPlan()
    by_framework = {u["framework"]: u for u in updates}
    unknown = []
    for key, skip in sorted(diagnosed_skips(journal.directory, journal.day).items()):
        framework, _, split = key.partition("/")
        if split not in splits or framework not in frameworks:
            unknown += [key] if framework not in adapters.registry() and split in splits else []
            continue
        why_not = lapse(skip, by_framework.get(framework), _adapter_sha(framework))
        if why_not:
            journal.notes.append(f"{key}: the skip of {skip['since']} ({skip['reason']}) no longer holds: {why_not}; "
                                 "the cell runs")
            plan.lapsed.append(key)
            continue
        holds = holds_line(by_framework.get(framework), bool(skip.get("adapter_sha256")))
        plan.held.setdefault(split, set()).add(framework)
        journal.record(CellEntry(framework, split, Verdict.SKIPPED.value,
                                 f"diagnosed, not fixed: {skip['reason']}",
                                 evidence={DIAGNOSED_SKIP: {**skip, "holds": holds}},
                                 carried_from=skip["since"] if skip["since"] < journal.day else None))
    if unknown:
        journal.notes.append(f"prior skips of frameworks with no cellbench adapter, not carried: {', '.join(unknown)}")
    for split in splits:
        for framework in frameworks:
            key, entry = f"{framework}/{split}", journal.cells.get((framework, split))
            if entry is not None and entry.verdict == Verdict.OOM.value and framework not in plan.held.get(split, ()):
                journal.refused.append(oom_refusal(key, entry))
                plan.held.setdefault(split, set()).add(framework)
                continue
            fixable = entry is not None and entry.verdict in {v.value for v in FIXABLE}
            if entry is None or not fixable or framework in plan.held.get(split, ()):
                continue
            edited = _edited_since(entry, repo, profile_file, edits)
            kind = journal.fix_attempts if edited else journal.retries  # nothing edited: a retry
            refusal = attempt_refusal(key, kind.get(key)) if edited else retry_refusal(key, kind.get(key))
            if refusal:
                journal.refused.append(refusal)
                plan.held.setdefault(split, set()).add(framework)
                continue
            named = RESULT_NAME.match(Path(entry.result_path).name) if entry.result_path else None
            run_id = named["run_id"] if named else "?"  # <fw>_<run id>[-<attempt>].json
            kind[key] = FixAttempt(framework, split, entry.verdict, run_id, ", ".join(edited) or "nothing",
                                   reference if edited else None, now_iso()).to_json()
    priors = recent(journal.directory, journal.day)
    journal.earlier_fixes = [fix.line() for prior in priors for fix in prior.fixes]
    if priors:
        journal.notes.append("Prior journals read: " + ", ".join(
            f"{prior.path.name}" + (f" (SiliconBench's, in {prior.path.parent})" if prior.siliconbench_folder else "")
            for prior in priors))
    journal.save()
    return plan


def retry_refusal(key: str, recorded: dict | None) -> str | None:
    """Why a second re-run of cell `key` with nothing edited is refused, or None for its first."""
    if recorded is None:
        return None
    return (f"{key}: a second retry this run (its first, at {recorded['at']}, ended "
            f"{recorded.get('outcome') or 'not finished'}); retry once, then fix or skip")


def oom_refusal(key: str, entry: CellEntry) -> str:
    """Why a cell that ended `oom` earlier in the day is not run again that day."""
    at = entry.finished_at[11:16] if len(entry.finished_at) >= 16 else entry.finished_at
    return (f"{key}: it ended oom at {at} today ({entry.reason}); an oom cell is not re-run the same day: the "
            "machine lacked memory, which a re-run does not add (see OOM Cells for the mitigation)")


def _masked(cell: CellEntry) -> str:
    return _VARIABLE.sub("…", (cell.reason or cell.verdict).replace(cell.framework, "<framework>"))


def settle_cells(journal: Journal, plan: CellPlan, run_id: str) -> None:
    """After the sessions: attempts' outcomes, lapsed skips cleared by a pass, repeated failures marked."""
    for key, attempt in journal.fix_attempts.items():
        framework, _, split = key.partition("/")
        cell = journal.cells.get((framework, split))
        if attempt.get("outcome") is not None or cell is None or run_id not in (cell.result_path or ""):
            continue
        attempt["outcome"] = cell.verdict
        if cell.verdict == Verdict.FIXED.value:
            attempt["outcome_line"] = f"{attempt['edited']}: fixed (reference {attempt['reference']})"
        elif cell.verdict == Verdict.OK.value:
            attempt["outcome_line"] = (f"{attempt['edited']}: ok, but not `fixed`: no upstream reference was given "
                                       "(`cellbench weekly --fix-ref`)")
        else:
            attempt["outcome_line"] = f"{attempt['edited']}: still {cell.verdict} ({cell.reason}); no second attempt"
    for key, retry in journal.retries.items():
        framework, _, split = key.partition("/")
        cell = journal.cells.get((framework, split))
        if retry.get("outcome") is None and cell is not None and run_id in (cell.result_path or ""):
            retry["outcome"] = cell.verdict
            retry["outcome_line"] = f"now {cell.verdict} ({cell.reason})"
    for key in plan.lapsed:
        framework, _, split = key.partition("/")
        cell = journal.cells.get((framework, split))
        if cell is not None and cell.verdict in GREEN_VERDICTS and cell.verdict != Verdict.SKIPPED.value:
            clear_skip(journal.directory, key, journal.day)  # a prior journal's skip of it ends too
            journal.notes.append(f"{key}: passed ({cell.verdict}) after its skip lapsed; the skip is cleared")
    previous = journal.previous()
    failing = {v.value for v in Verdict if v.listed_as_failure}
    for cell in journal.cells.values():
        if cell.verdict not in failing:
            continue
        old = previous.cells.get(cell.key) if previous else None
        same = old is not None and old.verdict == cell.verdict and _masked(old) == _masked(cell)
        if previous and old and same:
            cell.evidence[PRIOR_FAILURE] = f"it ended {old.verdict} the same way on {previous.day}"
        elif previous is None:
            cell.evidence[PRIOR_OCCURRENCES] = "none on record: no earlier journal in this folder"
        elif old is None:
            cell.evidence[PRIOR_OCCURRENCES] = f"none: the previous journal ({previous.day}) has no entry for the cell"
        else:
            cell.evidence[PRIOR_OCCURRENCES] = (f"none the same way: on {previous.day} it ended {old.verdict} "
                                                f"({old.reason})")
    journal.save()


def skip_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cellbench weekly skip",
                                     description="record a skip on a diagnosis: later weekly runs repeat it in one "
                                                 "journal line while it holds, until --clear")
    parser.add_argument("framework", nargs="?")
    parser.add_argument("split", nargs="?", choices=SPLITS)
    parser.add_argument("--reason", help="the diagnosis: why the cell is not fixed")
    parser.add_argument("--clear", action="store_true", help="end the cell's skip (a prior journal's too)")
    parser.add_argument("--list", action="store_true", help="print the skips in force for today's run")
    cell_option("--model").add_argument(parser)
    parser.add_argument("--repo", type=Path, default=PROJECT_ROOT, help="the git checkout that holds the results")
    cell_option("--results-dir").add_argument(parser, shown="<repo>/results")
    args = parser.parse_args(argv)
    try:
        choice = choose(args.model)
    except ProfileError as exc:
        parser.error(str(exc))
    scoped = (args.results_dir or args.repo / "results").resolve() / choice.profile.results_name / choice.machine.folder
    print(f"cellbench weekly skip: {choice.said()}: {scoped}/", file=sys.stderr)
    day = run_day()
    if args.list:
        for key, skip in sorted(diagnosed_skips(scoped, day).items()):
            print(f"{key}: since {skip['since']} ({skip['source']}): {skip['reason']}")
        return 0
    if not args.framework or not args.split:
        parser.error("name the cell: FRAMEWORK SPLIT")
    if args.framework not in adapters.registry():
        parser.error(f"no adapter named {args.framework}; known: {', '.join(sorted(adapters.registry()))}")
    key = f"{args.framework}/{args.split}"
    if args.clear:
        had = clear_skip(scoped, key, day)
        print(f"{key}: skip cleared" + ("" if had else " (none was recorded; prior journals' skips of it end too)"))
        return 0
    if not (args.reason or "").strip():
        parser.error("--reason says why the cell is skipped (the diagnosis), e.g. --reason \"upstream bug #123\"")
    record_skip(scoped, key, args.reason.strip(), day, _adapter_sha(args.framework))
    print(f"{key}: skipped from now on: {args.reason.strip()} ({scoped / 'weekly_skips.json'})")
    return 0
