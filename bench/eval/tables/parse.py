r"""Pipe tables in a module docstring: where they are, their rows and cells, which are Local.

* Only the MODULE docstring is read. Tables elsewhere (later strings, function docstrings) are
  ignored; old-format tables in `# | ... |` comments are reported by line, never edited.
* A pipe row starts and ends with an unescaped `|` and has at least two cells; `\|` is a
  literal pipe inside a cell. A table is a header row, a separator row, then consecutive data
  rows (a pipe row that is itself followed by a separator starts the next table instead).
* The section line is the heading a table sits under, found by walking up from the header over
  blank lines and paragraphs (runs of non-blank lines). The walk stops at a pipe row (a table
  right above: section None) or at the docstring's first line. The first paragraph that is a
  heading wins: one holding a markdown heading line (`# ...`; the one nearest the table), or
  a one-line paragraph that does not start with a note prefix (`NOTE_PREFIXES`, `NOTE_WORDS`)
  and does not end with `.` or `:`. Notes and multi-line paragraphs between a heading and its
  table are skipped, so "Note (EN rows): ..." never becomes the section; no heading: None.
* A table is Local (never edited) when the nearest marker line above it, however far up in the
  docstring, is a local one: a line containing one of `LOCAL_MARKERS` or starting with `Local `.
  So a Local section runs from its marker to the next official marker, a heading (see
  `_plain_heading`) containing one of `OFFICIAL_MARKERS` ("H200 Full-Set Reference Results"), or
  to the docstring's end, however long it is. Local markers win over official ones on the same
  line; a sentence ("... unlike the Reference Results above.") is no official marker, so it never
  ends a Local section (a doubtful line errs towards Local: never edited, the edit refused).
  Pipe rows are never marker lines, so a Source cell saying "local v1 sweep" cannot turn the
  tables below it local.
* `parse_tables` never raises: a file that is not Python comes back with `error` set.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

LOCAL_MARKERS = ("Local v1 Pipeline Result", "Local Speech Pipeline", "local v1 sweep")
LOCAL_PREFIX = "Local "
OFFICIAL_MARKERS = ("Reference Results",)
NOTE_WORDS = ("Note", "Notes", "NOTE", "NB")  # a paragraph starting with one of these words is a note
NOTE_PREFIXES = ("*", "-", ">", "(")  # list items, quotes and asides are never headings

_SEPARATOR_CELL = re.compile(r"^\s*:?-+:?\s*$")
_MARKDOWN_HEADING = re.compile(r"^#{1,6}\s+\S")
_NOTE_WORD = re.compile(rf"^(?:{'|'.join(NOTE_WORDS)})\b")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # the newlines Python's tokenizer counts


@dataclass(frozen=True)
class TableRow:
    """One row of a markdown reference table, as the file has it."""

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
    rows: tuple[TableRow, ...]

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


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its own ending, split where Python's tokenizer splits."""
    return _LINE.findall(text)


def strip_ending(line: str) -> str:
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


def _plain_heading(line: str) -> bool:
    """A line that can title a table on its own: not a note, list item or sentence."""
    is_note = _NOTE_WORD.match(line) is not None or line.startswith(NOTE_PREFIXES)
    return not is_note and not line.endswith((".", ":"))


def _paragraph_heading(paragraph: list[str]) -> str | None:
    """The heading a paragraph (stripped lines, nearest the table first) gives, if any."""
    markdown = [line for line in paragraph if _MARKDOWN_HEADING.match(line)]
    if markdown:
        return markdown[0]
    if len(paragraph) == 1 and _plain_heading(paragraph[0]):
        return paragraph[0]
    return None


def _paragraphs_above(lines: list[str], header: int, first: int) -> list[list[str]]:
    """Paragraphs above the header (0-based), nearest first, up to a pipe row or the docstring start."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for k in range(header - 1, first - 2, -1):
        s = lines[k].strip()
        if raw_cells(s) is not None:
            break
        if s:
            current.append(s)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def _section_line(lines: list[str], header: int, first: int) -> str | None:
    headings = (_paragraph_heading(p) for p in _paragraphs_above(lines, header, first))
    return next((h for h in headings if h is not None), None)


def _marker(lines: list[str], header: int, first: int) -> tuple[bool, str | None]:
    """Local or official, from the nearest non-pipe marker line above the header (0-based), up to
    the docstring's first line."""
    for k in range(header - 1, first - 2, -1):
        s = lines[k].strip()
        if not s or raw_cells(s) is not None:
            continue
        if s.startswith(LOCAL_PREFIX) or any(m in s for m in LOCAL_MARKERS):
            return True, s
        if any(m in s for m in OFFICIAL_MARKERS) and _plain_heading(s):
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
        rows.append(TableRow(j + 1, lines[j], cells, len(cells) == len(headers)))
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
    lines = [strip_ending(line) for line in split_lines(text)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree, error = _parse_module(text)
    if tree is None:
        return ParsedTables((), _comment_table_lines(lines, None), None, False, error)
    span, raw = _docstring(tree, lines)
    tables = _tables(lines, span) if span else ()
    return ParsedTables(tables, _comment_table_lines(lines, span), span, raw, None)
