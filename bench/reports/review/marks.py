"""What a row of the HTML review carries beside its figures, worded by bench.reports.between's
decisions: its rate interval and what that rests on, its badge and paragraph of regressions
against the cell's previous run, and the summary's marks on cells whose request settings differ
from the rest of their split."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from bench.core.metrics.stats.intervals import bound_text
from bench.reports.between import against_previous, differing_cells, previous_line


def previous_badge(data: Mapping[str, Any]) -> str:
    """The verdict cell's badge of a row (a cell's record, `CellRecord.to_json()`) whose result has a
    previous one and a regression against it: "2 regressions vs previous", the decisions and each
    regression in its tooltip; "" otherwise (the expanded row has every decision)."""
    found = against_previous(data.get("result_path"))
    if found is None or not found["counts"]["regression"]:
        return ""
    n = found["counts"]["regression"]
    tip = "; ".join([previous_line(found), *found["regressions"]])
    return (f' <span class="cellbench-annotation cellbench-previous" title="{escape(tip)}">'
            f"{n} regression{'' if n == 1 else 's'} vs previous</span>")


def previous_html(data: Mapping[str, Any]) -> str:
    """The expanded row's paragraph on the previous run: its decisions, each regression a list item."""
    found = against_previous(data.get("result_path"))
    if found is None:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in found["regressions"])
    return f"<p>{escape(previous_line(found))}</p>" + (f"<ul>{items}</ul>" if items else "")


def unlike_marks(cells: Iterable[Mapping[str, Any]]) -> dict[tuple[Any, Any], str]:
    """(framework, split) -> " (not comparable: ...)" for each summary-table cell whose request
    settings differ from the others of its split (`row["settings"]`, comparison.settings_of)."""
    by_split: dict[str, dict[str, Any]] = {}
    for c in cells:
        if (settings := (c.get("row") or {}).get("settings")) is not None:
            by_split.setdefault(str(c.get("split")), {})[str(c.get("framework"))] = settings
    return {(fw, split): f" (not comparable: other {', '.join(keys)} than the rest of its split)"
            for split, group in by_split.items() for fw, keys in differing_cells(group).items()}


def row_interval(row: Mapping[str, Any]) -> str:
    """" [low, high]" after a row's output tok/s (`row_data`'s `output_tps_ci95`), "" without one."""
    return bound_text({"ci95": {"tps": row["output_tps_ci95"]}}, "tps", ".1f") if "output_tps_ci95" in row else ""


def row_basis_badge(row: Mapping[str, Any]) -> str:
    """A badge after that interval naming what it rests on ("within-run only"), the whole of it in its tooltip."""
    basis = row.get("interval_basis")
    return "" if not basis else (f' <span class="cellbench-annotation" title="{escape(basis)}">'
                                 f'{escape(basis.split(":")[0].split(";")[0])}</span>')
