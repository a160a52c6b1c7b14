"""How a standing is shown beside a figure: a tag at the number, a legend naming what each tag
means, a label in a plot's legend, a line naming the results an order leaves out, and the HTML's
badge and sort keys. Every report writes it through these, so a mark reads the same everywhere."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from html import escape
from typing import Any

from bench.core.result import imported
from bench.reports.standing.rule import IMPORTED, NOT_THIS_RUN, Standing


def at_number(text: str, standing: Standing, blanks: Collection[str] = ()) -> str:
    """"512.3" -> "512.3 (degraded)" for a result that does not stand ok; a blank (no value, a
    level not measured) and an ok result's figure unchanged."""
    return text if standing.ok or text in blanks else f"{text} ({standing.tags})"


def label(name: str, standing: Standing) -> str:
    """A plot's legend entry or a column's name: "vllm (degraded)"; a wrong-model result names the
    model its figures are of: "vllm (wrong-model: served other)"."""
    if standing.ok:
        return name
    tags = standing.tags
    if standing.served_model is not None:
        tags = tags.replace("wrong-model", f"wrong-model: served {standing.served_model}", 1)
    return f"{name} ({tags})"


def column(name: str, result: Mapping[str, Any], standing: Standing) -> str:
    """A framework's column or legend entry in a report: `<name>, imported (<tool>)` for an imported
    result, then its other marks: "vllm (degraded)", "vllm (wrong-model: served <model>)"."""
    tool = imported.label(result)
    return label(f"{name}, {tool}" if tool else name, standing.without(IMPORTED))


def legend(standings: Mapping[str, Standing], names: Iterable[str] | None = None) -> list[str]:
    """One line per marked result among `names` (default: all): "vllm (degraded): degraded: 6/18
    requests failed ..."; [] when every one stands ok."""
    chosen = list(standings) if names is None else list(names)
    return [f"{name} ({standings[name].tags}): {standings[name].text()}" for name in chosen
            if not standings[name].ok]


def legend_note(standings: Mapping[str, Standing], names: Iterable[str] | None = None) -> list[str]:
    """The markdown lines under a table whose columns include marked results: what each mark
    means, and that those figures take no place in any order."""
    lines = legend(standings, names)
    if not lines:
        return []
    return ["Marked figures (docs/results.md, Standing): " + "; ".join(lines)
            + ". A marked figure is shown, never ordered against another.", ""]


def left_out(standings: Mapping[str, Standing], names: Iterable[str]) -> str:
    """"vllm (degraded), llamacpp (not this run)": the marked ones of `names`, as an order leaves them out."""
    return ", ".join(f"{name} ({standings[name].tags})" for name in names if not standings[name].ok)


def earlier_runs(standings: Mapping[str, Standing]) -> list[str]:
    """Per result of another run: "llamacpp: run X of 2026-12-01"."""
    return [f"{name}: {m.brief}" for name, s in standings.items() for m in s.marks if m.kind == NOT_THIS_RUN]


# ------------------------------------------------------------------ the HTML review


def badge(standing: Standing) -> str:
    """A marked figure's badge after the number in an HTML cell, the marks' text in its tooltip;
    "" for a result that stands ok."""
    if standing.ok:
        return ""
    return f' <span class="cellbench-standing" title="{escape(standing.text())}">{escape(standing.tags)}</span>'


def sort_key(key: str, standing: Standing, *, higher_is_better: bool) -> str:
    """A number cell's sort key with the ok results apart from the others: whichever way the
    column is sorted best first (descending for a rate, ascending for a latency), the ok ones
    come first and a marked figure is never sorted in among them."""
    first, last = ("1", "0") if higher_is_better else ("0", "1")
    return (first if standing.ok else last) + key
