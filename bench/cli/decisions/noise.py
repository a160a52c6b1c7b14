"""`cellbench noise FRAMEWORK`: measure this machine's noise floor of one cell.

It runs the framework's cell of one split through pytest (`-m "chat and llamacpp"`: a marker, since
`-k vllm` would also select vllm_metal) with `--rounds N` (the same framework,
version and settings N times in a row, stdin closed, as `cellbench weekly` runs its sessions),
measures the spread of every compared figure across the rounds from the result it wrote
(bench.core.noise.measure) and stores it at
`<results root>/<model>/<machine>/noise/<split>/<framework>.json`, where every comparison of that
cell on this machine finds it. The measuring run's own files stay under
`<results root>/<model>/<machine>/noise/runs/`, apart from the cell's results, so that they are
never the cell's newest result. Exit 0 with a stored floor; pytest's own code (or 1) when the run
left no result, 1 when its result has no rounds to measure, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import adapters
from bench.base.defaults import SPLITS
from bench.base.paths import PROJECT_ROOT, results_root
from bench.cli.choice import choose
from bench.core import noise
from bench.core.metrics.stats.change import FIGURES
from bench.core.result.files import NotAResult, new_run_id, read_result
from bench.plugins.opts.settings import cell_option
from bench.setup.profiles import ProfileError

DEFAULT_RUNS = 5


SHOWN = ("output_throughput_tps", "request_throughput_rps", "ttft_ms.p50", "ttft_ms.p99", "tpot_ms.p50", "itl_ms.p50",
         "e2el_ms.p50")


@dataclass(frozen=True)
class FloorRun:
    """A floor measured by a pytest session, or why there is none."""

    floor: noise.Floor | None
    path: Path | None
    exit_code: int
    seconds: float
    problem: str | None = None


def runs_root(results: Path, model: str, machine: str) -> Path:
    """Where a floor's measuring runs write their results (apart from the cells' own)."""
    return results / model / machine / noise.FOLDER / "runs"


def measure_floor(framework: str, *, runs: int, split: str, model: str | None, results: Path,
                  pytest_args: list[str], log: Path | None = None) -> FloorRun:
    """Run the cell with --rounds `runs`, then measure and store its floor. `model` is `--model`
    (None: APPLEBENCH_MODEL, else the default, as the session itself chooses: bench.cli.choice)."""
    choice = choose(model)
    where = runs_root(results, choice.profile.results_name, choice.machine.folder)
    run_id = new_run_id()
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", f"{split} and {framework}",
           f"--rounds={runs}", *choice.session_args(), f"--run-id={run_id}", f"--results-dir={where}", *pytest_args]
    started = time.monotonic()
    sink = log.open("a") if log is not None else None
    try:
        if sink is not None:
            sink.write(f"$ {' '.join(cmd)}\n")
            sink.flush()
        done = subprocess.run(cmd, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                              env={**os.environ}, check=False)
    finally:
        if sink is not None:
            sink.close()
    seconds = time.monotonic() - started
    found = sorted(where.glob(f"*/*/{split}/{framework}_{run_id}.json"))
    if not found:
        return FloorRun(None, None, done.returncode or 1, seconds,
                        f"pytest exited {done.returncode} and wrote no {framework}/{split} result under {where}")
    try:
        result = read_result(found[0])
        floor = noise.measure(result, source=str(found[0]))
    except (NotAResult, noise.FloorError) as exc:
        return FloorRun(None, None, 1, seconds, str(exc))
    target = noise.floor_path(results, floor.model, choice.machine.folder, floor.split, floor.framework)
    return FloorRun(floor, noise.write(floor, target), done.returncode, seconds)


def installed_version(framework: str, *, pinned: bool = False) -> str | None:
    """The version of `framework` its cells would run now (as `cellbench doctor` says), or None."""
    from bench.cli.main import doctor_report

    return doctor_report(adapters.get(framework), pinned).get("version")


def floor_due(results: Path, model: str, machine: str, split: str, framework: str, version: str | None) -> str | None:
    """Why the cell's floor must be measured (none yet, a broken file, another framework version
    than the installed one), or None when the stored one stands (docs/weekly.md)."""
    try:
        floor = noise.load(results, model, machine, split, framework)
    except noise.FloorError as exc:
        return f"its floor file is broken ({exc})"
    if floor is None:
        return "no floor yet"
    measured_on = floor.settings.get("framework_version")
    if version is not None and measured_on != version:
        return f"its floor was measured on {framework} {measured_on}, {version} is installed"
    return None


def refresh_floors(frameworks: list[str], splits: list[str], *, runs: int, model: str | None, results: Path,
                   pytest_args: list[str], log: Path, pinned: bool = False) -> list[str]:
    """Measure each (framework, split) floor that is due, before a weekly run's splits; one journal
    note per cell (measured, kept, or why none was measured). A failure here never stops the run."""
    choice = choose(model)
    profile, machine = choice.profile, choice.machine.folder  # where its floors are: the slug's folder
    notes = []
    for framework in frameworks:
        version = installed_version(framework, pinned=pinned)
        for split in splits:
            why = floor_due(results, profile.results_name, machine, split, framework, version)
            if why is None:
                notes.append(f"Noise floor {framework}/{split}: kept (framework {version})")
                continue
            done = measure_floor(framework, runs=runs, split=split, model=model, results=results,
                                 pytest_args=[*pytest_args, *([] if not pinned else ["--pinned"])], log=log)
            took = _duration(done.seconds)
            notes.append(f"Noise floor {framework}/{split}: measured, {runs} runs in {took}, because {why}: {done.path}"
                         if done.path else f"Noise floor {framework}/{split}: none measured ({took}): {done.problem}")
    return notes


def describe(floor: noise.Floor) -> list[str]:
    """Per level, the spread of the figures people read first, as a percentage (exp(sd) - 1)."""
    labels = {f.key: f.label for f in FIGURES}
    lines = [f"noise floor of {floor.framework}/{floor.split} on {floor.machine} ({floor.model}), "
             f"{floor.runs} runs, measured {floor.measured_at}, framework {floor.settings.get('framework_version')}"]
    for level, spread in floor.levels.items():
        shown = [f"{labels[k]} {math.expm1(spread[k]):.1%}" for k in SHOWN if k in spread]
        lines.append(f"  {level}: " + (", ".join(shown) if shown else "no figure every run has"))
    return lines


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench noise", description=__doc__.splitlines()[0])
    parser.add_argument("framework", help="the framework whose cell is measured")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"identical runs (rounds) [{DEFAULT_RUNS}]")
    parser.add_argument("--split", default="chat", choices=SPLITS, help="[chat]")
    cell_option("--model").add_argument(parser)  # as a cell takes them
    cell_option("--results-dir").add_argument(parser, shown="the checkout's results/")
    parser.epilog = "Arguments after -- go to the pytest session: cellbench noise llamacpp -- --requests 32"
    given = list(sys.argv[1:] if argv is None else argv)
    cut = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:cut])
    args.pytest_args = given[cut + 1:]
    if args.framework not in adapters.registry():
        parser.error(f"no adapter named {args.framework}; known: {', '.join(sorted(adapters.registry()))}")
    if args.runs < 2:
        parser.error(f"--runs must be at least 2 (a spread needs two runs), got {args.runs}")
    try:
        choice = choose(args.model)
    except ProfileError as exc:
        parser.error(str(exc))
    results = results_root(args.results_dir, Path.cwd()).resolve()
    print(f"cellbench noise: {choice.said()}", flush=True)
    measured = measure_floor(args.framework, runs=args.runs, split=args.split, model=args.model, results=results,
                             pytest_args=args.pytest_args)
    if measured.floor is None or measured.path is None:
        print(f"cellbench noise: no floor measured ({_duration(measured.seconds)}): {measured.problem}",
              file=sys.stderr)
        return measured.exit_code or 1
    print("\n".join(describe(measured.floor)))
    print(f"written to {measured.path} in {_duration(measured.seconds)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
