"""One `RowEdit` planned on a file's text: replace this hardware's row, or append a new one.

An edit REPLACES the row whose Source carries this hardware's tag or APPENDS a row to the
section's table. Unknown `cells` columns, a missing Source column, rows whose cell count differs
from the header, ambiguous matches, a config substring that spans two Configs (see `locate`)
and an append to one of several same-named sections, unless only one of them holds the Config,
all fail with the reason; an appended row never copies metric values from another hardware's row
(`EMPTY_CELL`). An edit must leave a row that the same locator finds again, at the same line,
holding the new values; otherwise the next run would append a duplicate or edit a different row.
Planning only computes text: `bench.eval.tables.write` is the only writer.

* With a `model` hint only that model's rows are candidates, its name or an alias matching the
  Model cell whole (see `locate`): an append copies identity cells from this model's row, or
  refuses naming the other models' rows it saw.
* An appended row takes its cell widths from the row it copies, else the table's last data row,
  else the separator: headers are often narrower than the data below them.
* The Source carries at most one `n=K mean` marker (`means`): a `(n=K mean)` note already in the tag is
  dropped, and conflicting markers are refused. The edit is made, with a `warning`, when it
  overwrites an n=M mean row with values from `mean_of` != M rounds, or when the new Source
  claims an n=M mean that `mean_of` contradicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bench.eval.tables.locate import MODEL_COLUMN, Location, Locator, hardware_tag, locate
from bench.eval.tables.means import mean_warning, means_claimed, without_means_in
from bench.eval.tables.parse import (
    ParsedTables,
    Table,
    TableRow,
    escape,
    parse_tables,
    raw_cells,
    split_lines,
    strip_ending,
)

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
    model: str | None = None  # "qwen3-omni": only its rows (a whole-name match) are candidates
    aliases: tuple[str, ...] = ()  # other names its rows go by ("Qwen/Qwen3-Omni-30B-A3B-Instruct", "Qwen3-Omni")
    mean_of: int = 1  # how many rounds the new values average

    @property
    def source(self) -> str:
        tag = hardware_tag(self.hardware, self.locate.source_workload)
        note = without_means_in(self.source_note, tag)
        return f"{self.source_prefix} {tag}" + (f" {note}" if note else "")


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
    warning: str = ""  # the edit was made, but a caller should show this (e.g. a mean overwritten)

    @classmethod
    def failed(cls, row_id: str, reason: str) -> EditOutcome:
        return cls(row_id, "fail", None, reason, None, None, None)

    def at_line(self, line: int) -> EditOutcome:
        """This outcome after its row moved to `line`, the reason saying the same line."""
        if self.action is None:
            return dataclasses.replace(self, line=line)
        return dataclasses.replace(self, line=line, reason=_done_reason(self.action, line, self.before, self.after))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, for run-state files."""
        return dataclasses.asdict(self)


def _done_reason(action: Action, line: int, before: str | None, after: str | None) -> str:
    unchanged = before is not None and before == after
    return f"{action} line {line}" + (" (values unchanged)" if unchanged else "")


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
    if edit.mean_of < 1:
        raise _Refusal(f"mean_of is the number of rounds the values average; it must be at least 1, not {edit.mean_of}")
    means = means_claimed(edit.source)
    if len(means) > 1:
        raise _Refusal(
            f"the Source would claim {len(means)} means ({', '.join(f'n={k} mean' for k in means)}): {edit.source!r};"
            " say the mean once, in source_workload or in source_note"
        )
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


def _unwidth(row: TableRow, table: Table) -> _Refusal:
    return _Refusal(
        f"row at line {row.line} has {len(row.cells)} cells but its header has {len(table.headers)};"
        f" fix the row by hand: {row.text.strip()}"
    )


def _replace(lines: list[str], parsed: ParsedTables, table: Table, row: TableRow, edit: RowEdit) -> int:
    if not row.width_ok:
        raise _unwidth(row, table)
    new = _targets(table, edit)
    _check_escapes(parsed, list(new.values()))
    ending = lines[row.line - 1][len(row.text) :]
    lines[row.line - 1] = _rebuild(row.text, new) + ending
    return row.line


def _template(location: Location, table: Table) -> TableRow | None:
    rows = [r for t, r in location.candidates if t is table]
    return rows[-1] if rows else None


def _other_models(location: Location, table: Table) -> list[str]:
    """The Model cells of rows that hold the config substring but belong to another model."""
    if MODEL_COLUMN not in table.headers:
        return []
    index = table.headers.index(MODEL_COLUMN)
    return list(dict.fromkeys(r.cells[index] for t, r in location.other_models if t is table))


def _no_template(location: Location, table: Table, edit: RowEdit) -> _Refusal:
    config, others = edit.locate.config_substring, _other_models(location, table)
    if others:
        return _Refusal(
            f"no {edit.model!r} row of the table at line {table.header_line} contains {config!r} to copy"
            f" Model/Config from; only rows of other models do: {others}. Identity cells are never copied"
            f" from another model: add new_row to append the first {edit.model} {location.tag} row, or, if"
            f" one of them is this model under another name, declare it in the config (model_aliases:"
            f" {{{edit.model}: [{others[0]}]}})"
        )
    return _Refusal(
        f"no row of the table at line {table.header_line} contains {config!r} to copy"
        f" Model/Config from, and no new_row was given; add new_row to append the first {location.tag} row"
    )


def _shape(table: Table, template: TableRow | None, separator: str) -> str:
    """The line an appended row takes its indent and cell widths from; the header only as a last resort."""
    last = table.rows[-1].text if table.rows else None
    width = len(table.headers)
    shapes = [template.text if template else None, last, separator, table.header_text]
    return next(s for s in shapes if s is not None and len(raw_cells(s) or []) == width)


def _append_values(
    table: Table, edit: RowEdit, template: TableRow | None, targets: dict[int, str]
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


def _append_table(location: Location, edit: RowEdit) -> Table:
    """The table a new row goes to: the section's only one, else the only one holding the Config."""
    if len(location.tables) == 1:
        return location.tables[0]
    holding = [t for t in location.tables if any(c is t for c, _ in location.candidates)]
    if len(holding) == 1:
        return holding[0]
    found = [f"line {t.header_line}: {t.section_line}" for t in location.tables]
    which = f"{len(holding)} of them hold rows containing" if holding else "none of them holds a row containing"
    raise _Refusal(
        f"{len(found)} official tables have a section line containing {edit.locate.section_substring!r} and"
        f" {which} {edit.locate.config_substring!r}; cannot choose where to append: {found}"
    )


def _append(lines: list[str], parsed: ParsedTables, location: Location, edit: RowEdit) -> int:
    table = _append_table(location, edit)
    targets = _targets(table, edit)
    template = _template(location, table)
    if template is None and edit.new_row is None:
        raise _no_template(location, table, edit)
    if template is not None and not template.width_ok:
        raise _unwidth(template, table)
    values = _append_values(table, edit, template, targets)
    _check_escapes(parsed, list(values.values()))
    after = table.last_line
    ending = lines[after - 1][len(strip_ending(lines[after - 1])) :] or "\n"
    shape = _shape(table, template, strip_ending(lines[table.header_line]))
    lines.insert(after, _rebuild(shape, values) + ending)
    return after + 1


def _check_relocates(text: str, edit: RowEdit, line: int) -> None:
    """The edited row must be the one row the same locator finds next time, with the new values."""
    parsed = parse_tables(text)
    if parsed.error:
        raise _Refusal(f"after this edit the file {parsed.error}")
    matched = locate(parsed, edit.locate, edit.hardware, model=edit.model, aliases=edit.aliases).matched
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
    location = locate(parsed, edit.locate, edit.hardware, model=edit.model, aliases=edit.aliases)
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
    reason = _done_reason(action, line, before, after)
    warning = mean_warning(edit.mean_of, edit.source, before)
    return new_text, EditOutcome(edit.row_id, "ok", action, reason, line, before, after, warning)


def plan_edit(text: str, edit: RowEdit) -> tuple[str, EditOutcome]:
    """The text after one edit, and what happened; on failure the text comes back unchanged."""
    try:
        return _plan(text, edit)
    except _Refusal as exc:
        return text, EditOutcome.failed(edit.row_id, str(exc))
