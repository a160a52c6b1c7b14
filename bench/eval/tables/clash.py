"""Rows of one file checked against each other: no two rows may meet one Config.

`locate` checks one row against its table, and cannot see a locator that looks unique only
because the table does not hold its own Config yet: in a table holding only
`modalities=text+audio` rows, "modalities=text" meets one Config, the wrong one. A first run
would append the text result labelled `modalities=text+audio`, and the text+audio row, finding
that row with its own tag, would then replace it: one result lost. So every row is also checked
against the other rows of its file:

* two rows whose config substrings differ but meet one Config (their own model's rows of the
  section's official tables) clash, and both are named;
* two rows with the same substring and the same workload would write one row: they clash too.
  The same substring with another workload is fine: each row has its own Source tag;
* a row that has no row of its Config yet but a `new_row` counts the row it would append, so
  "modalities=text" clashes with a row that is about to append `modalities=text+audio`.

Only rows whose model names meet the same Model cell can clash (see `locate`). Nothing here
needs the hardware tag, so a precheck can ask before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from bench.eval.tables.locate import CONFIG_COLUMN, MODEL_COLUMN, Locator, is_models_row, model_names
from bench.eval.tables.parse import ParsedTables, Table, TableRow

CLASH_FIX = ("a config_substring that only its own Config holds (a trailing space keeps 'text' from matching"
             " 'text+audio')")


@dataclass(frozen=True)
class Claim:
    """What one row of a config says about the table row it will write."""

    row_id: str
    locate: Locator
    model: str | None = None
    aliases: tuple[str, ...] = ()
    new_row: Mapping[str, str] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class Clash:
    rows: tuple[str, str]  # the two row ids, in config order
    reason: str


@dataclass(frozen=True)
class _Meet:
    table: Table
    model: str  # the Model cell ("" without that column)
    config: str  # the Config cell, or the raw row in a table without a Config column
    line: int | None  # None: the row a claim's new_row would append
    appended_by: str = ""  # that claim's row id

    @property
    def key(self) -> tuple[int, str, str]:
        return self.table.header_line, self.model, self.config

    def where(self) -> str:
        if self.line is not None:
            return f"Config {self.config!r} (line {self.line})"
        return f"Config {self.config!r} (the row {self.appended_by} would append to the table at line" \
               f" {self.table.header_line})"


def _cell(table: Table, row: TableRow, column: str) -> str | None:
    index = table.headers.index(column) if column in table.headers else len(row.cells)
    return row.cells[index] if index < len(row.cells) else None


def _meet(table: Table, row: TableRow, line: int | None, by: str = "") -> _Meet:
    """A row a claim meets, known by its Model and Config cells (the raw row without a Config column)."""
    config = _cell(table, row, CONFIG_COLUMN)
    return _Meet(table, _cell(table, row, MODEL_COLUMN) or "", row.text.strip() if config is None else config, line, by)


def _predicted(table: Table, new_row: Mapping[str, str]) -> TableRow:
    """The row a `new_row` would append, as far as a locator can see it: its given cells, the rest blank."""
    cells = tuple(new_row.get(h, "") for h in table.headers)
    return TableRow(0, "| " + " | ".join(cells) + " |", cells, True)


def _tables(parsed: ParsedTables, claim: Claim) -> list[Table]:
    return [t for t in parsed.official if claim.locate.section_substring in (t.section_line or "")]


def _meets(parsed: ParsedTables, claim: Claim, appended: Mapping[str, tuple[Table, TableRow]]) -> list[_Meet]:
    """The Configs `claim`'s substring meets: its model's rows, and rows other claims would append."""
    names = model_names(claim.model, claim.aliases)
    text = claim.locate.config_substring
    found = [_meet(t, r, r.line) for t in _tables(parsed, claim) for r in t.rows
             if text in r.text and is_models_row(t, r, names)]
    for by, (table, row) in appended.items():
        if claim.locate.section_substring in (table.section_line or "") and text in row.text \
                and is_models_row(table, row, names):
            found.append(_meet(table, row, None, by))
    return found


def _appended(parsed: ParsedTables, claims: Sequence[Claim]) -> dict[str, tuple[Table, TableRow]]:
    """Row id -> the row its new_row would append: only a claim that meets no row of its own yet,
    in a section with one table (with two, such an append is refused by the edit)."""
    out = {}
    for claim in claims:
        tables = _tables(parsed, claim)
        if claim.new_row and len(tables) == 1 and not _meets(parsed, claim, {}):
            row = _predicted(tables[0], claim.new_row)
            if claim.locate.config_substring in row.text:  # else the edit refuses it: it could not find it again
                out[claim.row_id] = (tables[0], row)
    return out


def _reason(a: Claim, b: Claim, meet: _Meet) -> str | None:
    la, lb = a.locate, b.locate
    section = f"under {la.section_substring!r}" if la.section_substring == lb.section_substring else \
        f"under {la.section_substring!r} and {lb.section_substring!r}"
    if la.config_substring != lb.config_substring:
        return (f"rows {a.row_id} and {b.row_id} both meet {meet.where()} {section}: {a.row_id}'s config_substring"
                f" {la.config_substring!r}, {b.row_id}'s {lb.config_substring!r}; one row's result would be filed"
                f" under the other's Config, or replace it")
    if la.source_workload == lb.source_workload:
        return (f"rows {a.row_id} and {b.row_id} have the same locator ({la.config_substring!r} {section},"
                f" workload {la.source_workload!r}): both would write the row of {meet.where()}, and the second"
                f" would replace the first's result")
    return None  # the same Config under two workloads: two rows, each with its own tag


def clashes(parsed: ParsedTables, claims: Sequence[Claim]) -> list[Clash]:
    """Every pair of `claims` (rows of this one file) that would meet one Config, in config order."""
    if parsed.error:
        return []
    appended = _appended(parsed, claims)
    meets = {c.row_id: _meets(parsed, c, {k: v for k, v in appended.items() if k != c.row_id}) for c in claims}
    for claim in claims:
        if claim.row_id in appended:
            table, row = appended[claim.row_id]
            meets[claim.row_id].append(_meet(table, row, None, claim.row_id))
    return list(_pairs(claims, meets))


def _pairs(claims: Sequence[Claim], meets: dict[str, list[_Meet]]) -> Iterator[Clash]:
    for a, b in combinations(claims, 2):
        keys_b = {m.key for m in meets[b.row_id]}
        shared = next((m for m in meets[a.row_id] if m.key in keys_b), None)
        if shared is None:
            continue
        reason = _reason(a, b, shared)
        if reason is not None:
            yield Clash((a.row_id, b.row_id), reason)

