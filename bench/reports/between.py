"""Uncertainty and decisions in the reports, worded for a reader who must decide.

Every judgement is bench.core.metrics.stats.change's: one figure of one level on two sides, regression
or improvement only where the 95% interval of their ratio leaves zero out, else "no detectable
change" (with the smallest change the data could have seen) or "cannot tell" (with why). This
module words them where the reports show them:

- REPORT.md's level tables: a rate with its interval (`rate_cell`), and under each table what
  its intervals rest on (`interval_line`): within-run only (one round), or across K rounds.
- REPORT.md's *Between frameworks* section (`between_section`): per level, for output tok/s and
  TTFT p50, the frameworks best first and each neighbouring pair judged: "A is faster than B by
  12.0% [5.0%, 19.0%]" only where decided; a pair that ran with different request settings
  (comparison.setting_differences) is marked not like with like.
- A cell against its previous run (`against_previous`, for the journal and the HTML review): per
  level both runs have, every figure judged, the regressions listed with `Change.text()`.
- The merged report's *Between machines* (bench.reports.merged.machines) judges with the same words.

The HTML review words the same decisions at its rows (bench.reports.review.marks).

Each framework's figures are judged with the machine's noise floor of that cell where one was
measured (`Floors`, bench.core.noise: the floors beside the split's results), and the section says
which floor each used and when it was measured. A result written before intervals has none, and
its figures are "cannot tell: no interval in this result".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.core.figures import block_of
from bench.core.figures.memory import MIB
from bench.core.level_run import LevelKey, level_key, level_label
from bench.core.metrics.stats import change
from bench.core.metrics.stats.change import Change, Estimate, Figure
from bench.core.metrics.stats.intervals import bound_text, has_intervals
from bench.core.noise import Floors
from bench.core.result import imported
from bench.core.result.files import NotAResult, read_result
from bench.core.result.model import Result
from bench.core.result.store import LoadedResult, previous_of
from bench.reports.comparison import Comparison, setting_differences, standings
from bench.reports.lenses import FidelityView, fidelity_words, memory_words, side_by_side
from bench.reports.standing import shown, standing_of

INTERVALS_NOTE = ("A percentile's [low, high] is its distribution-free 95% confidence interval, two of the level's "
                  "own values; (n<N) marks one that the level's n values are too few to bound: that takes N or "
                  "more (docs/metrics.md, How sure a percentile is).")
WITHIN_RUN = "within-run only: a second run on this host can differ by more"
NO_INTERVAL = "no interval in this result (written before intervals)"
NEITHER = "neither has an interval (written before intervals)"
TPS_KEY = "output_throughput_tps"
SHOWN = (TPS_KEY, "ttft_ms.p50")  # the figures of *Between frameworks*
FIGURES = {f.key: f for f in change.FIGURES}
PREVIOUS = "vs_previous"  # the journal entry's evidence key: `against_previous` of the cell


# ------------------------------------------------------------------ intervals in the level tables


def rate_cell(level: Mapping[str, Any], key: str, digits: int) -> str:
    """A rate ("output_throughput_tps") as its row shows it, with its `throughput_ci95` where the
    level has one: "1963.4 [1801.2, 2120.0]"; "N/A" where the level has no value."""
    value = level.get(key)
    if not isinstance(value, (int, float)):
        return "N/A"
    return f"{value:.{digits}f}" + bound_text({"ci95": level.get("throughput_ci95")}, key, f".{digits}f")


RATES_NOTE = ("A rate's [low, high] (output tok/s, req/s) is its 95% interval: across the rounds where a level ran "
              "two or more (its value then their median), else from time windows within the level, which cannot see "
              "what changes from one run to the next (docs/metrics.md).")


def interval_notes(comparison: Comparison) -> list[str]:
    """The notes below the level tables: what a percentile's and a rate's [low, high] are, where any level has one."""
    levels = [lv for r in comparison["results"].values() for lv in r["levels"]]
    return ([INTERVALS_NOTE, ""] if has_intervals(levels) else []) + \
        ([RATES_NOTE, ""] if any("throughput_ci95" in lv for lv in levels) else [])


def rate_interval(level: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The level's `throughput_ci95` of the rate `key` ({"low", "high"}); None where it has none."""
    found = (level.get("throughput_ci95") or {}).get(key)
    return found if isinstance(found, Mapping) else None


def interval_basis(level: Mapping[str, Any]) -> str:
    """What the level's intervals rest on, in words."""
    rounds = (level.get("uncertainty") or {}).get("rounds") or len(level.get("rounds") or ())
    if isinstance(rounds, int) and rounds >= 2:
        return f"median of {rounds} rounds; interval across rounds"
    if "throughput_ci95" in level or has_intervals([level]):
        return WITHIN_RUN
    return NO_INTERVAL


def interval_line(levels: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The line under a level table (framework -> its level there): "Intervals: within-run only:
    ...", or per framework where the columns differ."""
    if not levels:
        return []
    bases = {fw: interval_basis(lv) for fw, lv in levels.items()}
    if len(set(bases.values())) == 1:
        return [f"Intervals: {next(iter(bases.values()))}.", ""]
    return ["Intervals: " + "; ".join(f"{fw}: {basis}" for fw, basis in bases.items()) + ".", ""]


# ------------------------------------------------------------------ judging


def estimate_of(result: Result, level: Mapping[str, Any], figure: Figure, floors: Floors | None) -> Estimate:
    if not imported.comparable(result, figure.key):
        return Estimate(change.value(level, figure), None, float("inf"), "",
                        f"its {figure.label} is {imported.label(result)}'s, derived differently")
    return change.estimate(level, figure, floors.spreads(result, level).get(figure.key) if floors else None)


def judge(figure: Figure, old: Estimate, new: Estimate) -> Change:
    """change.judge, and "cannot tell" where its arithmetic fails (a report is never lost to it)."""
    try:
        return change.judge(figure, old, new)
    except (OverflowError, ValueError, ZeroDivisionError) as exc:
        return Change(figure, old.value, new.value, "cannot tell", why=f"its interval could not be computed ({exc})")


def _named(why: str | None, old: str, new: str) -> str:
    """judge()'s "old: ..." / "new: ..." with the sides' names."""
    text = why or "no reason given"
    for side, name in (("old: ", old), ("new: ", new)):
        if text.startswith(side):
            return f"{name}: {text.removeprefix(side)}"
    return text


def basis_words(bases: Iterable[str]) -> str:
    """The bases of a section's estimates ("within-run", "3 rounds", "noise floor of ...") in words."""
    words = {"within-run": "within-run intervals only (one round: a second run on this host can differ by more)"}
    found = sorted({part.removeprefix("old: ").removeprefix("new: ") for b in bases for part in b.split("; ") if part})
    shown = [words.get(b, f"the machine's {b}" if b.startswith("noise floor") else f"medians of {b}, intervals "
                       "across rounds" if b.endswith("rounds") else b) for b in found]
    return "; ".join(shown) or "none: no figure here has an interval"


# ------------------------------------------------------------------ REPORT.md: Between frameworks


def pair_line(figure: Figure, better: str, worse: str, c: Change, unlike: Sequence[str], both_lack: bool) -> str:
    if c.decision == "cannot tell" or c.change is None or c.low is None or c.high is None:
        why = _named(c.why, worse, better)
        line = f"{better} and {worse}: cannot tell: " + (NEITHER if why.endswith(NO_INTERVAL) and both_lack else why)
    elif c.decision == "improvement":
        sign = 1 if figure.higher_is_better else -1
        low, high = sorted((sign * c.low, sign * c.high))
        line = f"{better} is faster than {worse} by {sign * c.change:.1%} [{low:.1%}, {high:.1%}]"
    else:
        could = f" (could detect {c.detectable:.1%})" if c.detectable is not None else ""
        line = f"{better} and {worse}: no detectable difference{could}"
    if unlike:
        line += f" (not like with like: they ran with different {', '.join(unlike)})"
    return line


def level_decisions(comparison: Comparison, key: LevelKey, floors: Floors | None = None,
                    fidelity: Mapping[str, FidelityView] | None = None) -> tuple[list[str], set[str]]:
    """The lines of one level of *Between frameworks*, and the bases of their estimates: every
    framework's speed and memory side by side (bench.reports.lenses.side_by_side), then, among the results that stand
    ok (bench.reports.standing), each figure's pairs of neighbours judged; a pair called faster also
    says how the two stand on memory and fidelity. The others are named, with their marks, never judged."""
    results, marks = comparison["results"], standings(comparison)
    present = {fw: lv for fw in comparison["frameworks"] for lv in results[fw]["levels"] if level_key(lv) == key}
    if len(present) < 2:
        return [], set()
    at = {fw: lv for fw, lv in present.items() if marks[fw].ok}
    apart = shown.left_out(marks, present)
    lines = [*side_by_side(present, marks, fidelity), *([f"- Not judged: {apart}."] if apart else [])]
    if len(at) < 2:
        return [*lines, f"- Nothing judged: {'only one framework stands' if at else 'no framework stands'} ok "
                        "here."], set()
    bases: set[str] = set()
    for figure in (FIGURES[k] for k in SHOWN):
        est = {fw: estimate_of(results[fw], lv, figure, floors) for fw, lv in at.items()}
        bases |= {e.basis for e in est.values()}
        valued = sorted((fw for fw in at if est[fw].value is not None),
                        key=lambda fw: -(est[fw].value or 0.0) if figure.higher_is_better else est[fw].value or 0.0)
        missing = [fw for fw in at if est[fw].value is None]
        lines.append(f"- {figure.label}, neighbours judged" + (f"; no value: {', '.join(missing)}" if missing else ""))
        for better, worse in zip(valued, valued[1:], strict=False):
            unlike = setting_differences({fw: results[fw]["run_config"] for fw in (better, worse)})
            judged = judge(figure, est[worse], est[better])
            both = all(est[fw].why == est[worse].why and est[fw].log_se is None for fw in (better, worse))
            line = pair_line(figure, better, worse, judged, list(unlike), both)
            if " is faster than " in line:
                peaks = {fw: block_of(at[fw], "memory").get("peak_bytes") for fw in (better, worse)}
                line += memory_words(better, worse, {fw: None if p is None else p / MIB for fw, p in peaks.items()})
                line += fidelity_words(better, worse, fidelity)
            lines.append(f"  - {line}")
    return lines, bases


def between_section(comparison: Comparison, levels: Iterable[LevelKey], floors: Floors | None = None,
                    title: Callable[[LevelKey], str] = str,
                    fidelity: Mapping[str, FidelityView] | None = None) -> list[str]:
    """REPORT.md's *Between frameworks*: per level two or more frameworks ran (`title(key)` its
    heading), each figure of SHOWN best first and each neighbouring pair's decision; the basis once."""
    body, bases = [], set()
    for key in levels:
        lines, found = level_decisions(comparison, key, floors, fidelity)
        if lines:
            body += [f"### {title(key)}", "", *lines, ""]
            bases |= found
    if not body:
        return []
    return ["## Between frameworks", "",
            "Per level, every framework's speed, memory and fidelity side by side, listed by name, not by any "
            "figure; a result that does not stand ok (verdict ok or fixed, from this run) is listed last, marked, "
            "and never judged. Under the table, the frameworks that stand ok are judged in pairs of neighbours on "
            "each figure by the 95% interval of the ratio of their figures: \"faster\" only where that interval leaves "
            "no doubt of the direction, and then with how the two stand on memory and fidelity; else no detectable "
            "difference (with the smallest difference these figures could have shown) or cannot tell "
            f"(docs/comparisons.md). Basis: {basis_words(bases)}.",
            *([f"Noise floors: {floors.said(list(comparison['frameworks']))}."] if floors is not None else []),
            "", *body]


# ------------------------------------------------------------------ a cell against its previous run


def compare_results(old: Result, new: Result, floors: Floors | None = None) -> list[tuple[str, Change]]:
    """(level label, change) for every figure of every level both results have, new against old."""
    by_key = {level_key(lv): lv for lv in old["levels"]}
    out = []
    for lv in new["levels"]:
        before = by_key.get(level_key(lv))
        if before is None:
            continue
        for figure in change.FIGURES:
            if change.value(before, figure) is None and change.value(lv, figure) is None:
                continue
            judged = judge(figure, estimate_of(old, before, figure, floors), estimate_of(new, lv, figure, floors))
            out.append((level_label(lv), judged))
    return out


def against_previous(result_path: str | Path | None) -> dict[str, Any] | None:
    """The cell's result at `result_path` against the previous result of its cell (chosen as
    comparison.json chooses: bench.core.result.store.previous_of), as plain JSON-able data: the previous
    run id and file, the settings that differ, the regressions' texts, the decisions' counts and
    their bases (the machine's floor of the cell, beside its results, where one was measured).
    Where either side does not stand ok (its verdict, interrupted, imported: bench.reports.standing)
    nothing is judged and `not_judged` says why. None when there is no previous result, or a file
    cannot be read."""
    if not result_path:
        return None
    try:
        current = LoadedResult(Path(result_path), read_result(Path(result_path)))
        previous = previous_of(current)
    except (OSError, ValueError, NotAResult):
        return None
    if previous is None:
        return None
    unlike = setting_differences({"previous": previous.data["run_config"], "this": current.data["run_config"]})
    apart = [f"{side}: {s.text()}" for side, s in (("this run", standing_of(current.data)),
                                                       (f"run {previous.run_id}", standing_of(previous.data)))
             if not s.ok]
    if apart:  # a result that does not stand ok is never judged faster or slower (bench.reports.standing)
        return {"run_id": previous.run_id, "file": previous.path.name, "unlike": list(unlike), "regressions": [],
                "counts": dict.fromkeys(("regression", "improvement", "no detectable change", "cannot tell"), 0),
                "basis": "", "not_judged": "; ".join(apart)}
    changes = compare_results(previous.data, current.data, Floors(Path(result_path).parent))
    counts = {d: sum(c.decision == d for _, c in changes)
              for d in ("regression", "improvement", "no detectable change", "cannot tell")}
    return {"run_id": previous.run_id, "file": previous.path.name, "unlike": list(unlike), "counts": counts,
            "regressions": [f"{at}: {c.figure.label}: {c.text()}" for at, c in changes if c.decision == "regression"],
            "basis": basis_words(c.basis for _, c in changes)}


def previous_line(found: Mapping[str, Any]) -> str:
    """"against run X: 1 regression, 2 improvements, 5 no detectable change, 3 cannot tell (basis: ...)",
    or "against run X: not judged: run X: degraded: ..." where a side does not stand ok."""
    if found.get("not_judged"):
        return f"against run {found['run_id']}: not judged: {found['not_judged']}"
    counts = found["counts"]
    parts = [f"{counts['regression']} regression{'' if counts['regression'] == 1 else 's'}",
             f"{counts['improvement']} improvement{'' if counts['improvement'] == 1 else 's'}",
             f"{counts['no detectable change']} no detectable change", f"{counts['cannot tell']} cannot tell"]
    unlike = f"; not like with like: the runs differ in {', '.join(found['unlike'])}" if found["unlike"] else ""
    return f"against run {found['run_id']}: {', '.join(parts)} (basis: {found['basis']}){unlike}"


def differing_cells(settings: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Cell -> the setting keys where its value is not the most common one among `settings` (cell
    -> its run_config, or the part of it comparison.settings_of keeps); a tie marks every side."""
    differing = setting_differences(settings)
    marked: dict[str, list[str]] = {}
    for key, values in differing.items():
        tally = {v: list(values.values()).count(v) for v in values.values()}
        top = max(tally.values())
        common = {v for v, n in tally.items() if n == top} if list(tally.values()).count(top) == 1 else set()
        for cell, v in values.items():
            if v not in common:
                marked.setdefault(cell, []).append(key)
    return marked
