"""Reference tables in benchmark docstrings: parse them, locate one row, rewrite it safely.

An eval benchmark file keeps its reference results as GitHub-markdown pipe tables inside its
module docstring. After a run, one `RowEdit` per result either REPLACES the row whose Source
carries this hardware's tag or APPENDS a new row to the section's table. The rules, stricter than
sglang-omni's runner on purpose (each one closes a way that runner silently wrote a wrong table):

* Only the MODULE docstring is read. Tables elsewhere (later strings, function docstrings) are
  ignored; old-format tables in `# | ... |` comments are reported by line, never edited.
* A pipe row starts and ends with an unescaped `|` and has at least two cells; `\\|` is a
  literal pipe inside a cell. A table is a header row, a separator row, then consecutive data
  rows (a pipe row that is itself followed by a separator starts the next table instead).
* The section line is the nearest non-blank line above the header (None when that is a pipe
  row). A table is Local (never edited) when the nearest marker line within `MARKER_SCAN_LINES`
  above it is a local one: it contains one of `LOCAL_MARKERS` or starts with `Local `. Local
  markers win over `OFFICIAL_MARKERS` on the same line. Pipe rows are never marker lines, so a
  Source cell saying "local v1 sweep" cannot turn the tables below it local.
* Locating is plain substring matching on the raw row, as in sglang: a trailing space in
  `config_substring` ("modalities=text ") keeps "text" from also matching "text+audio".
* Unknown `cells` columns, a missing Source column, rows whose cell count differs from the
  header, ambiguous matches and appends to one of several same-named sections all fail with the
  reason; an appended row never copies metric values from another hardware's row (`EMPTY_CELL`).
* An edit must leave a row that the same locator finds again, at the same line, holding the new
  values; otherwise the next run would append a duplicate or edit a different row.
* `apply_edits` is the only writer: under a lock, re-read, edit, verify, then replace atomically.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import hashlib
import os
import re
import stat
import tempfile
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import filelock

SOURCE_COLUMN = "Source"
EMPTY_CELL = "–"  # what an appended row shows in a column nobody measured on this hardware
MARKER_SCAN_LINES = 80
LOCAL_MARKERS = ("Local v1 Pipeline Result", "Local Speech Pipeline", "local v1 sweep")
LOCAL_PREFIX = "Local "
OFFICIAL_MARKERS = ("Reference Results",)

_SEPARATOR_CELL = re.compile(r"^\s*:?-+:?\s*$")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # the newlines Python's tokenizer counts


class _Refusal(Exception):
    """An edit that cannot be made; the message is the outcome's reason."""


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Row:
    line: int  # 1-based
    text: str  # the raw line, without its line ending
    cells: tuple[str, ...]  # stripped, `\|` unescaped
    width_ok: bool  # as many cells as the header; only such rows can be edited or copied


@dataclass(frozen=True)
class Table:
    header_line: int  # 1-based; the separator is the next line
    header_text: str
    headers: tuple[str, ...]
    section_line: str | None
    local: bool
    marker: str | None  # the marker line that decided `local`, None when no marker was in range
    rows: tuple[Row, ...]

    @property
    def last_line(self) -> int:
        """The line a new row goes after: the last data row, or the separator."""
        return self.rows[-1].line if self.rows else self.header_line + 1


@dataclass(frozen=True)
class ParsedTables:
    tables: tuple[Table, ...]
    comment_table_lines: tuple[int, ...]  # old `# | ... |` rows outside the docstring
    docstring: tuple[int, int] | None  # first and last line, 1-based
    docstring_raw: bool  # r"""...""": the only kind where a `\|` escape is safe to write
    error: str | None  # set when the file is not Python; then nothing else is known

    @property
    def official(self) -> tuple[Table, ...]:
        return tuple(t for t in self.tables if not t.local)


def _split_lines(text: str) -> list[str]:
    return _LINE.findall(text)


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def _split_raw(inner: str) -> list[str]:
    """Cells between the outer pipes, raw; a backslash right before `|` escapes it."""
    cells, start, i = [], 0, 0
    while i < len(inner):
        if inner[i] == "\\" and inner[i + 1 : i + 2] == "|":
            i += 2
            continue
        if inner[i] == "|":
            cells.append(inner[start:i])
            start = i + 1
        i += 1
    cells.append(inner[start:])
    return cells


def raw_cells(line: str) -> list[str] | None:
    """The raw cells of a pipe row (exact text, padding kept), or None if it is not one."""
    s = line.strip()
    if len(s) < 3 or s[0] != "|" or s[-1] != "|" or s[-2] == "\\":
        return None
    cells = _split_raw(s[1:-1])
    return cells if len(cells) >= 2 else None


def unescape(cell: str) -> str:
    return cell.strip().replace("\\|", "|")


def escape(value: str) -> str:
    return value.replace("|", "\\|")


def _is_separator(line: str) -> bool:
    cells = raw_cells(line)
    return cells is not None and all(_SEPARATOR_CELL.match(c) for c in cells)


def _comment_table_lines(lines: list[str], span: tuple[int, int] | None) -> tuple[int, ...]:
    """Old-format rows (`# | a | b |`): reported so a caller can say why nothing matched."""
    found = []
    for n, line in enumerate(lines, 1):
        s = line.lstrip()
        inside = span is not None and span[0] <= n <= span[1]
        if s.startswith("#") and not inside and raw_cells(s.lstrip("#")) is not None:
            found.append(n)
    return tuple(found)


def _docstring(tree: ast.Module, lines: list[str]) -> tuple[tuple[int, int] | None, bool]:
    body = tree.body
    if not body or not isinstance(body[0], ast.Expr):
        return None, False
    node = body[0].value
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or node.end_lineno is None:
        return None, False
    opening = lines[node.lineno - 1].encode()[node.col_offset :].decode(errors="replace")
    prefix = re.match(r"[A-Za-z]*", opening)
    return (node.lineno, node.end_lineno), "r" in (prefix.group(0).lower() if prefix else "")


def _section_line(lines: list[str], header: int, first: int) -> str | None:
    for k in range(header - 1, first - 2, -1):
        if lines[k].strip():
            return None if raw_cells(lines[k]) is not None else lines[k].strip()
    return None


def _marker(lines: list[str], header: int, first: int) -> tuple[bool, str | None]:
    """Local or official, from the nearest non-pipe marker line above the header (0-based)."""
    for k in range(header - 1, max(first - 2, header - 1 - MARKER_SCAN_LINES), -1):
        s = lines[k].strip()
        if not s or raw_cells(s) is not None:
            continue
        if s.startswith(LOCAL_PREFIX) or any(m in s for m in LOCAL_MARKERS):
            return True, s
        if any(m in s for m in OFFICIAL_MARKERS):
            return False, s
    return False, None


def _is_header(lines: list[str], i: int, end: int) -> bool:
    return (
        i + 1 < end
        and raw_cells(lines[i]) is not None
        and not _is_separator(lines[i])
        and _is_separator(lines[i + 1])
    )


def _table_at(lines: list[str], i: int, end: int, first: int) -> Table:
    """The table whose header is at 0-based index `i`; it ends before `end` (0-based, exclusive)."""
    headers = tuple(unescape(c) for c in raw_cells(lines[i]) or [])
    rows, j = [], i + 2
    while (
        j < end
        and raw_cells(lines[j]) is not None
        and not _is_separator(lines[j])
        and not _is_header(lines, j, end)
    ):
        cells = tuple(unescape(c) for c in raw_cells(lines[j]) or [])
        rows.append(Row(j + 1, lines[j], cells, len(cells) == len(headers)))
        j += 1
    local, marker = _marker(lines, i, first)
    return Table(i + 1, lines[i], headers, _section_line(lines, i, first), local, marker, tuple(rows))


def _tables(lines: list[str], span: tuple[int, int]) -> tuple[Table, ...]:
    first, last = span
    tables, i = [], first - 1
    while i < last:
        if _is_header(lines, i, last):
            table = _table_at(lines, i, last, first)
            tables.append(table)
            i = table.last_line
        else:
            i += 1
    return tuple(tables)


def _parse_module(text: str) -> tuple[ast.Module | None, str | None]:
    try:
        return ast.parse(text), None
    except Exception as exc:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError: any text is input
        return None, f"does not parse as Python: {type(exc).__name__}: {exc}"


def parse_tables(text: str) -> ParsedTables:
    """Every pipe table in the module docstring of `text`; never raises."""
    lines = [_body(line) for line in _split_lines(text)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree, error = _parse_module(text)
    if tree is None:
        return ParsedTables((), _comment_table_lines(lines, None), None, False, error)
    span, raw = _docstring(tree, lines)
    tables = _tables(lines, span) if span else ()
    return ParsedTables(tables, _comment_table_lines(lines, span), span, raw, None)


# --------------------------------------------------------------------------- locating


@dataclass(frozen=True)
class Locator:
    section_substring: str  # in the section line above the table
    config_substring: str  # anywhere in the raw row; a trailing space can disambiguate
    source_workload: str  # inside the Source tag, after the hardware: "full-set, c=8"


def hardware_tag(hardware: str, workload: str) -> str:
    return f"[{hardware}, {workload}]" if workload else f"[{hardware}]"


@dataclass(frozen=True)
class Location:
    """What a locator finds: the input to an edit, and to a "check my locators" command."""

    tag: str
    tables: tuple[Table, ...]  # official tables whose section line contains the section substring
    candidates: tuple[tuple[Table, Row], ...]  # their rows containing the config substring
    matched: tuple[tuple[Table, Row], ...]  # candidates whose raw text holds the tag
    problem: str | None  # why no edit is possible here at all


def _comment_note(parsed: ParsedTables) -> str:
    if not parsed.comment_table_lines:
        return ""
    return (
        f"; the file has old-format tables in `#` comments (lines {list(parsed.comment_table_lines)}),"
        " which are never edited: move them into the module docstring"
    )


def _missing_section(parsed: ParsedTables, section: str) -> str:
    if parsed.docstring is None:
        return "the file has no module docstring, so no reference tables" + _comment_note(parsed)
    lines = [t.section_line for t in parsed.official]
    text = f"no official table has a section line containing {section!r}; official section lines: {lines}"
    if any(t.local and section in (t.section_line or "") for t in parsed.tables):
        text += " (a Local table has that section, but Local tables are never edited)"
    return text + _comment_note(parsed)


def locate(parsed: ParsedTables, locator: Locator, hardware: str) -> Location:
    tag = hardware_tag(hardware, locator.source_workload)
    if parsed.error:
        return Location(tag, (), (), (), f"the file {parsed.error}")
    tables = tuple(t for t in parsed.official if locator.section_substring in (t.section_line or ""))
    candidates = tuple((t, r) for t in tables for r in t.rows if locator.config_substring in r.text)
    matched = tuple((t, r) for t, r in candidates if tag in r.text)
    problem = None if tables else _missing_section(parsed, locator.section_substring)
    return Location(tag, tables, candidates, matched, problem)


# --------------------------------------------------------------------------- editing


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
    ending = lines[after - 1][len(_body(lines[after - 1])) :] or "\n"
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
    lines = _split_lines(text)
    action: Action = "replaced" if location.matched else "appended"
    if location.matched:
        table, row = location.matched[0]
        line, before = _replace(lines, parsed, table, row, edit), row.text
    else:
        line, before = _append(lines, parsed, location, edit), None
    new_text = "".join(lines)
    _check_relocates(new_text, edit, line)
    after = _body(lines[line - 1])
    reason = f"{action} line {line}" + (" (values unchanged)" if after == before else "")
    return new_text, EditOutcome(edit.row_id, "ok", action, reason, line, before, after)


def plan_edit(text: str, edit: RowEdit) -> tuple[str, EditOutcome]:
    """The text after one edit, and what happened; on failure the text comes back unchanged."""
    try:
        return _plan(text, edit)
    except _Refusal as exc:
        return text, EditOutcome.failed(edit.row_id, str(exc))


# --------------------------------------------------------------------------- writing


def _warnings_of(text: str) -> Counter[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ast.parse(text)
    return Counter(f"{w.category.__name__}: {w.message}" for w in caught)


def _unexpected_change(original: str, new: str, outcomes: Sequence[EditOutcome]) -> str | None:
    """Position check: dropping the appended lines from `new` must give `original`, except replaced lines."""
    appended = {o.line for o in outcomes if o.action == "appended"}
    replaced = {o.line for o in outcomes if o.action == "replaced"}
    new_lines = _split_lines(new)
    kept = [(n, line) for n, line in enumerate(new_lines, 1) if n not in appended]
    old_lines = _split_lines(original)
    bad = len(kept) != len(old_lines) or any(
        line != old and n not in replaced for (n, line), old in zip(kept, old_lines)
    )
    if not bad:
        return None
    diff = "".join(list(difflib.unified_diff(old_lines, new_lines, n=0))[2:12])
    return f"the change touches more than the edited rows (replaced {sorted(replaced)}, appended {sorted(appended)}):\n{diff}"


def verify_rewrite(original: str, new: str, outcomes: Sequence[EditOutcome]) -> str | None:
    """Why `new` must not replace `original`, or None: it parses, adds no warning, changes only what was said."""
    try:
        added = _warnings_of(new) - _warnings_of(original)
    except Exception as exc:  # noqa: BLE001 - anything ast.parse raises means the module would break
        return f"the new text does not parse as Python: {type(exc).__name__}: {exc}"
    if added:
        return f"the new text adds Python warnings: {sorted(added)}"
    return _unexpected_change(original, new, [o for o in outcomes if o.status == "ok"])


class _FileChanged(Exception):
    pass


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_atomic(path: Path, original: bytes, data: bytes) -> None:
    """Temp file beside `path`, fsync, same mode, os.replace; on any exception the temp file goes."""
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if path.read_bytes() != original:
            raise _FileChanged(
                f"{path} changed while it was being edited (someone edited it without the lock)"
            )
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def lock_path(path: Path, lock_dir: Path) -> Path:
    """One lock per benchmark file, kept out of the source tree."""
    return lock_dir / (hashlib.sha1(str(path.resolve()).encode()).hexdigest() + ".lock")


def _fail_all(outcomes: Sequence[EditOutcome], reason: str) -> list[EditOutcome]:
    return [o if o.status == "fail" else EditOutcome.failed(o.row_id, reason) for o in outcomes]


def _shift(outcomes: list[EditOutcome], inserted: int) -> list[EditOutcome]:
    """Rows reported at or below a newly inserted line have moved down by one."""
    return [
        dataclasses.replace(o, line=o.line + 1) if o.line is not None and o.line >= inserted else o
        for o in outcomes
    ]


def _apply_locked(path: Path, edits: Sequence[RowEdit]) -> list[EditOutcome]:
    try:
        raw = path.read_bytes()
        original = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [EditOutcome.failed(e.row_id, f"cannot read {path}: {exc}") for e in edits]
    text, outcomes = original, []
    for edit in edits:
        text, outcome = plan_edit(text, edit)
        if outcome.action == "appended" and outcome.line is not None:
            outcomes = _shift(outcomes, outcome.line)
        outcomes.append(outcome)
    if text == original:
        return outcomes
    problem = verify_rewrite(original, text, outcomes)
    if problem:
        return _fail_all(outcomes, f"nothing written: {problem}")
    try:
        _write_atomic(path, raw, text.encode("utf-8"))
    except (OSError, _FileChanged) as exc:
        return _fail_all(outcomes, f"nothing written: {type(exc).__name__}: {exc}")
    return outcomes


def apply_edits(
    path: Path, edits: Sequence[RowEdit], lock_dir: Path, *, lock_timeout: float = 600.0
) -> list[EditOutcome]:
    """Apply `edits` to one benchmark file, in order, under its lock; the only function that writes.

    A failed edit leaves the others applying. The result is written only when it parses, adds no
    Python warning and changes exactly the reported lines; the write is atomic, so an interrupted
    run leaves the original file byte for byte. KeyboardInterrupt propagates after the cleanup.
    """
    target = path.resolve()  # write through a symlink, not over it
    if lock_dir.resolve() == target.parent:
        return [EditOutcome.failed(e.row_id, "lock_dir is the benchmark's own directory") for e in edits]
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(lock_path(target, lock_dir)), timeout=lock_timeout)
    try:
        with lock:
            return _apply_locked(target, edits)
    except filelock.Timeout:
        return [
            EditOutcome.failed(e.row_id, f"could not lock {target} within {lock_timeout:g}s") for e in edits
        ]


# --------------------------------------------------------------------------- describing


def describe(text: str) -> list[str]:
    """One line per table (and per problem) in a benchmark file, for checking locators by eye."""
    parsed = parse_tables(text)
    if parsed.error:
        return [f"error: the file {parsed.error}"]
    out = [] if parsed.docstring else ["no module docstring"]
    for t in parsed.tables:
        kind = "LOCAL (never edited)" if t.local else "official"
        out.append(
            f"line {t.header_line}: {kind} section={t.section_line!r} columns={list(t.headers)} rows={len(t.rows)}"
        )
        out += [
            f"  line {r.line}: {len(r.cells)} cells, header has {len(t.headers)}"
            for r in t.rows
            if not r.width_ok
        ]
    if parsed.comment_table_lines:
        out.append(
            f"old-format `#` comment table rows (never edited): lines {list(parsed.comment_table_lines)}"
        )
    return out
