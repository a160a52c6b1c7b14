"""`cellbench site RESULTS [RESULTS...] OUT`: one static site over whole results trees.

Per model, machine and split (the folders of each RESULTS, SiliconBench's once imported included;
the same split folder of several trees, such as two nights' artifacts of one machine, is one): a
table of each framework's newest result at its highest level, sortable by any column, with a
sparkline of its output tok/s over levels and its provenance in the row's tooltip; results that do
not stand ok sit below the rest, marked with why; and per framework a trend across its runs of
output tok/s and TTFT p50 at one level, with the machine's noise floor (`cellbench noise`) as a
band and each run's decision against the one before, as `cellbench compare` makes it, marked.

OUT gets `index.html` (its CSS, script and charts inline: it needs no network when viewed) and
`site.json`, the same figures as data. Exit 1 when RESULTS holds no result.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from bench.base.files import atomic_write
from bench.cli.site.gather import gather
from bench.cli.site.page import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench site", description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+", help="results roots (<model>/<machine>/<split>/ folders)")
    parser.add_argument("out", type=Path, help="the folder to write index.html and site.json into")
    args = parser.parse_args(argv)
    views = gather(args.results)
    source = ", ".join(map(str, args.results))
    if not views:
        print(f"no results under {source}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    page = args.out / "index.html"
    atomic_write(page, render(views, source))
    data = args.out / "site.json"
    atomic_write(data, json.dumps([dataclasses.asdict(v) for v in views], indent=1) + "\n")
    cells = sum(len(v.rows) for v in views)
    print(f"{page}: {len(views)} splits, {cells} cells")
    print(data)
    return 0
