"""The command line of `cellbench weekly`, and what it checks before anything runs."""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path

import adapters
from bench.base.defaults import SPLITS
from bench.base.paths import PROJECT_ROOT
from bench.cli.choice import choose
from bench.plugins.opts.settings import cell_option
from bench.run.fixes import reference_problem
from bench.setup.profiles import ProfileError

DESCRIPTION = "the week's run, unattended, leaving the truth on a weekly/<date> branch"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cellbench weekly", description=DESCRIPTION)
    cell_option("--model").add_argument(p)  # as its sessions' cells take it
    p.add_argument("--splits", default=",".join(SPLITS), help=f"splits, in order [{','.join(SPLITS)}]")
    p.add_argument("--repo", type=Path, default=PROJECT_ROOT, help="the git checkout that holds the results")
    cell_option("--results-dir").add_argument(p, shown="<repo>/results")
    p.add_argument("--no-update", action="store_true", help="do not install or update frameworks first")
    p.add_argument("--no-fidelity", dest="fidelity", action="store_false",
                   help="leave out the cells' fidelity run (--fidelity, on by default here)")
    p.add_argument("--pinned", action="store_true",
                   help="install and run each adapter's own version, not the newest release")
    push = p.add_mutually_exclusive_group()
    push.add_argument("--push", dest="push", action="store_const", const="yes", default="auto",
                      help="push weekly/<date> (never main), failing the run (exit 7) when there is no remote "
                           "[pushed when the checkout has a remote]")
    push.add_argument("--no-push", dest="push", action="store_const", const="no",
                      help="commit on weekly/<date> but do not push it")
    p.add_argument("--no-branch", action="store_true",
                   help="commit nothing: the results, journal, log and HTML stay in the results folder")
    p.add_argument("--frameworks", default=None, metavar="A,B",
                   help="only these frameworks' cells (and installs) [every framework that runs here]")
    p.add_argument("--fix-note", default=None, metavar="TEXT",
                   help="what this run's adapter edits do, for their auto-fix commit subjects "
                        "[the edit's first changed line]")
    p.add_argument("--fix-ref", default=None, metavar="REF",
                   help="the upstream commit, changelog entry or issue URL this run's adapter or profile edits "
                        "follow: a re-run that passes after an edit ends `fixed` only with it")
    p.add_argument("--noise-runs", type=int, default=0, metavar="N",
                   help="before the splits, measure each framework's noise floor of each split with N runs "
                        "where it has none or was measured on another version (docs/weekly.md) [0: never]")
    p.add_argument("--dry-run", action="store_true",
                   help="say what the run would do (model, machine, folder, branch, sessions) and do nothing")
    p.add_argument("pytest_args", nargs="*", help="passed to every pytest session (after --)")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """The run's arguments, checked; a bad one exits 2 with argparse's usage line. Adds `choice`
    (bench.cli.choice.Choice), `splits` as a list, `frameworks` as a list or None, and `date`."""
    p = parser()
    args = p.parse_args(argv)
    args.results_dir = (args.results_dir or args.repo / "results").resolve()
    try:
        args.choice = choose(args.model)
    except ProfileError as exc:
        p.error(str(exc))
    args.splits = [s for s in args.splits.split(",") if s]
    if not set(args.splits) <= set(SPLITS):
        p.error(f"--splits takes {', '.join(SPLITS)}, got {','.join(args.splits)!r}")
    args.frameworks = [f for f in (args.frameworks or "").split(",") if f] or None
    unknown = sorted(set(args.frameworks or ()) - set(adapters.registry()))
    if unknown:
        p.error(f"--frameworks: no adapter named {', '.join(unknown)}; known: {', '.join(sorted(adapters.registry()))}")
    if args.noise_runs and args.noise_runs < 2:
        p.error(f"--noise-runs takes 2 or more (a spread needs two runs), got {args.noise_runs}")
    if args.no_branch and args.push == "yes":
        p.error("--push needs the branch that --no-branch leaves out")
    if args.fix_ref is not None and reference_problem(args.fix_ref):
        p.error(f"--fix-ref: {reference_problem(args.fix_ref)}")
    args.date = date.today().isoformat()  # fixed at the start: a run that crosses midnight keeps one journal
    return args


def scoped_folder(args: argparse.Namespace) -> Path:
    """results/<model>/<machine>: the results, journal, log and HTML pages of the run."""
    return args.results_dir / args.choice.profile.results_name / args.choice.machine.folder
