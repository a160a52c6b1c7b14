"""`cellbench weekly`: the week's run, unattended, leaving the truth on a `weekly/<date>` branch.

1. frameworks: every framework that runs here is updated to its newest release, installed beside
   the old one (bench.setup.updates; `--pinned` keeps the adapters' versions); before, after and
   how the newest was found go into the journal;
2. `pytest -m chat`, then `pytest -m agent`, one run id for both; a cell's failure never stops
   the run, and the pytest output is kept in `weekly_<date>.log` beside the journal;
3. comparison.json, REPORT.md and plots are rebuilt, and the journal gets its notes;
4. the results are committed on `weekly/<date>` (never main), adapter and profile edits first,
   one commit each, and the branch is pushed when the checkout has a remote (`--no-push` keeps
   it local; a failed push is exit 7); the push's outcome is in the journal. `--no-branch` leaves
   them in the results folder alone (a CI job uploads that folder instead).

Before the sessions (bench.cli.weekly_cells), the prior journals (cellbench's and SiliconBench's
`weekly_<date>.journal.md`) and `cellbench weekly skip` say which cells stay skipped, and a cell's
second fix attempt of the day is refused.

Each split's pytest session also writes its pytest-html page beside the journal
(`weekly_<date>_<split>.html`) unless the pytest arguments name their own `--html`.

The commits are made in a temporary git worktree of the branch, so the user's checkout (and the
results left in it for next week's journal and resume) never changes branch. The exit code is 0
only when every pytest session ran its cells and no cell ended failed, all-failed, wrong-model,
oom, capped or degraded (skips for frameworks that do not run here are not failures). A session
that ended without running its cells (pytest's exit code 2 interrupted, 3 internal error, 4 usage
error, 5 no tests collected, or a signal) fails the run with that session's code and its last
error line, in the output, the commit message and the journal; exit code 1 means failing cells.

Before the first cell (bench.cli.weekly_start): the branch is claimed, the journal's preamble is
written, the machine is kept awake, and a set-up that can run no cell stops the run (exit 6,
the fix in the journal). A chat split whose every cell failed the same way stops the agent split.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

import adapters
from bench.base.defaults import DEFAULT_MODEL, SPLITS
from bench.base.git import GitError, edit_summary
from bench.base.paths import PROJECT_ROOT
from bench.cli.decisions.noise import refresh_floors
from bench.cli.update import describe, update_frameworks
from bench.cli.weekly_cells import CellPlan, plan_cells, settle_cells, skip_main
from bench.cli.weekly_start import (
    claim_branch,
    commit_on_branch,
    edited_outside_adapters,
    fix_edits,
    fixes_of,
    kept_awake,
    setup_problem,
    systemic_failure,
    tree_snapshot,
)
from bench.core.result import new_run_id
from bench.core.verdicts import GREEN_VERDICTS, Verdict
from bench.host.machine import detect
from bench.reports.journal import JOURNAL_DAY_ENV, LAST_PASS, Journal, write_index
from bench.reports.rebuild import rebuild
from bench.run.fixes import FIX_REFERENCE_ENV, reference_problem
from bench.setup.profiles import ProfileError, load_profile
from bench.setup.updates import last_passing, since_last_pass

NOT_STARTED = 6  # the run stopped before its first cell (the branch or the set-up); pytest uses 0-5
NOT_PUSHED = 7  # the cells ran and were committed, but the branch did not reach the remote it was meant for


@dataclass(frozen=True)
class Session:
    """One pytest session of the run: its exit code and the last lines of its output."""

    split: str
    exit_code: int
    tail: tuple[str, ...] = ()

    @property
    def failure(self) -> str | None:
        """Why the session ended without running its cells, or None when it ran them (exit 0, or 1
        from failing cells, which the journal's cells account for)."""
        if self.exit_code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return None
        if self.exit_code < 0:
            how = f"was killed by {signal.Signals(-self.exit_code).name}"
        else:
            try:
                name = pytest.ExitCode(self.exit_code).name.lower().replace("_", " ")
            except ValueError:
                name = "not one of pytest's exit codes"
            how = f"exited {self.exit_code} ({name})"
        return f"pytest -m {self.split} {how}: {self.last_error()}"

    def last_error(self) -> str:
        """The session's last line that names an error, else its last line (pytest's summary)."""
        lines = [line.strip() for line in self.tail if line.strip()]
        errors = [line for line in lines if "error" in line.lower() or "interrupted" in line.lower()]
        return (errors or lines or ["no output"])[-1].strip("= ")

    @property
    def weekly_exit_code(self) -> int:
        """The session's own code for the weekly run's exit (128 + N for a signal, as shells say)."""
        return self.exit_code if self.exit_code > 0 else 128 - self.exit_code


def split_marker(split: str, frameworks: list[str] | None, left_out: Sequence[str] = ()) -> str:
    """The `-m` expression of one split's session: `chat`, `chat and (llamacpp or vllm)`, and
    `and not (...)` for the cells a held skip or a refused fix attempt leaves out."""
    marker = f"{split} and ({' or '.join(frameworks)})" if frameworks else split
    return f"{marker} and not ({' or '.join(left_out)})" if left_out else marker


def run_split(split: str, args: argparse.Namespace, run_id: str, log: Path, left_out: list[str]) -> Session:
    """One `pytest -m <split>` session; its output streams to the terminal and into the log."""
    html = [] if any(a == "--html" or a.startswith("--html=") for a in args.pytest_args) else [
        f"--html={log.parent / f'weekly_{args.date}_{split}.html'}", "--self-contained-html"]
    marker = split_marker(split, args.frameworks, left_out)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", marker,
           f"--model={args.model}", f"--run-id={run_id}", f"--results-dir={args.results_dir}", *html,
           *(["--pinned"] if args.pinned else []),
           *args.pytest_args]
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(cmd)}\n")
        sink.flush()
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, env=session_env(args))
        assert proc.stdout is not None
        tail: deque[str] = deque(maxlen=40)
        for line in proc.stdout:
            sys.stdout.write(line)
            sink.write(line)
            tail.append(line)
        return Session(split, proc.wait(), tuple(tail))


def session_env(args: argparse.Namespace) -> dict[str, str]:
    """The sessions' environment: the run's day, and the upstream reference a fix needs."""
    env = {**os.environ, JOURNAL_DAY_ENV: args.date}
    env.pop(FIX_REFERENCE_ENV, None)  # only this run's --fix-ref makes a cell `fixed`
    return {**env, FIX_REFERENCE_ENV: args.fix_ref} if args.fix_ref else env


def run_splits(splits: list[str], args: argparse.Namespace, run_id: str, log: Path, scoped: Path, model: str,
               machine: str, plan: CellPlan) -> tuple[list[Session], list[str]]:
    """Each split's session in order; a split after a chat split whose every cell failed the same
    way (the model, the prompts, the machine) is not started, nor one whose every selected cell a
    held skip or a refused fix attempt leaves out. Returns the sessions and the notes saying which
    splits were not started, and why."""
    sessions: list[Session] = []
    notes: list[str] = []
    selected = args.frameworks or [a.name for a in adapters.registry().values() if a.benchmark_cells]
    for split in splits:
        left_out = plan.left_out(split)
        if set(selected) <= set(left_out):
            notes.append(f"Not started: {split}, because every selected cell of it is left out ({', '.join(left_out)})")
            continue
        session = run_split(split, args, run_id, log, left_out)
        sessions.append(session)
        if split != "chat" or session.failure:
            continue
        cells = Journal.open(scoped, model=model, machine=machine, day=args.date).cells.values()
        systemic = systemic_failure([c for c in cells if c.split == "chat"])
        if systemic is not None:
            rest = splits[splits.index(split) + 1:]
            return sessions, [*notes, *([f"Not started: {', '.join(rest)}, because {systemic}"] if rest else [])]
    return sessions, notes


def runnable_frameworks(only: list[str] | None) -> list[str]:
    """The selected frameworks (every one, unselected) whose cells run on this machine."""
    return [a.name for a in adapters.registry().values()
            if a.benchmark_cells and a.runs_here() and (only is None or a.name in only)]


def explain_failures(journal: Journal, run_id: str, repo: Path) -> None:
    """Each cell of this run that failed gets, in its journal entry (beside the telemetry reading
    the recorder gave it), its last passing result and what changed since: the framework's
    releases in between (with where their notes are) and the commits and uncommitted edits of its
    adapter (bench.setup.updates.since_last_pass)."""
    for cell in journal.cells.values():
        if cell.verdict in GREEN_VERDICTS or not cell.result_path:
            continue
        path = Path(cell.result_path)
        if run_id not in path.name or not path.is_file():
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
    parser = argparse.ArgumentParser(prog="cellbench weekly", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model profile [{DEFAULT_MODEL}]")
    parser.add_argument("--splits", default=",".join(SPLITS), help=f"splits, in order [{','.join(SPLITS)}]")
    parser.add_argument("--repo", type=Path, default=PROJECT_ROOT, help="the git checkout that holds the results")
    parser.add_argument("--results-dir", type=Path, default=None, help="results root [<repo>/results]")
    parser.add_argument("--no-update", action="store_true", help="do not install or update frameworks first")
    parser.add_argument("--pinned", action="store_true",
                        help="install and run each adapter's own version, not the newest release")
    push = parser.add_mutually_exclusive_group()
    push.add_argument("--push", dest="push", action="store_const", const="yes", default="auto",
                      help="push weekly/<date> (never main), failing the run (exit 7) when there is no remote "
                           "[pushed when the checkout has a remote]")
    push.add_argument("--no-push", dest="push", action="store_const", const="no",
                      help="commit on weekly/<date> but do not push it")
    parser.add_argument("--no-branch", action="store_true",
                        help="commit nothing: the results, journal, log and HTML stay in the results folder")
    parser.add_argument("--frameworks", default=None, metavar="A,B",
                        help="only these frameworks' cells (and installs) [every framework that runs here]")
    parser.add_argument("--fix-note", default=None, metavar="TEXT",
                        help="what this run's adapter edits do, for their auto-fix commit subjects "
                             "[the edit's first changed line]")
    parser.add_argument("--fix-ref", default=None, metavar="REF",
                        help="the upstream commit, changelog entry or issue URL this run's adapter or profile edits "
                             "follow: a re-run that passes after an edit ends `fixed` only with it")
    parser.add_argument("--noise-runs", type=int, default=0, metavar="N",
                        help="before the splits, measure each framework's noise floor of each split with N runs "
                             "where it has none or was measured on another version (docs/weekly.md) [0: never]")
    parser.add_argument("pytest_args", nargs="*", help="passed to every pytest session (after --)")
    args = parser.parse_args(argv)
    args.results_dir = (args.results_dir or args.repo / "results").resolve()
    try:
        profile = load_profile(args.model)
    except ProfileError as exc:
        parser.error(str(exc))
    splits = [s for s in args.splits.split(",") if s]
    if not set(splits) <= set(SPLITS):
        parser.error(f"--splits takes {', '.join(SPLITS)}, got {args.splits!r}")
    args.frameworks = [f for f in (args.frameworks or "").split(",") if f] or None
    unknown = sorted(set(args.frameworks or ()) - set(adapters.registry()))
    if unknown:
        parser.error(f"--frameworks: no adapter named {', '.join(unknown)}; "
                     f"known: {', '.join(sorted(adapters.registry()))}")
    if args.noise_runs and args.noise_runs < 2:
        parser.error(f"--noise-runs takes 2 or more (a spread needs two runs), got {args.noise_runs}")
    if args.no_branch and args.push == "yes":
        parser.error("--push needs the branch that --no-branch leaves out")
    if args.fix_ref is not None and reference_problem(args.fix_ref):
        parser.error(f"--fix-ref: {reference_problem(args.fix_ref)}")
    args.date = date.today().isoformat()  # fixed at the start: a run that crosses midnight keeps one journal
    branch = f"weekly/{args.date}"
    machine = detect().slug
    scoped = args.results_dir / profile.results_name / machine
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
    journal = Journal.open(scoped, model=profile.results_name, machine=machine, day=args.date)
    journal.notes += [f"Branch: {claimed}; run {run_id}; log {log.name}"]
    journal.branch = "none (--no-branch)" if args.no_branch else branch
    journal.save()  # the preamble is on disk before the first cell
    tree_before = tree_snapshot(args.repo)

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
            journal.notes += refresh_floors(runnable_frameworks(args.frameworks), splits, runs=args.noise_runs,
                                            model=args.model, results=args.results_dir,
                                            pytest_args=args.pytest_args, log=log, pinned=args.pinned)
            journal.save()
        selected = args.frameworks or [a.name for a in adapters.registry().values() if a.benchmark_cells]
        plan = plan_cells(journal, selected, splits, versions, args.repo, profile.source, fix_edits(args.repo),
                          args.fix_ref)
        sessions, skipped_splits = run_splits(splits, args, run_id, log, scoped, profile.results_name, machine, plan)
    died = [s.failure for s in sessions if s.failure]
    inside = args.results_dir.is_relative_to(args.repo.resolve())
    results_rel = f"{args.results_dir.relative_to(args.repo.resolve()).as_posix()}/" if inside else "results/"
    refused = edited_outside_adapters(tree_before, tree_snapshot(args.repo), results_rel)
    if refused:  # counted as a failure of the run: the results were measured with code nobody committed
        died.append(f"edited during the run outside adapters/ and models/, not committed: {', '.join(refused)}")
    reports = rebuild(args.results_dir, model=profile.results_name, machine=machine)

    journal = Journal.open(scoped, model=profile.results_name, machine=machine, day=args.date)
    journal.notes += [describe(record) for record in updated]
    explain_failures(journal, run_id, args.repo)
    settle_cells(journal, plan, run_id)
    journal.notes += [f"pytest -m {s.split}: exit {s.exit_code}" for s in sessions]
    journal.notes += skipped_splits
    journal.session_failures = [*journal.session_failures, *(f"{reason} (log {log.name})" for reason in died)]
    for rel in fix_edits(args.repo):
        for cell in fixes_of(journal, rel):
            cell.evidence["fix"]["what"] = args.fix_note or edit_summary(args.repo, rel)
    journal.finish(interrupted=False)  # an interrupted session is among the session failures
    pages = {s.split: f"weekly_{args.date}_{s.split}.html" for s in sessions
             if (scoped / f"weekly_{args.date}_{s.split}.html").is_file()}
    index = write_index(journal, pages)
    cells = [c for c in journal.cells.values() if c.split in splits]
    not_ok = sorted(f"{c.framework}/{c.split}: {c.verdict}" for c in cells if c.verdict not in GREEN_VERDICTS)

    message = (f"results: weekly run {args.date} ({' + '.join(splits)}) on {machine}\n\n"
               f"run {run_id}; {len(cells)} cells, {len(not_ok)} not ok\n"
               + "".join(f"- {line}\n" for line in [*died, *not_ok]))
    commits, not_pushed = ([], False) if args.no_branch else commit_on_branch(
        args.repo, branch, args.results_dir, message, args.push, journal, args.fix_note)
    if not_pushed:
        print(f"cellbench weekly: {journal.push}", file=sys.stderr)
    for reason in died:
        print(f"cellbench weekly: {reason}", file=sys.stderr)
    print(json.dumps({"branch": None if args.no_branch else branch, "commits": commits, "journal": str(journal.md_path),
                      "reports": [str(p) for p in reports if p.name == "REPORT.md"],
                      "html": sorted(str(p) for p in scoped.glob(f"weekly_{args.date}_*.html")), "index": str(index),
                      "fixed": sorted(f"{c.framework}/{c.split}" for c in cells if c.verdict == Verdict.FIXED.value),
                      "not_ok": not_ok, "push": journal.push,
                      "sessions_failed": died}, indent=1))
    if died:
        return next((s.weekly_exit_code for s in sessions if s.failure), 1)
    if not_pushed:
        return NOT_PUSHED
    return 0 if cells and not not_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
