"""`cellbench nightly`: the steps of .github/workflows/nightly.yml that are more than one command.

- `matrix`: the night's job matrix from machines.yaml and a manual run's inputs, as the lines
  `matrix=<json>`, `expected=<names>` and `models=<names>` that a step appends to $GITHUB_OUTPUT;
- `track MERGED`: open, update or close each model's tracking issue from a merged report;
- `publish MERGED FOLDER...`: commit the night on `nightly/<date>` and push it.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

from bench.base.git import GitError
from bench.base.paths import PROJECT_ROOT
from bench.nightly.machines import MACHINES_FILE, Inputs, MachinesError, load_machines, matrix
from bench.nightly.publish import publish
from bench.nightly.tracking import GhError, Night, track


def _matrix(args: argparse.Namespace) -> int:
    evals = {"": None, "true": True, "false": False}
    if args.eval not in evals:
        raise MachinesError(f"--eval takes true, false or nothing, got {args.eval!r}")
    inputs = Inputs(model=args.model, splits=args.splits, frameworks=args.frameworks, requests=args.requests,
                    eval=evals[args.eval], machines=args.machines)
    entries = matrix(load_machines(args.file), inputs)
    print(f"matrix={json.dumps(entries, separators=(',', ':'))}")
    print(f"expected={','.join(e['name'] for e in entries)}")
    print(f"models={','.join(sorted({e['model'] for e in entries}))}")
    return 0


def _track(args: argparse.Namespace) -> int:
    path = args.merged / "merged.json"
    # No merged report: no machine sent a result (the merge refused to write an empty one).
    merged = json.loads(path.read_text()) if path.is_file() else {"tables": [], "failures": [], "missing": []}
    models = [m for m in args.models.split(",") if m]
    night = Night.from_merged(merged, day=args.day, run_url=args.run_url, models=models)
    for line in track(night):
        print(line)
    return 0


def _publish(args: argparse.Namespace) -> int:
    subject = publish(args.repo, args.branch or f"nightly/{args.day}", args.merged, args.folders, push=args.push)
    print(subject or "nothing new to commit")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench nightly", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    m = sub.add_parser("matrix", help="the night's job matrix, as $GITHUB_OUTPUT lines")
    m.add_argument("--file", type=Path, default=MACHINES_FILE, help="machines file [machines.yaml]")
    for name in ("model", "splits", "frameworks", "requests", "machines", "eval"):
        m.add_argument(f"--{name}", default="", help="a manual run's input; empty: machines.yaml's value")
    m.set_defaults(func=_matrix)
    t = sub.add_parser("track", help="open, update or close each model's tracking issue with gh")
    t.add_argument("merged", type=Path, help="the folder `cellbench report --merge` wrote")
    t.add_argument("--run-url", required=True, help="the workflow run, linked from the issue")
    t.add_argument("--models", default="", help="the models scheduled tonight (a silent one fails)")
    t.add_argument("--day", default=date.today().isoformat(), help="the night [today]")
    t.set_defaults(func=_track)
    p = sub.add_parser("publish", help="commit the night on nightly/<date> (never main)")
    p.add_argument("merged", type=Path, help="the folder `cellbench report --merge` wrote")
    p.add_argument("folders", type=Path, nargs="+", help="the machines' folders (artifacts or results roots)")
    p.add_argument("--repo", type=Path, default=PROJECT_ROOT, help="the checkout that holds the branch")
    p.add_argument("--branch", default=None, help="[nightly/<day>]")
    p.add_argument("--day", default=date.today().isoformat(), help="the night [today]")
    p.add_argument("--push", action="store_true", help="push the branch to origin")
    p.set_defaults(func=_publish)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (MachinesError, GhError, GitError, OSError) as exc:
        print(f"cellbench nightly {args.step}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
