"""One `RowEdit` planned on a file's text: replace this hardware's row, or append a new one.

An edit REPLACES the row whose Source carries this hardware's tag or APPENDS a row to the
section's table. Unknown `cells` columns, a missing Source column, rows whose cell count differs
from the header, ambiguous matches and appends to one of several same-named sections all fail
with the reason; an appended row never copies metric values from another hardware's row
(`EMPTY_CELL`). An edit must leave a row that the same locator finds again, at the same line,
holding the new values; otherwise the next run would append a duplicate or edit a different row.
Planning only computes text: `bench.eval.tables.write` is the only writer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bench.eval.tables.locate import Location, Locator, hardware_tag, locate
from bench.eval.tables.parse import ParsedTables, Row, Table, escape, parse_tables, raw_cells, split_lines, strip_ending

SOURCE_COLUMN = "Source"
EMPTY_CELL = "–"  # what an appended row shows in a column nobody measured on this hardware


class _Refusal(Exception):
    """An edit that cannot be made; the message is the outcome's reason."""


@dataclass(frozen=True)
class RowEdit:
    row_id: str
    locate: Locator
    hardware: str
    source_prefix: str  # "PR #316", "main 1a2b3c4"
    cells: dict[str, str]  # column header -> already formatted text
    source_note: str = ""  # text after the tag, e.g. "(n=3 mean)"
    new_row: dict[str, str] | None = None  # values for an appended row (identity columns)

    @property
    def source(self) -> str:
        tag = hardware_tag(self.hardware, self.locate.source_workload)
        return f"{self.source_prefix} {tag}" + (f" {self.source_note}" if self.source_note else "")


Status = Literal["ok", "fail"]
Action = Literal["replaced", "appended"]


@dataclass(frozen=True)
class EditOutcome:
    row_id: str
    status: Status
    action: Action | None
    reason: str
    line: int | None  # 1-based line of the replaced or new row, in the text after all edits
    before: str | None
    after: str | None

    @classmethod
    def failed(cls, row_id: str, reason: str) -> EditOutcome:
        return cls(row_id, "fail", None, reason, None, None, None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, for run-state files."""
        return dataclasses.asdict(self)


def _fit(value: str, width: int) -> str:
    """One cell: keep the old width when the text fits, else let the row grow."""
    text = escape(value)
    return (" " + text).ljust(width) if len(text) + 2 <= width else f" {text} "


def _rebuild(line: str, new: dict[int, str]) -> str:
    """`line` with the cells at the given indexes replaced; every other byte kept."""
    cells = raw_cells(line) or []
    indent = line[: len(line) - len(line.lstrip())]
    trailing = line[len(line.rstrip()) :]
    out = [_fit(new[i], len(c)) if i in new else c for i, c in enumerate(cells)]
    return indent + "|" + "|".join(out) + "|" + trailing


def _check_inputs(edit: RowEdit) -> None:
    loc = edit.locate
    for name, value in (
        ("section_substring", loc.section_substring),
        ("config_substring", loc.config_substring),
    ):
        if not value:
            raise _Refusal(f"locate.{name} is empty; it would match every row")
    if not edit.hardware or not edit.source_prefix:
        raise _Refusal("hardware and source_prefix are required for the Source tag")
    texts = [edit.source, *edit.cells.values(), *(edit.new_row or {}).values()]
    if any("\n" in t or "\r" in t for t in texts):
        raise _Refusal("a new cell text contains a line break, which would split the row")


def _column_index(table: Table, name: str, what: str) -> int:
    if name not in table.headers:
        raise _Refusal(
            f"{what} {name!r} is not a column of the table at line {table.header_line}; columns: {list(table.headers)}"
        )
    if table.headers.count(name) > 1:
        raise _Refusal(f"column {name!r} appears twice in the table at line {table.header_line}")
    return table.headers.index(name)


def _targets(table: Table, edit: RowEdit) -> dict[int, str]:
    """Column index -> new text, for the Source column and every `cells` column."""
    if SOURCE_COLUMN not in table.headers:
        raise _Refusal(
            f"the table at line {table.header_line} has no {SOURCE_COLUMN!r} column: {list(table.headers)}"
        )
    if SOURCE_COLUMN in edit.cells:
        raise _Refusal(f"cells may not set {SOURCE_COLUMN!r}; it is built from source_prefix and the tag")
    new = {_column_index(table, k, "cells key"): v for k, v in edit.cells.items()}
    new[_column_index(table, SOURCE_COLUMN, "column")] = edit.source
    return new


def _check_escapes(parsed: ParsedTables, values: Sequence[str]) -> None:
    """A backslash in a plain (non-raw) docstring is a Python escape: refuse to write one."""
    if not parsed.docstring_raw and any("\\" in escape(v) for v in values):
        raise _Refusal(
            "a new cell text needs a backslash (a `|` is written as `\\|`) but the module docstring is not"
            ' a raw string (r"""..."""); it would become a Python escape sequence'
        )


def _unwidth(row: Row, table: Table) -> _Refusal:
    return _Refusal(
        f"row at line {row.line} has {len(row.cells)} cells but its header has {len(table.headers)};"
        f" fix the row by hand: {row.text.strip()}"
    )


def _replace(lines: list[str], parsed: ParsedTables, table: Table, row: Row, edit: RowEdit) -> int:
    if not row.width_ok:
        raise _unwidth(row, table)
    new = _targets(table, edit)
    _check_escapes(parsed, list(new.values()))
    ending = lines[row.line - 1][len(row.text) :]
    lines[row.line - 1] = _rebuild(row.text, new) + ending
    return row.line


def _template(location: Location, table: Table) -> Row | None:
    rows = [r for t, r in location.candidates if t is table]
    return rows[-1] if rows else None


def _append_values(
    table: Table, edit: RowEdit, template: Row | None, targets: dict[int, str]
) -> dict[int, str]:
    """Column index -> text for a new row: targets, then new_row, then identity columns, then `–`."""
    extra = {_column_index(table, k, "new_row key"): v for k, v in (edit.new_row or {}).items()}
    clash = sorted(table.headers[i] for i in extra.keys() & targets.keys())
    if clash:
        raise _Refusal(f"new_row sets {clash}, which cells or the Source tag already set")
    first_named = min(targets)
    values = {}
    for i in range(len(table.headers)):
        identity = template.cells[i] if template is not None and i < first_named else EMPTY_CELL
        values[i] = targets.get(i, extra.get(i, identity))
    return values


def _append(lines: list[str], parsed: ParsedTables, location: Location, edit: RowEdit) -> int:
    if len(location.tables) > 1:
        found = [f"line {t.header_line}: {t.section_line}" for t in location.tables]
        raise _Refusal(
            f"{len(found)} official tables have a section line containing "
            f"{edit.locate.section_substring!r}; cannot choose where to append: {found}"
        )
    table = location.tables[0]
    targets = _targets(table, edit)
    template = _template(location, table)
    if template is None and edit.new_row is None:
        raise _Refusal(
            f"no row of the table at line {table.header_line} contains {edit.locate.config_substring!r} to copy"
            f" Model/Config from, and no new_row was given; add new_row to append the first {location.tag} row"
        )
    if template is not None and not template.width_ok:
        raise _unwidth(template, table)
    values = _append_values(table, edit, template, targets)
    _check_escapes(parsed, list(values.values()))
    after = table.last_line
    ending = lines[after - 1][len(strip_ending(lines[after - 1])) :] or "\n"
    lines.insert(after, _rebuild(table.header_text, values) + ending)
    return after + 1


def _check_relocates(text: str, edit: RowEdit, line: int) -> None:
    """The edited row must be the one row the same locator finds next time, with the new values."""
    parsed = parse_tables(text)
    if parsed.error:
        raise _Refusal(f"after this edit the file {parsed.error}")
    matched = locate(parsed, edit.locate, edit.hardware).matched
    if [r.line for _, r in matched] != [line]:
        found = [f"line {r.line}" for _, r in matched]
        raise _Refusal(
            f"after this edit the locator would find {found or 'nothing'} instead of line {line};"
            " the locator does not identify the edited row (is config_substring in an edited column?)"
        )
    table, row = matched[0]
    wanted = {
        table.headers.index(k): v.strip() for k, v in {**edit.cells, SOURCE_COLUMN: edit.source}.items()
    }
    if any(row.cells[i] != v for i, v in wanted.items()):
        raise _Refusal(f"after this edit line {line} does not read back the new values: {row.text.strip()}")


def _plan(text: str, edit: RowEdit) -> tuple[str, EditOutcome]:
    _check_inputs(edit)
    parsed = parse_tables(text)
    location = locate(parsed, edit.locate, edit.hardware)
    if location.problem:
        raise _Refusal(location.problem)
    if len(location.matched) > 1:
        rows = "; ".join(f"line {r.line}: {r.text.strip()}" for _, r in location.matched)
        raise _Refusal(
            f"{len(location.matched)} rows match {edit.locate} with {location.tag}; narrow the locator: {rows}"
        )
    lines = split_lines(text)
    action: Action = "replaced" if location.matched else "appended"
    if location.matched:
        table, row = location.matched[0]
        line, before = _replace(lines, parsed, table, row, edit), row.text
    else:
        line, before = _append(lines, parsed, location, edit), None
    new_text = "".join(lines)
    _check_relocates(new_text, edit, line)
    after = strip_ending(lines[line - 1])
    reason = f"{action} line {line}" + (" (values unchanged)" if after == before else "")
    return new_text, EditOutcome(edit.row_id, "ok", action, reason, line, before, after)


def plan_edit(text: str, edit: RowEdit) -> tuple[str, EditOutcome]:
    """The text after one edit, and what happened; on failure the text comes back unchanged."""
    try:
        return _plan(text, edit)
    except _Refusal as exc:
        return text, EditOutcome.failed(edit.row_id, str(exc))
