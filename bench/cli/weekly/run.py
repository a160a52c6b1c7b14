"""The weekly run from start to end (the steps: bench.cli.weekly).

The exit code is 0 only when every pytest session ran its cells and no cell ended failed,
all-failed, wrong-model, oom, capped or degraded (skips for frameworks that do not run here are
not failures). A session that ended without running its cells (pytest's exit code 2
interrupted, 3 internal error, 4 usage error, 5 no tests collected, or a signal) fails the run
with that session's code and its last error line, in the output, the commit message and the
journal; exit code 1 means failing cells. An interrupted session, or Ctrl-C or SIGTERM of the
run itself, leaves the journal `partial`; the run's own interruption also commits and pushes
nothing (exit 2). Before the first cell the branch is claimed, the journal's preamble is
written and the machine kept awake; a set-up that can run no cell stops the run (exit 6, the
fix in the journal).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import adapters
from bench.base.git import GitError, edit_summary
from bench.cli.decisions.noise import refresh_floors
from bench.cli.update import describe, update_frameworks
from bench.cli.weekly.after.branch import commit_on_branch, fix_edits, fixes_of
from bench.cli.weekly.after.retry import retry_transient
from bench.cli.weekly.after.revert import revert_failed_fixes
from bench.cli.weekly.args import parse, scoped_folder
from bench.cli.weekly.cells import plan_cells, settle_cells, skip_main
from bench.cli.weekly.dryrun import dry_run
from bench.cli.weekly.sessions import Session, run_splits, runnable_frameworks
from bench.cli.weekly.start import claim_branch, edited_outside_adapters, kept_awake, setup_problem, tree_snapshot
from bench.core.result.files import new_run_id
from bench.core.verdicts import GREEN_VERDICTS, Verdict
from bench.reports.journal import LAST_PASS, Journal, write_index
from bench.reports.rebuild import rebuild
from bench.reports.standing import ChosenRun
from bench.setup.installs.updates import last_passing, since_last_pass

NOT_STARTED = 6  # the run stopped before its first cell (the branch or the set-up); pytest uses 0-5
NOT_PUSHED = 7  # the cells ran and were committed, but the branch did not reach the remote it was meant for
INTERRUPTED = 2  # Ctrl-C or SIGTERM of the weekly run itself, as pytest's own code for it


def explain_failures(journal: Journal, run_ids: set[str], repo: Path) -> None:
    """Each cell of this run (of its sessions' run ids: the splits', the retries') that failed gets,
    in its journal entry (beside the telemetry reading the recorder gave it), its last passing
    result and what changed since: the framework's releases in between (with where their notes
    are) and the commits and uncommitted edits of its adapter (bench.setup.installs.updates.since_last_pass)."""
    for cell in journal.cells.values():
        if cell.verdict in GREEN_VERDICTS or not cell.result_path:
            continue
        path = Path(cell.result_path)
        if not any(run_id in path.name for run_id in run_ids) or not path.is_file():
            continue
        adapter = adapters.registry().get(cell.framework)
        if cell.verdict == Verdict.OOM.value or adapter is None or adapter.bind is not None:
            continue
        result = json.loads(path.read_text())
        recipe = adapter.recipe_for(result["framework"].get("platform") or adapter.platform_here() or "")
        cell.evidence["since_last_pass"] = since_last_pass(recipe, repo, path.parent, result)
        last = last_passing(path.parent, cell.framework, machine=result["machine"]["slug"],
                            model=result["model"]["results_name"], before_run_id=result["run_id"])
        if last is not None:
            cell.evidence[LAST_PASS] = {"file": last.path.name, "version_then": last.data["framework"]["version"],
                                        "version_now": result["framework"]["version"]}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["skip"]:
        return skip_main(argv[1:])
    args = parse(argv)
    scoped = scoped_folder(args)
    if args.dry_run:
        return dry_run(args)
    print(f"cellbench weekly: {args.choice.said()}; results, journal and log in {scoped}/", file=sys.stderr,
          flush=True)
    return _run(args, scoped)


def _run(args: argparse.Namespace, scoped: Path) -> int:
    branch, model, machine = f"weekly/{args.date}", args.choice.profile.results_name, args.choice.machine.slug
    scoped.mkdir(parents=True, exist_ok=True)
    log = scoped / f"weekly_{args.date}.log"
    run_id = new_run_id()

    claimed = "none (--no-branch)"
    if not args.no_branch:  # first: a run that cannot commit must not find out after hours
        try:
            claimed = claim_branch(args.repo, branch)
        except GitError as exc:
            print(f"cellbench weekly: {exc}; nothing was run", file=sys.stderr)
            return NOT_STARTED
    journal = Journal.open(scoped, model=model, machine=machine, day=args.date)
    journal.notes += [f"Branch: {claimed}; run {run_id}; log {log.name}", f"Chosen: {args.choice.said()}"]
    journal.branch = "none (--no-branch)" if args.no_branch else branch
    journal.save()  # the preamble is on disk before the first cell
    tree_before = tree_snapshot(args.repo)

    sessions: list[Session] = []
    notes: list[str] = []
    updated: list = []
    plan = None
    stopped: str | None = None  # why the weekly run itself was interrupted
    try:
        with kept_awake() as awake:
            journal.notes.append(f"Awake: {awake}")
            journal.save()
            updated = [] if args.no_update else update_frameworks(args.frameworks, pinned=args.pinned)
            versions = [r.to_json() for r in updated]
            problem = setup_problem(args.frameworks or [], runnable_frameworks(args.frameworks), versions)
            if problem is not None:
                journal.session_failures.append(f"set-up: {problem}")
                journal.finish(interrupted=False)
                print(f"cellbench weekly: {problem}", file=sys.stderr)
                return NOT_STARTED
            if args.noise_runs:
                journal.notes += refresh_floors(runnable_frameworks(args.frameworks), args.splits,
                                                runs=args.noise_runs, model=args.model, results=args.results_dir,
                                                pytest_args=args.pytest_args, log=log, pinned=args.pinned)
                journal.save()
            selected = args.frameworks or [a.name for a in adapters.registry().values() if a.benchmark_cells]
            plan = plan_cells(journal, selected, args.splits, versions, args.repo, args.choice.profile.source,
                              fix_edits(args.repo), args.fix_ref)
            sessions, notes, bailed = run_splits(args.splits, args, run_id, log, journal,
                                                 {s: plan.left_out(s) for s in args.splits})
            if not bailed:
                sessions += retry_transient(journal, run_id, args, log)
    except KeyboardInterrupt as exc:
        stopped = str(exc) or "Ctrl-C"
    return _end(args, scoped, log, run_id, sessions, notes, updated, plan, tree_before, stopped)


def _end(args: argparse.Namespace, scoped: Path, log: Path, run_id: str, sessions: list[Session], notes: list[str],
         updated: list, plan, tree_before: dict[str, str], stopped: str | None) -> int:
    model, machine, branch = args.choice.profile.results_name, args.choice.machine.slug, f"weekly/{args.date}"
    died = [s.failure for s in sessions if s.failure]
    inside = args.results_dir.is_relative_to(args.repo.resolve())
    results_rel = f"{args.results_dir.relative_to(args.repo.resolve()).as_posix()}/" if inside else "results/"
    refused = edited_outside_adapters(tree_before, tree_snapshot(args.repo), results_rel)
    if refused:  # counted as a failure of the run: the results were measured with code nobody committed
        died.append(f"edited during the run outside adapters/ and models/, not committed: {', '.join(refused)}")
    # this run is the weekly run: its split sessions' id and its retries' own
    this_run = ChosenRun((run_id, *(s.run_id for s in sessions)), "the weekly run's")
    reports = rebuild(args.results_dir, model=model, machine=machine, this_run=this_run)

    journal = Journal.open(scoped, model=model, machine=machine, day=args.date)
    journal.notes += [describe(record) for record in updated]
    explain_failures(journal, {run_id, *(s.run_id for s in sessions)}, args.repo)
    if plan is not None:
        settle_cells(journal, plan, run_id)
    interrupted = bool(stopped) or any(s.interrupted for s in sessions)
    # an interrupted re-run verified nothing either way: its edit stays for the next run to verify
    reverted = [] if interrupted else revert_failed_fixes(args.repo, journal, run_id)
    journal.notes += [f"pytest -m {s.split}: exit {s.exit_code}" + (f" (run {s.run_id})" if s.run_id != run_id else "")
                      for s in sessions]
    journal.notes += [*notes, *reverted]
    if stopped:
        journal.notes.append(f"Interrupted ({stopped}): nothing committed or pushed; results left in {scoped}")
    journal.session_failures = [*journal.session_failures, *(f"{reason} (log {log.name})" for reason in died)]
    for rel in fix_edits(args.repo):
        for cell in fixes_of(journal, rel):
            cell.evidence["fix"]["what"] = args.fix_note or edit_summary(args.repo, rel)
    journal.finish(interrupted=interrupted)
    pages = {s.split: f"weekly_{args.date}_{s.split}.html" for s in sessions
             if (scoped / f"weekly_{args.date}_{s.split}.html").is_file()}
    index = write_index(journal, pages)
    cells = [c for c in journal.cells.values() if c.split in args.splits]
    not_ok = sorted(f"{c.framework}/{c.split}: {c.verdict}" for c in cells if c.verdict not in GREEN_VERDICTS)

    message = (f"results: weekly run {args.date} ({' + '.join(args.splits)}) on {machine}\n\n"
               f"run {run_id}; {len(cells)} cells, {len(not_ok)} not ok\n"
               + "".join(f"- {line}\n" for line in [*died, *not_ok]))
    commits, not_pushed = ([], False) if args.no_branch or stopped else commit_on_branch(
        args.repo, branch, args.results_dir, message, args.push, journal, args.fix_note)
    for line in reverted:
        print(f"cellbench weekly: {line}", file=sys.stderr)
    if not_pushed:
        print(f"cellbench weekly: {journal.push}", file=sys.stderr)
    for reason in died:
        print(f"cellbench weekly: {reason}", file=sys.stderr)
    if stopped:
        print(f"cellbench weekly: interrupted ({stopped}): journal {journal.md_path} is partial; "
              "nothing committed or pushed", file=sys.stderr)
    print(json.dumps({"branch": None if args.no_branch else branch, "commits": commits, "journal": str(journal.md_path),
                      "status": journal.status,
                      "reports": [str(p) for p in reports if p.name == "REPORT.md"],
                      "html": sorted(str(p) for p in scoped.glob(f"weekly_{args.date}_*.html")), "index": str(index),
                      "fixed": sorted(f"{c.framework}/{c.split}" for c in cells if c.verdict == Verdict.FIXED.value),
                      "not_ok": not_ok, "push": journal.push,
                      "sessions_failed": died}, indent=1))
    if stopped:
        return INTERRUPTED
    if died:
        return next((s.weekly_exit_code for s in sessions if s.failure), 1)
    if not_pushed:
        return NOT_PUSHED
    return 0 if cells and not not_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
