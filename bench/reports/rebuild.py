"""Rebuild comparison.json, comparison.csv, REPORT.md and plots from result files alone.

`python -m bench.reports.rebuild [--results-dir DIR] [--results-name M] [--machine SLUG]`; with
`--merge DIR...` it hands over to bench.reports.merged.gather (one report across machines' result folders).

Reports are derived data: anyone can regenerate them from the committed result files, on any
machine, without rerunning a cell. Each `<model>/<machine>/<split>/` directory is compared for
the machine it is named after, so a stray file from another machine is listed, never chosen; a
legacy `<model>/<split>/` one cellbench filed in, for the machine its newest result names.

A SiliconBench tree (`<model>/[<machine>/]<split>/<framework>_<YYYYMMDD_HHMMSS>.json`) is not
cellbench's: a folder of nothing else is never written to (its comparison.json and REPORT.md
are SiliconBench's), and each one whose files were not imported yet gets a line naming the
`cellbench import siliconbench` command that converts it (bench.imports.found). With nothing
else to rebuild, that line is the answer and the exit status is 1.

Each report is about one run (bench.reports.standing): `--run-id ID`, else the run of the split's
newest result. A result of another run is shown with its run id and day and kept out of every
order, or with `--other-runs leave-out` left out, with a line naming it.

`--as aiperf|vllm|guidellm|siliconbench` writes nothing: it prints each split's REPORT.md, built
from its result files as the rebuild would, with the level tables' metric rows named as that tool
names them (bench.core.crosswalk), cellbench's name beside each, and a note under the title. The
committed REPORT.md keeps cellbench's names: a report another tool's names were put on would be a
second report of the same files, easy to take for the first, diff or commit by mistake.

`--timeline-trace` also writes each result's requests as a Chrome trace event file beside its
request log (bench.reports.timeline.trace), for Perfetto or chrome://tracing.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.base.defaults import SPLITS
from bench.base.flags import add_results_name
from bench.base.paths import results_root
from bench.core import crosswalk
from bench.core.metrics.table import BY_KEY
from bench.core.noise import Floors
from bench.core.result.store import COMPARISON_FILE, split_place
from bench.imports import found
from bench.reports import markdown, plots
from bench.reports.comparison import OTHER_RUNS, Comparison, build_comparison, read_comparison, write_comparison
from bench.reports.csv_export import comparison_csv, requests_csv, write_comparison_csv
from bench.reports.markdown import write_report
from bench.reports.merged import gather
from bench.reports.standing import ThisRunIds
from bench.reports.timeline import trace as timeline_trace


def split_dirs(results_root: Path, *, model: str | None = None, machine: str | None = None) -> Iterator[Path]:
    """`<results_root>/<model>/<machine>/<split>/` directories, and SiliconBench's legacy
    `<results_root>/<model>/<split>/` ones cellbench filed in (bench.core.result.store.split_place), that
    hold any JSON besides the comparison, but not one of SiliconBench's results only
    (bench.imports.found.siliconbench_only)."""
    root = Path(results_root)
    candidates = [*root.glob("*/*/*/"), *(d for d in root.glob("*/*/") if d.name in SPLITS)]
    for split_dir in sorted(candidates):
        if split_dir.parent.name in SPLITS:
            continue  # a legacy split folder's logs/ or plots/
        if not any(p.name != COMPARISON_FILE for p in split_dir.glob("*.json")) or found.siliconbench_only(split_dir):
            continue
        place = split_place(split_dir)
        if place.legacy != (split_dir.parent.parent == root):
            continue  # a machine folder named like a split, or results naming another model
        if (model is None or place.model == model) and (machine is None or place.machine == machine):
            yield split_dir


def rebuild_split(split_dir: Path, *, this_run: ThisRunIds = None,
                  other_runs: str = "mark") -> tuple[Comparison, list[Path]]:
    """comparison.json, then REPORT.md and plots rendered from that file as written, about run
    `this_run` (default: the run of the split's newest result; bench.reports.comparison).

    Returns the comparison and the files written."""
    comparison_path = write_comparison(split_dir, this_run=this_run, other_runs=other_runs)
    comparison = read_comparison(comparison_path)
    report = write_report(split_dir, comparison)
    table = write_comparison_csv(split_dir, comparison)
    return comparison, [comparison_path, report, table, *sorted((split_dir / plots.PLOTS_DIR).glob("*.png"))]


def rebuild(results_root: Path, *, model: str | None = None, machine: str | None = None, this_run: ThisRunIds = None,
            other_runs: str = "mark") -> list[Path]:
    """Rebuild every (filtered) split directory under `results_root`; returns the files written."""
    return [path for d in split_dirs(results_root, model=model, machine=machine)
            for path in rebuild_split(d, this_run=this_run, other_runs=other_runs)[1]]


_ROW_TAIL = re.compile(r"( (avg|p\d+))? \([^)]*\)$")  # "TPOT avg (ms)": the statistic and the unit after the name


def peer_relabel(tool: str) -> Callable[[str], str]:
    """REPORT.md's row label -> the same row under `tool`'s name for its metric: "TPOT avg (ms)" ->
    "Inter Token Latency (AIPerf, close; cellbench TPOT) avg (ms)", "TTFB ..." -> "TTFB (no vLLM
    equivalent) ...". A row of no crosswalk figure (counts, tokens per chunk, the client) keeps its label."""
    keys = {label: key.partition(".")[0] if key.partition(".")[0] in BY_KEY else key
            for label, key in markdown.row_metrics().items()}
    keys.update({label: "goodput.goodput_rps" for label, _ in markdown.GOODPUT_ROWS})
    short = crosswalk.tool_label(tool, version=False)

    def relabel(label: str) -> str:
        key = keys.get(label)
        if key not in crosswalk.KEYS:
            return label
        entry = crosswalk.peer_metric(tool, key)
        ours = _ROW_TAIL.sub("", label)
        if entry.name is None:
            return f"{ours} (no {short} equivalent){label[len(ours):]}"
        how = {"same": "", "close": ", close", "different": ", differs"}[entry.likeness]
        return f"{entry.name} ({short}{how}; cellbench {ours}){label[len(ours):]}"
    return relabel


def peer_note(tool: str) -> str:
    """The line under the title of a report shown with `tool`'s names."""
    short = crosswalk.tool_label(tool, version=False)
    return (f"Metric names as {crosswalk.tool_label(tool)} gives them (`cellbench report --as {tool}`), cellbench's "
            f"beside each: \"close\" marks a definition that differs in detail, \"differs\" another quantity, \"no "
            f"{short} equivalent\" a figure {short} does not report. The values are cellbench's own, unchanged, "
            "and only the level tables' rows are renamed; docs/metrics.md (Names in other tools) gives each "
            "formula and how it differs. REPORT.md itself keeps cellbench's names.")


def report_as(split_dir: Path, tool: str, *, this_run: str | None = None, other_runs: str = "mark") -> str:
    """`split_dir`'s REPORT.md under `tool`'s names, built from its result files; nothing is written."""
    comparison = build_comparison(split_dir, this_run=this_run, other_runs=other_runs)
    plot_files = sorted((split_dir / plots.PLOTS_DIR).glob("*.png"))  # as the last rebuild left them
    return markdown.render_report(comparison, plot_files, Floors(split_dir), relabel=peer_relabel(tool),
                                  note=(peer_note(tool),))


def _about(result: Mapping[str, Any]) -> dict[str, Any]:
    """What a timeline trace says of its cell: the run, the verdict, the framework's version."""
    return {"run_id": result.get("run_id"), "verdict": (result.get("verdict") or {}).get("verdict"),
            "framework_version": (result.get("framework") or {}).get("version"),
            "requests_file": result["requests_file"]}


def main(argv: list[str] | None = None) -> int:
    args_given = list(argv if argv is not None else sys.argv[1:])
    if any(a == "--merge" or a.startswith("--merge=") for a in args_given):
        return gather.main(args_given)
    parser = argparse.ArgumentParser(
        prog="python -m bench.reports.rebuild", description=__doc__.splitlines()[0],
        epilog="With --merge DIR [DIR...] [--expect M1,M2] [--out merged]: one report across machines.")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="results root [the checkout's results/: the nearest folder upward with a pytest.ini]")
    add_results_name(parser, help="only this model (its results directory name)")
    parser.add_argument("--machine", help="only this machine slug")
    parser.add_argument("--csv", action="store_true",
                        help="print every split's figures as one CSV (bench.reports.csv_export); writes nothing")
    parser.add_argument("--requests-csv", action="store_true",
                        help="also write each result's per-request log as <result>.requests.csv beside its sidecar")
    parser.add_argument("--timeline-trace", action="store_true",
                        help="also write each result's requests as a Chrome trace event file, <result>.trace.json "
                             "beside its log, for Perfetto or chrome://tracing (bench.reports.timeline.trace)")
    parser.add_argument("--as", dest="as_tool", choices=crosswalk.TOOLS,
                        help="print each REPORT.md with this tool's metric names beside cellbench's (docs/metrics.md, "
                             "Names in other tools); writes nothing")
    parser.add_argument("--run-id", dest="this_run", metavar="ID",
                        help="the run the reports are about: a result of another run is marked `not from this run` "
                             "[the run of each split's newest result]")
    parser.add_argument("--other-runs", choices=OTHER_RUNS, default="mark",
                        help="a result of another run than this one: shown with its run id and day, out of every "
                             "order (mark), or left out with a line naming it (leave-out) [mark]")
    args = parser.parse_args(args_given)
    which = {"this_run": args.this_run, "other_runs": args.other_runs}
    root = results_root(args.results_dir, Path.cwd())
    shown = root if args.results_dir is None else args.results_dir
    dirs = list(split_dirs(root, model=args.results_name, machine=args.machine))
    foreign = found.import_lines(found.find(root, model=args.results_name, machine=args.machine), root, shown,
                                 results_dir=args.results_dir, others=dirs)
    if not dirs:
        print("\n".join(foreign) or f"no result directories under {shown}", file=sys.stderr)
        return 1
    if args.csv:
        print(comparison_csv(build_comparison(d, **which) for d in dirs), end="")
        return 0
    if args.as_tool is not None:
        print("\n\n".join(report_as(split_dir, args.as_tool, **which) for split_dir in dirs))
        for line in foreign:
            print(line, file=sys.stderr)
        return 0
    for split_dir in dirs:
        comparison, written = rebuild_split(split_dir, **which)
        if args.requests_csv:
            written += [requests_csv(split_dir / str(r["requests_file"])) for r in comparison["results"].values()
                        if r.get("requests_file") and (split_dir / str(r["requests_file"])).is_file()]
        if args.timeline_trace:
            write = timeline_trace.write_trace
            written += [write(split_dir / str(r["requests_file"]), f"{name} {r['split']}", _about(r))
                        for name, r in comparison["results"].items()
                        if r.get("requests_file") and (split_dir / str(r["requests_file"])).is_file()]
        for path in written:
            print(path)
        for ignored in comparison["ignored"]:
            print(f"  ignored {ignored['file']}: {ignored['reason']}", file=sys.stderr)
        for left in comparison["left_out"]:
            print(f"  left out {left['file']}: {left['reason']} (--other-runs mark shows it)", file=sys.stderr)
    for line in foreign:  # beside cellbench's own results: said, and the rebuild stands
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
