"""`cellbench update [FRAMEWORK...] [--dry-run] [--json]`: frameworks at their newest release.

For every framework that runs here (or those named), the newest release is asked at its own source
(the package index through pip, the git remote, brew), a newer one is installed into the cache
beside the installed one and recorded, and later cells use it unless pytest gets `--pinned`
(bench.setup.installs.updates). `--dry-run` installs nothing and prints, per framework, the pinned version,
the one cells use now, the newest one and how it was found, or why it could not be. Exit status:
0, or 1 when an install failed (or a named framework cannot run here).

The weekly run calls `update_frameworks` below.
"""

from __future__ import annotations

import argparse
import json
import sys

import adapters
from bench.setup.adapter import this_platform
from bench.setup.installs import updates
from bench.setup.installs.updates import UpdateRecord


def update_frameworks(only: list[str] | None = None, *, pinned: bool = False, dry_run: bool = False,
                      pre: bool = False) -> list[UpdateRecord]:
    """Update every framework that runs here and has cells (or those of `only`); with `pinned`, only
    install each adapter's own version, recording nothing."""
    return updates.update_frameworks(adapters.registry().values(), only, pinned=pinned, dry_run=dry_run, pre=pre)


def describe(record: UpdateRecord) -> str:
    """One line: pinned, what cells use (before -> after), newest, and how it was resolved."""
    if record.dry_run or record.before == record.after:
        using = f"selected {record.before or 'none (not installed)'}"
    else:
        using = f"{record.before or 'none'} -> {record.after or 'none'}"
    newest = record.newest or "?"
    if record.resolution.newest not in (None, record.newest):
        newest += f" ({record.resolution.newest})"
    outcome = f"FAILED: {record.error}" if record.error else record.note
    how = record.resolution.describe()
    return (f"{record.framework}: pinned {record.pinned}, {using} ({record.choice}), newest {newest}"
            + (f": {outcome}" if outcome else "") + f"; {how if how.startswith('unresolved') else 'via ' + how}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench update", description=__doc__.splitlines()[0])
    parser.add_argument("frameworks", nargs="*", help="default: every framework that runs here")
    parser.add_argument("--dry-run", action="store_true", help="resolve and print; install and record nothing")
    parser.add_argument("--json", action="store_true", help="print the update records as JSON")
    parser.add_argument("--pre", action="store_true", help="count pre-releases as newer releases too")
    args = parser.parse_args(argv)
    known = adapters.registry()
    unknown = [name for name in args.frameworks if name not in known]
    if unknown:
        parser.error(f"unknown framework(s) {', '.join(unknown)}; known: {', '.join(known)}")
    rc = 0
    for name in args.frameworks:
        if known[name].platform_here() is None:
            print(f"{name}: runs on {', '.join(sorted(known[name].platforms))}; this is {this_platform()}",
                  file=sys.stderr)
            rc = 1
    records = update_frameworks(args.frameworks or None, dry_run=args.dry_run, pre=args.pre)
    if args.json:
        print(json.dumps([r.to_json() for r in records], indent=1))
    else:
        for record in records:
            print(describe(record), flush=True)
    return 1 if rc or any(r.error for r in records) else 0
