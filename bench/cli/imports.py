"""`cellbench import siliconbench PATH --machine SLUG [--results-name NAME] [--results-dir DIR] [--dry-run]`.

Converts SiliconBench's own result files (a file, or a folder such as its
`results/<model>/[<machine>/]<split>/`) into cellbench results labelled `imported`
(bench.imports.tree), so the suspicious check, the journal and `cellbench report` see a team's
earlier numbers. One line per file says what became of it; the exit status is 1 when any file
was refused, so a script notices, and the others are imported all the same.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bench.base.flags import add_results_name
from bench.base.paths import results_root
from bench.imports.tree import import_siliconbench
from bench.plugins.opts.settings import cell_option

SLUG = re.compile(r"^[a-z0-9_-]+$")  # as the result schema's machine.slug


def _slug(value: str) -> str:
    if not SLUG.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a machine slug (lowercase letters, digits, - and _; "
                                         "`cellbench doctor` runs on the machine, `machine.slug` is in its results)")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cellbench import", description=__doc__.splitlines()[0])
    tools = parser.add_subparsers(dest="tool", required=True)
    sb = tools.add_parser("siliconbench", help="SiliconBench's concurrency_results JSON files")
    sb.add_argument("path", type=Path, help="a result file, or a folder searched for them")
    sb.add_argument("--machine", required=True, type=_slug,
                    help="the slug of the machine that ran them, as its cellbench results are filed")
    add_results_name(sb, help="the model's results name (default: SiliconBench's comparison.json or folder)")
    cell_option("--results-dir").add_argument(sb, shown="the checkout's results/: the nearest folder upward with "
                                                        "a pytest.ini")
    sb.add_argument("--dry-run", action="store_true", help="say what would be written; write nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = results_root(args.results_dir, Path.cwd())
    try:
        outcomes = import_siliconbench(args.path, machine=args.machine, results_root=root,
                                       model=args.results_name, dry_run=args.dry_run)
    except FileNotFoundError as exc:
        print(f"cellbench import: {exc}", file=sys.stderr)
        return 1
    if not outcomes:
        print(f"cellbench import: no JSON file under {args.path}", file=sys.stderr)
        return 1
    for outcome in outcomes:
        print(outcome, file=sys.stderr if outcome.status == "refused" else sys.stdout)
    counts = {s: sum(o.status == s for o in outcomes) for s in dict.fromkeys(o.status for o in outcomes)}
    print(", ".join(f"{n} {status}" for status, n in counts.items())
          + ("" if args.dry_run else "; `cellbench report` rebuilds the reports with them"))
    return 1 if counts.get("refused") else 0


if __name__ == "__main__":
    raise SystemExit(main())
