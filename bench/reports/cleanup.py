"""`cellbench clean`: delete this machine's stale results, and refuse anything else, by name.

A file is deleted only when its own record proves it is this machine's (the `machine.slug`
inside it, not the directory it sits in), it is not the newest result of its framework, and its
run is older than the cut-off. A file of another machine, or one that cannot be read or carries
no machine (another tool's file, a hand-copied one), is never deleted: it is named with the
reason, and the command exits 1 so an unattended run notices. A result converted from another
tool's file (`cellbench import`, its `imported` block) is kept: it is the baseline a comparison
is made against, however old, and it is not stale for being older than this machine's runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.base import clock
from bench.base.flags import add_results_name
from bench.base.paths import results_root
from bench.core.result.store import LoadedResult, load_results, select_latest, split_place
from bench.host.machine import detect
from bench.reports.rebuild import split_dirs


@dataclass
class CleanupPlan:
    delete: list[Path] = field(default_factory=list)  # result files and their sidecars
    refused: list[tuple[Path, str]] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def _sidecars(result: LoadedResult) -> list[Path]:
    """What a cell wrote beside its result: `<stem>.*` (requests, resources) and logs/<stem>_*."""
    stem = result.path.stem
    split_dir = result.path.parent
    return sorted([*split_dir.glob(f"{stem}.*"), *(split_dir / "logs").glob(f"{stem}_*")])


def plan(split_dir: Path, machine: str, older_than: timedelta, now: datetime | None = None) -> CleanupPlan:
    out = CleanupPlan()
    owner = split_place(split_dir).machine  # its machine folder's name, or a legacy tree's owner
    if owner != machine:
        out.refused.append((split_dir, f"directory of machine {owner}; this is {machine}"))
        return out
    results, unreadable = load_results(split_dir)
    out.refused += [(split_dir / bad.file, f"cannot prove which machine it is from ({bad.reason})")
                    for bad in unreadable]
    selection = select_latest(results, machine=machine)
    newest = {r.path for r in selection.chosen.values()}
    cutoff = (now or clock.now()) - older_than
    for result in results:
        if result.machine != machine:
            out.refused.append((result.path, f"recorded machine {result.machine}; this is {machine}"))
        elif result.path in newest or "imported" in result.data:
            out.kept.append(result.path)
        elif datetime.strptime(result.run_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc) < cutoff:
            out.delete += _sidecars(result)
        else:
            out.kept.append(result.path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench clean", description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="results root [the checkout's results/: the nearest folder upward with a pytest.ini]")
    add_results_name(parser, help="only this model (its results directory name)")
    parser.add_argument("--older-than", type=float, default=28.0, metavar="DAYS",
                        help="delete results of runs older than this, never a framework's newest [28]")
    parser.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")
    args = parser.parse_args(argv)
    here = detect()
    machine = here.slug
    total = CleanupPlan()
    for split_dir in split_dirs(results_root(args.results_dir, Path.cwd()), model=args.results_name):
        place = split_place(split_dir)
        if place.machine != machine or place.legacy != here.legacy_tree:
            continue  # other machines' directories, or the tree this machine does not file in: not even listed
        found = plan(split_dir, machine, timedelta(days=args.older_than))
        total.delete += found.delete
        total.refused += found.refused
        total.kept += found.kept
    for path in total.delete:
        if not args.dry_run:
            path.unlink(missing_ok=True)
        print(f"{'would delete' if args.dry_run else 'deleted'} {path}")
    for path, why in total.refused:
        print(f"REFUSED {path}: {why}", file=sys.stderr)
    print(f"{len(total.delete)} file(s) {'to delete' if args.dry_run else 'deleted'}, "
          f"{len(total.kept)} result(s) kept, {len(total.refused)} refused")
    return 1 if total.refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
