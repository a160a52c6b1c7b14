"""Reference tables in benchmark docstrings: parse them, locate one row, rewrite it safely.

An eval benchmark file keeps its reference results as GitHub-markdown pipe tables inside its
module docstring. After a run, one `RowEdit` per result either replaces the row whose Source
carries this hardware's tag or appends a new row to the section's table. The steps, one module
each: `parse` (the tables and which are Local), `locate` (the row a result belongs to), `edit`
(the text after one edit, or why it cannot be made; the Source's `n=K mean` marker is `means`),
`clash` (rows of one file checked against each other), `write` (`apply_edits`, the only writer).
Every public name is importable from here.
"""

from bench.eval.tables.clash import CLASH_FIX, Claim, Clash, clashes
from bench.eval.tables.edit import EMPTY_CELL, SOURCE_COLUMN, EditOutcome, RowEdit, plan_edit
from bench.eval.tables.locate import AMBIGUITY_FIX, Location, Locator, config_ambiguity, describe, hardware_tag, locate
from bench.eval.tables.parse import ParsedTables, Table, TableRow, escape, parse_tables, raw_cells, unescape
from bench.eval.tables.write import apply_edits, lock_path, verify_rewrite

__all__ = [
    "AMBIGUITY_FIX",
    "CLASH_FIX",
    "Claim",
    "Clash",
    "EMPTY_CELL",
    "SOURCE_COLUMN",
    "EditOutcome",
    "Location",
    "Locator",
    "ParsedTables",
    "TableRow",
    "RowEdit",
    "Table",
    "apply_edits",
    "clashes",
    "config_ambiguity",
    "describe",
    "escape",
    "hardware_tag",
    "locate",
    "lock_path",
    "parse_tables",
    "plan_edit",
    "raw_cells",
    "unescape",
    "verify_rewrite",
]
