"""`cellbench weekly --dry-run`: what the run would do, said and not done.

It names the model and the machine's folder and what chose each (bench.cli.choice), the folder
the results, journal and log would go to, the branch it would claim, the frameworks it would
update and run (and those that do not run here), the skips that would keep cells out, and each
split's pytest command. Nothing is installed, run, written, committed or pushed, and no network
is asked (`cellbench update --dry-run` resolves the newest releases).
"""

from __future__ import annotations

import argparse
import shlex

import adapters
from bench.base.git import git
from bench.cli.weekly.args import scoped_folder
from bench.cli.weekly.sessions import runnable_frameworks, session_command, split_marker
from bench.reports.journal.skips import diagnosed_skips

RUN_ID = "<run id>"


def _branch(args: argparse.Namespace) -> str:
    if args.no_branch:
        return "none (--no-branch): results, journal, log and HTML stay in the results folder"
    branch = f"weekly/{args.date}"
    if git(args.repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").stdout.strip():
        return f"{branch} (exists; the run would add to it)"
    head = git(args.repo, "rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return f"{branch}: cannot be made: {args.repo} is not a git checkout with a commit"
    return f"{branch} (would be made from {head.stdout.strip()})"


def dry_run(args: argparse.Namespace) -> int:
    scoped = scoped_folder(args)
    log = scoped / f"weekly_{args.date}.log"
    selected = args.frameworks or [a.name for a in adapters.registry().values() if a.benchmark_cells]
    runnable = runnable_frameworks(args.frameworks)
    elsewhere = [f for f in selected if f not in runnable]
    skips = {key: skip for key, skip in diagnosed_skips(scoped, args.date).items()
             if key.partition("/")[0] in selected and key.partition("/")[2] in args.splits}
    to = "their adapters' pinned versions" if args.pinned else "their newest releases"
    update = "none (--no-update)" if args.no_update else f"{', '.join(runnable) or 'none'} to {to}"
    lines = [
        "cellbench weekly --dry-run: nothing is installed, run, written, committed or pushed",
        f"model: {args.choice.profile.name} ({args.choice.profile.source}) from {args.choice.model_source}",
        args.choice.machine_said().replace("machine ", "machine: ", 1),
        f"folder: {scoped}/ (journal weekly_{args.date}.journal.md, log {log.name})",
        f"branch: {_branch(args)}",
        f"update: {update}",
        f"splits: {', then '.join(args.splits)}",
        f"frameworks on this platform: {', '.join(runnable) or 'none'}"
        + (f"; skipped, not on this platform: {', '.join(elsewhere)}" if elsewhere else ""),
        *[f"held skip: {key} since {skip['since']}: {skip['reason']} (unless this run's update moves it)"
          for key, skip in sorted(skips.items())],
    ]
    for split in args.splits:
        marker = split_marker(split, args.frameworks)
        lines.append(f"session: {shlex.join(session_command(split, args, RUN_ID, log, marker))}")
    lines.append(f"then: transient failures retried once, failed fix attempts reverted, reports rebuilt, "
                 f"{'nothing committed' if args.no_branch else 'results committed on the branch'}")
    print("\n".join(lines))
    return 0
