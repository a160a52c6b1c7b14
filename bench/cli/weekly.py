"""`cellbench weekly`: the week's run, unattended, leaving the truth on a `weekly/<date>` branch.

1. frameworks: every framework that runs here is updated to its newest release, installed beside
   the old one (bench.setup.updates; `--pinned` keeps the adapters' versions); before, after and
   how the newest was found go into the journal;
2. `pytest -m chat`, then `pytest -m agent`, one run id for both; a cell's failure never stops
   the run, and the pytest output is kept in `weekly_<date>.log` beside the journal;
3. comparison.json, REPORT.md and plots are rebuilt, and the journal gets its notes;
4. the results are committed on `weekly/<date>` (never main), adapter edits first, one commit
   each; pushed only with `--push`. `--no-branch` leaves them in the results folder alone (a CI
   job uploads that folder instead).

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
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

import adapters
from bench.base.defaults import DEFAULT_MODEL, SPLITS
from bench.base.git import GitError, branch_worktree, edit_summary, git
from bench.base.paths import PROJECT_ROOT
from bench.cli.decisions.noise import refresh_floors
from bench.cli.update import describe, update_frameworks
from bench.cli.weekly_start import (
    claim_branch,
    edited_outside_adapters,
    kept_awake,
    setup_problem,
    systemic_failure,
    tree_snapshot,
)
from bench.core.result import new_run_id
from bench.core.verdicts import GREEN_VERDICTS, Verdict
from bench.host.machine import detect
from bench.reports.journal import JOURNAL_DAY_ENV, CellEntry, Journal, write_index
from bench.reports.rebuild import rebuild
from bench.setup.profiles import ProfileError, load_profile
from bench.setup.updates import since_last_pass

NOT_STARTED = 6  # the run stopped before its first cell (the branch or the set-up); pytest uses 0-5


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


def split_marker(split: str, frameworks: list[str] | None) -> str:
    """The `-m` expression of one split's session: `chat`, or `chat and (llamacpp or vllm)`."""
    return f"{split} and ({' or '.join(frameworks)})" if frameworks else split


def run_split(split: str, args: argparse.Namespace, run_id: str, log: Path) -> Session:
    """One `pytest -m <split>` session; its output streams to the terminal and into the log."""
    html = [] if any(a == "--html" or a.startswith("--html=") for a in args.pytest_args) else [
        f"--html={log.parent / f'weekly_{args.date}_{split}.html'}", "--self-contained-html"]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", split_marker(split, args.frameworks),
           f"--model={args.model}", f"--run-id={run_id}", f"--results-dir={args.results_dir}", *html,
           *(["--pinned"] if args.pinned else []),
           *args.pytest_args]
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(cmd)}\n")
        sink.flush()
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, env={**os.environ, JOURNAL_DAY_ENV: args.date})
        assert proc.stdout is not None
        tail: deque[str] = deque(maxlen=40)
        for line in proc.stdout:
            sys.stdout.write(line)
            sink.write(line)
            tail.append(line)
        return Session(split, proc.wait(), tuple(tail))


def run_splits(splits: list[str], args: argparse.Namespace, run_id: str, log: Path, scoped: Path, model: str,
               machine: str) -> tuple[list[Session], list[str]]:
    """Each split's session in order; a split after a chat split whose every cell failed the same
    way (the model, the prompts, the machine) is not started. Returns the sessions and the notes
    saying which splits were not started, and why."""
    sessions: list[Session] = []
    for split in splits:
        session = run_split(split, args, run_id, log)
        sessions.append(session)
        if split != "chat" or session.failure:
            continue
        cells = Journal.open(scoped, model=model, machine=machine, day=args.date).cells.values()
        systemic = systemic_failure([c for c in cells if c.split == "chat"])
        if systemic is not None:
            rest = splits[splits.index(split) + 1:]
            return sessions, [f"Not started: {', '.join(rest)}, because {systemic}"] if rest else []
    return sessions, []


def runnable_frameworks(only: list[str] | None) -> list[str]:
    """The selected frameworks (every one, unselected) whose cells run on this machine."""
    return [a.name for a in adapters.registry().values()
            if a.benchmark_cells and a.runs_here() and (only is None or a.name in only)]


def explain_failures(journal: Journal, run_id: str, repo: Path) -> None:
    """Each cell of this run that failed gets, in its journal entry, its last passing result and what
    changed since: the framework's releases in between (with where their notes are) and the commits
    and uncommitted edits of its adapter (bench.setup.updates.since_last_pass)."""
    for cell in journal.cells.values():
        if cell.verdict in GREEN_VERDICTS or cell.verdict == Verdict.OOM.value or not cell.result_path:
            continue
        path = Path(cell.result_path)
        adapter = adapters.registry().get(cell.framework)
        if run_id not in path.name or not path.is_file() or adapter is None or adapter.bind is not None:
            continue
        result = json.loads(path.read_text())
        recipe = adapter.recipe_for(result["framework"].get("platform") or adapter.platform_here() or "")
        cell.evidence["since_last_pass"] = since_last_pass(recipe, repo, path.parent, result)


def adapter_edits(repo: Path) -> list[str]:
    """The checkout's adapter modules that differ from HEAD (edited or new), relative paths."""
    status = git(repo, "status", "--porcelain", "--", "adapters", check=True).stdout.splitlines()
    return [line[3:] for line in status if line[:2].strip() in ("M", "A", "??") and line[3:].endswith(".py")]


def fixes_of(journal: Journal, rel: str) -> list[CellEntry]:
    """The day's fixed cells (the journal keeps them when a later run replaces a cell) whose adapter
    edit is `rel`."""
    return [c for c in journal.fixes.values() if c.evidence.get("fix", {}).get("adapter") == rel]


def adapter_message(repo: Path, rel: str, journal: Journal, note: str | None) -> tuple[str, list[CellEntry]]:
    """The commit message of one adapter edit, and the fixed cells it is the fix of.

    `auto-fix(<fw>, <splits>): <what>` when a cell failed earlier in the run and passed with this
    very file (its sha256 is the one the passing cell ran); otherwise `adapter edit(<fw>)`, which
    says it is not a verified fix: a later edit of the file is not what the cell verified."""
    what = note or edit_summary(repo, rel)
    sha = hashlib.sha256((repo / rel).read_bytes()).hexdigest()
    fixed = [c for c in fixes_of(journal, rel) if c.evidence["fix"]["sha256_after"] == sha]
    if not fixed:
        why = ("edited again after the run that verified it" if fixes_of(journal, rel)
               else "no cell failed and then passed with it in this run")
        return f"adapter edit({Path(rel).stem}): {what}\n\nNot a verified fix: {why}.\n", []
    splits = "+".join(sorted({c.split for c in fixed}, key=lambda s: (s != "chat", s)))
    body = "".join(f"- {c.split}: it was {fix['from_verdict']} in run {fix['from_run_id']}: {fix['from_reason']}\n"
                   f"  verified by run {fix['run_id']} ({Path(c.result_path or '').name}): {c.reason}\n"
                   for c in fixed for fix in [c.evidence["fix"]])
    return f"auto-fix({fixed[0].framework}, {splits}): {what}\n\n{body}", fixed


def commit_on_branch(repo: Path, branch: str, results: Path, message: str, push: bool, journal: Journal,
                     note: str | None = None) -> list[str]:
    """Adapter edits of the checkout (one commit each, named after the cells they fixed), then the
    results with the journal that names those commits, on `branch` in a worktree."""
    commits: list[str] = []
    with branch_worktree(repo, branch) as tree:
        for rel in adapter_edits(repo):
            text, fixed = adapter_message(repo, rel, journal, note)
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / rel, tree / rel)
            git(tree, "add", "--", rel, check=True)
            if git(tree, "diff", "--cached", "--quiet", check=False).returncode == 0:
                continue  # committed by an earlier run of the day
            git(tree, "commit", "-q", "-m", text, "--", rel, check=True)
            subject = text.splitlines()[0]
            commits.append(subject)
            sha = git(tree, "rev-parse", "--short=12", "HEAD", check=True).stdout.strip()
            for cell in fixed:
                cell.evidence["fix"]["commit"] = f"{sha} {subject}"
        journal.save()  # the Auto-Fixes section names the commits
        rel_results = results.resolve().relative_to(repo.resolve())
        shutil.copytree(results, tree / rel_results, dirs_exist_ok=True)
        git(tree, "add", "--force", "--", str(rel_results), check=True)  # results/ is ignored on main, on purpose
        if git(tree, "diff", "--cached", "--quiet", check=False).returncode != 0:
            git(tree, "commit", "-q", "-m", message, check=True)
            commits.append(message.splitlines()[0])
    if push:
        git(repo, "push", "-u", "origin", branch, check=True, timeout=600)
    return commits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench weekly", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model profile [{DEFAULT_MODEL}]")
    parser.add_argument("--splits", default=",".join(SPLITS), help=f"splits, in order [{','.join(SPLITS)}]")
    parser.add_argument("--repo", type=Path, default=PROJECT_ROOT, help="the git checkout that holds the results")
    parser.add_argument("--results-dir", type=Path, default=None, help="results root [<repo>/results]")
    parser.add_argument("--no-update", action="store_true", help="do not install or update frameworks first")
    parser.add_argument("--pinned", action="store_true",
                        help="install and run each adapter's own version, not the newest release")
    parser.add_argument("--push", action="store_true", help="push weekly/<date> to origin (never main)")
    parser.add_argument("--no-branch", action="store_true",
                        help="commit nothing: the results, journal, log and HTML stay in the results folder")
    parser.add_argument("--frameworks", default=None, metavar="A,B",
                        help="only these frameworks' cells (and installs) [every framework that runs here]")
    parser.add_argument("--fix-note", default=None, metavar="TEXT",
                        help="what this run's adapter edits do, for their auto-fix commit subjects "
                             "[the edit's first changed line]")
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
    if args.no_branch and args.push:
        parser.error("--push needs the branch that --no-branch leaves out")
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
        sessions, skipped_splits = run_splits(splits, args, run_id, log, scoped, profile.results_name, machine)
    died = [s.failure for s in sessions if s.failure]
    inside = args.results_dir.is_relative_to(args.repo.resolve())
    results_rel = f"{args.results_dir.relative_to(args.repo.resolve()).as_posix()}/" if inside else "results/"
    refused = edited_outside_adapters(tree_before, tree_snapshot(args.repo), results_rel)
    if refused:  # counted as a failure of the run: the results were measured with code nobody committed
        died.append(f"edited during the run outside adapters/, not committed: {', '.join(refused)}")
    reports = rebuild(args.results_dir, model=profile.results_name, machine=machine)

    journal = Journal.open(scoped, model=profile.results_name, machine=machine, day=args.date)
    journal.notes += [describe(record) for record in updated]
    explain_failures(journal, run_id, args.repo)
    journal.notes += [f"pytest -m {s.split}: exit {s.exit_code}" for s in sessions]
    journal.notes += skipped_splits
    journal.session_failures = [*journal.session_failures, *(f"{reason} (log {log.name})" for reason in died)]
    for rel in adapter_edits(args.repo):
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
    commits = [] if args.no_branch else commit_on_branch(args.repo, branch, args.results_dir, message, args.push,
                                                         journal, args.fix_note)
    for reason in died:
        print(f"cellbench weekly: {reason}", file=sys.stderr)
    print(json.dumps({"branch": None if args.no_branch else branch, "commits": commits, "journal": str(journal.md_path),
                      "reports": [str(p) for p in reports if p.name == "REPORT.md"],
                      "html": sorted(str(p) for p in scoped.glob(f"weekly_{args.date}_*.html")), "index": str(index),
                      "fixed": sorted(f"{c.framework}/{c.split}" for c in cells if c.verdict == Verdict.FIXED.value),
                      "not_ok": not_ok,
                      "sessions_failed": died}, indent=1))
    if died:
        return next((s.weekly_exit_code for s in sessions if s.failure), 1)
    return 0 if cells and not not_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
