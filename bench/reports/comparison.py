"""One split directory's result files -> comparison.json: which result stands for each framework.

The choice is bench.core.result.store's: only results of this directory's machine, model and split
compete, and the newest is the one with the latest run id (a UTC timestamp) and then
`finished_at`, never the file's mtime. Beside the chosen results the comparison lists how their
methodologies differ, which changed suspiciously against the previous run of their cell, and
every file left out with its reason, so a reader can check the provenance without a shell.
A result converted from another benchmark's file is named in `imported` with its label and the
original file (bench.core.result.imported), so no reader takes its numbers for cellbench's.

Each chosen result has its `standing` (bench.reports.standing): `ok`, or the marks (its verdict,
interrupted, imported, not from this run) that keep its figures out of every order; `frameworks`
lists the ok ones first. `this_run` is the run the comparison is about: the one given (a session's
own), else the run of the newest measured result here. With `other_runs="leave-out"` a result of
another run is not chosen but listed in `left_out` with its run, its file and why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, TypeGuard

from bench.base.clock import now_iso
from bench.base.dotted import json_path_or
from bench.core.result import imported
from bench.core.result.files import as_result, write_json_atomic
from bench.core.result.model import IgnoredFile, Result, RunConfig
from bench.core.result.store import (
    COMPARISON_FILE,
    LoadedResult,
    Selection,
    load_results,
    select_latest,
    split_place,
    suspicious,
)
from bench.reports.standing import (
    NOT_THIS_RUN,
    ChosenRun,
    Standing,
    StandingBlock,
    ThisRunIds,
    order,
    run_ids,
    run_text,
    runs_text,
    standing_of,
    this_run_of,
)

COMPARISON_VERSION = 1
OTHER_RUNS = ("mark", "leave-out")  # what a comparison does with a result of another run than this one


class Provenance(TypedDict):
    run_id: str
    file: str
    machine: str
    finished_at: str
    model_path: str | None


class ThisRun(TypedDict, total=False):
    run_id: str | None  # None: no measured result here
    chosen_by: str  # "this pytest session's", "the weekly run's", "given" (--run-id) or "the newest result here"
    with_runs: list[str]  # the run's other sessions (a weekly run's retries): their results are this run's too


class LeftOut(TypedDict):
    framework: str
    run_id: str
    file: str
    finished_at: str
    reason: str


class Comparison(TypedDict):
    """comparison.json: the result chosen for each framework of one split directory."""

    schema_version: int
    model: str
    machine: str
    split: str
    generated_at: str
    frameworks: list[str]
    results: dict[str, Result]
    provenance: dict[str, Provenance]
    methodology_warnings: list[str]
    suspicious: dict[str, str]
    imported: dict[str, str]  # framework -> `imported (<tool>) from <original file>`, for imported results
    ignored: list[IgnoredFile]
    this_run: ThisRun
    standing: dict[str, StandingBlock]  # framework -> Standing.to_json(): its flag and marks
    left_out: list[LeftOut]  # results of other runs, with other_runs="leave-out"

# The run_config keys that change what a number means; request_timeout_s only bounds a failure.
METHODOLOGY_KEYS = (
    "levels",
    "requests_per_level",
    "warmup",
    "levels_share_server",
    "request_extras",
    "prompts.source",
    "prompts.count",
    "prompts.tools_param",
    "unique_prompts",  # cold prompts against ones a cache may serve
    "cpu_affinity.client",  # a pinned client or server against an unpinned one
    "cpu_affinity.server",
    "load.mode",  # open-loop rate levels against closed-loop concurrency levels: never the same thing
    "load.burstiness",
    "load.max_concurrency",
    "load.seed",
    "load.trace.sha256",  # another trace, or the same name with other content
    "load.ramp_up",
    "load.duration_s",  # a level cut by time against one of a count
)
# What an absent key means, where it is not "missing": a result without run_config.load ran closed loop.
ABSENT = {"load.mode": "closed"}


def _config_value(run_config: Mapping[str, Any], dotted: str) -> Any:
    return json_path_or(run_config, dotted, ABSENT.get(dotted, "missing"))


def setting_differences(run_configs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """{key: {framework: its value, as JSON}} for each of METHODOLOGY_KEYS whose value differs
    across `run_configs` (framework -> its result's run_config, a RunConfig or the same JSON as a
    merged table or a report row carries it, or the part of one `settings_of` keeps), in
    METHODOLOGY_KEYS' order."""
    differing = {}
    for key in METHODOLOGY_KEYS:
        values = {fw: json.dumps(_config_value(config, key), sort_keys=True)
                  for fw, config in sorted(run_configs.items())}
        if len(set(values.values())) > 1:
            differing[key] = values
    return differing


def settings_of(run_config: RunConfig) -> dict[str, Any]:
    """The part of `run_config` that METHODOLOGY_KEYS name, nested as there (an absent key as the
    value it reads as): `setting_differences` of these says what it says of the whole run_configs,
    and they are small enough to travel with an HTML row (bench.reports.review.columns)."""
    kept: dict[str, Any] = {}
    for dotted in METHODOLOGY_KEYS:
        *parents, last = dotted.split(".")
        into = kept
        for part in parents:
            into = into.setdefault(part, {})
        into[last] = _config_value(run_config, dotted)
    return kept


def methodology_differences(selection: Selection) -> list[str]:
    """The run_config keys that differ across the chosen results, one line each.

    Numbers measured differently (another level set, a shared server warming the prefix cache,
    other prompts) are not comparable, and a table alone would not show it."""
    configs = {fw: r.data["run_config"] for fw, r in selection.chosen.items()}
    return [f"{key}: " + ", ".join(f"{fw}={v}" for fw, v in values.items())
            for key, values in setting_differences(configs).items()]


def _provenance(result: LoadedResult) -> Provenance:
    return {
        "run_id": result.run_id,
        "file": result.path.name,
        "machine": result.machine,
        "finished_at": result.finished_at,
        "model_path": result.data["model"]["path"],
    }


def build_comparison(split_dir: Path, *, machine: str | None = None, this_run: ThisRunIds = None,
                     other_runs: str = "mark") -> Comparison:
    """The comparison of `split_dir` (`<results>/<model>/<machine>/<split>/`) for `machine`, about
    run `this_run` (default: the run of the newest measured result here).

    The model, machine and split come from where the folder sits (bench.core.result.store.split_place:
    `<model>/<machine>/<split>/`, or SiliconBench's legacy `<model>/<split>/`), `machine` when
    given; a result that disagrees with them is ignored with its reason. A result of another run is chosen and marked
    (`other_runs="mark"`) or listed in `left_out` ("leave-out")."""
    if other_runs not in OTHER_RUNS:
        raise ValueError(f"other_runs must be one of {', '.join(OTHER_RUNS)}, not {other_runs!r}")
    place = split_place(split_dir)
    split_dir, model, split, machine = place.dir, place.model, split_dir.name, machine or place.machine
    loaded, problems = load_results(split_dir)
    selection = select_latest(loaded, machine=machine, model=model, split=split)
    given = run_ids(this_run)
    runs = given or run_ids(this_run_of(r.data for r in selection.chosen.values()))
    run = runs_text(runs)
    standings = {fw: standing_of(r.data, runs) for fw, r in selection.chosen.items()}
    left_out: list[LeftOut] = []
    if other_runs == "leave-out":
        for fw in sorted(selection.chosen):
            if any(m.kind == NOT_THIS_RUN for m in standings[fw].marks):
                r = selection.chosen.pop(fw)
                left_out.append({"framework": fw, "run_id": r.run_id, "file": r.path.name, "finished_at": r.finished_at,
                                 "reason": f"{run_text(r.run_id, r.finished_at)}; this run is {run}"})
    frameworks = order(sorted(selection.chosen), standings)
    flagged = {
        fw: reason
        for fw in frameworks
        if fw in selection.previous
        and (reason := suspicious(selection.chosen[fw].data, selection.previous[fw].data))
    }
    return {
        "schema_version": COMPARISON_VERSION,
        "model": model,
        "machine": machine,
        "split": split,
        "generated_at": now_iso(),
        "frameworks": frameworks,
        "results": {fw: selection.chosen[fw].data for fw in frameworks},
        "provenance": {fw: _provenance(selection.chosen[fw]) for fw in frameworks},
        "methodology_warnings": methodology_differences(selection),
        "suspicious": flagged,
        "imported": {fw: f"{label} from {source['file']}" for fw in frameworks
                     if (label := imported.label(chosen := selection.chosen[fw].data))
                     and (source := imported.source(chosen))},
        "ignored": [i.to_json() for i in sorted([*problems, *selection.ignored], key=lambda i: i.file)],
        "this_run": {"run_id": runs[0] if runs else None, "chosen_by": chosen_by(this_run, given),
                     **({"with_runs": list(runs[1:])} if len(runs) > 1 else {})},
        "standing": {fw: standings[fw].to_json() for fw in frameworks},
        "left_out": left_out,
    }


def chosen_by(this_run: ThisRunIds, given: tuple[str, ...]) -> str:
    """Who chose the run a comparison is about, as comparison.json's `this_run.chosen_by` says it."""
    if isinstance(this_run, ChosenRun):
        return this_run.by
    return "given" if given else "the newest result here"


def standings(comparison: Comparison) -> dict[str, Standing]:
    """Each framework's standing, as the comparison recorded it (a comparison without one: its
    verdict's, from the result alone)."""
    recorded = comparison.get("standing") or {}
    return {fw: Standing.from_json(recorded[fw]) if fw in recorded else standing_of(comparison["results"][fw])
            for fw in comparison["frameworks"]}


def write_comparison(split_dir: Path, *, machine: str | None = None, this_run: ThisRunIds = None,
                     other_runs: str = "mark") -> Path:
    """Build and write `<split_dir>/comparison.json` atomically; returns its path."""
    path = Path(split_dir) / COMPARISON_FILE
    write_json_atomic(path, build_comparison(split_dir, machine=machine, this_run=this_run, other_runs=other_runs))
    return path


def read_comparison(path: Path) -> Comparison:
    """comparison.json as written by `write_comparison`, each result in it read back as a Result
    (validated against the result schema: raises bench.core.result.files.NotAResult otherwise).
    Raises ValueError for a file without exactly a comparison's keys."""
    data = json.loads(Path(path).read_text())
    data["results"] = {fw: as_result(result) for fw, result in data["results"].items()}
    if not _is_comparison(data):
        known = Comparison.__required_keys__
        raise ValueError(f"{path} is not a comparison: missing {sorted(known - set(data))}, "
                         f"unknown {sorted(set(data) - known)}")
    return data


def _is_comparison(data: dict[str, Any]) -> TypeGuard[Comparison]:
    """Whether `data` has every key of a Comparison and no other (its results were read as results)."""
    return set(data) == Comparison.__required_keys__
