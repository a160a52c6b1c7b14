"""`cellbench nightly`: the steps of .github/workflows/nightly.yml that are more than one command.

- `matrix`: the night's job matrix from machines.yaml and a manual run's inputs, as the lines
  `matrix=<json>`, `expected=<names>` and `models=<names>` that a step appends to $GITHUB_OUTPUT;
- `previous --out DIR`: download the machines' folders of the previous completed nightly run (its
  artifacts, with `gh run download`), for tonight's regressions; none is not an error;
- `track MERGED [--current DIR --previous DIR]`: open, update or close each model's tracking issue
  from a merged report and, given both folders, the significant regressions of tonight's cells
  against the previous night's (bench.cli.decisions.compare);
- `tables --out DIR`: keep the eval rows' reference-table edits of the checkout (left by
  `pytest -m eval --no-commit`) as a patch in DIR, beside the machine's results (bench.nightly.tables);
- `publish MERGED FOLDER...`: commit the night on `nightly/<date>` (each machine's table edits
  applied) and push it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import date
from pathlib import Path

from bench.base.git import GitError
from bench.base.paths import PROJECT_ROOT
from bench.cli.decisions.compare import CompareError, compare, regressed, resolve
from bench.nightly.machines import MACHINES_FILE, Inputs, MachinesError, load_machines, matrix
from bench.nightly.publish import publish
from bench.nightly.tables import save_table_edits
from bench.nightly.tracking import GhError, Night, Regression, gh, track


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
    regressions, against = night_regressions(args.current, args.previous)
    print(f"regressions: {against}")
    night = night.with_regressions(regressions, against)
    for line in track(night):
        print(line)
    return 0


def night_regressions(current: Path | None, previous: Path | None) -> tuple[dict[str, list[Regression]], str]:
    """Per model, tonight's significant regressions against the previous night's results, and
    what they were judged against (or why nothing was)."""
    if current is None or previous is None:
        return {}, ""
    try:
        before = resolve(str(previous), previous)
    except CompareError:
        return {}, f"nothing: no previous night's results in {previous}"
    try:
        after = resolve(str(current), current)
    except CompareError as exc:
        return {}, f"nothing: {exc}"
    comparison = compare(before, after, pair_single=False)
    runs = sorted({p.old.result.run_id for p in comparison.pairs})
    out: dict[str, list[Regression]] = {}
    for pair, level, change in regressed(comparison):
        model, machine, split, framework = pair.cell
        line = f"{level} {change.figure.label} {change.text()} (basis: {change.basis})"
        out.setdefault(model, []).append(Regression(f"{framework}/{split} on {machine}", line))
    return out, (f"the previous night (run {', '.join(runs) or 'none in common'}, "
                 f"{len(comparison.pairs)} cells compared)")


def _previous(args: argparse.Namespace) -> int:
    listed = gh("run", "list", "--workflow", args.workflow, "--status", "completed", "--limit", "20",
                "--json", "databaseId,createdAt").strip()
    runs = [r for r in (json.loads(listed) if listed else []) if str(r["databaseId"]) != args.this_run]
    if not runs:
        print("no previous nightly run: tonight's regressions are not checked")
        return 0
    run = runs[0]
    try:
        gh("run", "download", str(run["databaseId"]), "--pattern", "nightly-*", "--dir", str(args.out))
    except GhError as exc:  # expired artifacts, say: the night is still tracked for failures
        print(f"previous nightly run {run['databaseId']} ({run['createdAt']}): not downloaded: {exc}")
        return 0
    print(f"previous nightly run {run['databaseId']} ({run['createdAt']}): its machines' folders in {args.out}")
    return 0


def _tables(args: argparse.Namespace) -> int:
    print(save_table_edits(args.repo, args.out, args.machine or os.environ.get("CELLBENCH_MACHINE")))
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
    t.add_argument("--current", type=Path, default=None, help="tonight's machines' folders (with --previous)")
    t.add_argument("--previous", type=Path, default=None,
                   help="the previous night's folders (`nightly previous`); regressions against them open the issue")
    t.set_defaults(func=_track)
    v = sub.add_parser("previous", help="download the previous completed nightly run's machine folders")
    v.add_argument("--out", type=Path, required=True, help="where its folders go")
    v.add_argument("--this-run", default="", help="this run's id, never taken for the previous one")
    v.add_argument("--workflow", default="nightly.yml", help="[nightly.yml]")
    v.set_defaults(func=_previous)
    k = sub.add_parser("tables", help="keep the checkout's reference-table edits as a patch beside the results")
    k.add_argument("--out", type=Path, required=True, help="the machine's folder (uploaded as its artifact)")
    k.add_argument("--repo", type=Path, default=Path.cwd(), help="the checkout the eval rows edited [.]")
    k.add_argument("--machine", default=None, help="the machine's name [$CELLBENCH_MACHINE]")
    k.set_defaults(func=_tables)
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
