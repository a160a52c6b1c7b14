"""Finding the row a result belongs to: a section, a config substring and this hardware's tag.

Locating is plain substring matching on the raw row: a trailing space in `config_substring`
("modalities=text ") keeps "text" from also matching "text+audio". Only official tables are
searched; `describe` lists what a file holds, for checking locators by eye.

A locator must pick one Config: when its config substring is in rows of two different `Config`
cells ("modalities=text" in "modalities=text+audio" too), a first run would append the result
labelled with the other Config and the other Config's row would then replace it. Such a locator
is a `problem`, named by `config_ambiguity` with both Configs, so it is refused before any run.
Only tables with a `Config` column are compared (a table keyed by `Lang` is not).

A model hint ("qwen3-omni") and its declared aliases narrow the rows of a table with a `Model`
column to that model's rows, so one model's result never lands on, or copies identity cells
from, another model's row with the same Config. Names are normalised (lowercase, the part after
the last `/`, alphanumerics only) and match only whole: "qwen3-omni" is a `Qwen3-Omni` row's
model, never a `Qwen3-Omni-Thinking` row's, and "Qwen/Qwen3-Omni-30B-A3B-Instruct" is
`Qwen3-Omni` only where an alias says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bench.eval.tables.parse import ParsedTables, Table, TableRow, parse_tables

MODEL_COLUMN = "Model"
CONFIG_COLUMN = "Config"


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
    candidates: tuple[tuple[Table, TableRow], ...]  # their rows containing the config substring
    matched: tuple[tuple[Table, TableRow], ...]  # candidates whose raw text holds the tag
    problem: str | None  # why no edit is possible here at all
    other_models: tuple[tuple[Table, TableRow], ...] = ()  # rows with the config substring, another model's


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


def normalise_model(name: str) -> str:
    """"Qwen/Qwen3-Omni-30B" -> "qwen3omni30b": comparable across repo ids, display names and aliases."""
    return re.sub(r"[^a-z0-9]", "", name.lower().rsplit("/", 1)[-1])


def model_matches(cell: str, names: str | Sequence[str]) -> bool:
    """Whether a Model cell names the model: equal to one of its names, normalised; never a part of one."""
    cell_name = normalise_model(cell)
    wanted = {normalise_model(n) for n in ([names] if isinstance(names, str) else names)}
    return bool(cell_name) and cell_name in wanted


def model_names(model: str | None, aliases: Sequence[str] = ()) -> tuple[str, ...] | None:
    """The names a row's result may be filed under: its hint and its aliases; None: any model."""
    return None if model is None else tuple(dict.fromkeys([model, *aliases]))


def is_models_row(table: Table, row: TableRow, names: Sequence[str] | None) -> bool:
    """Whether `row` may hold the result of the model with these names; always, without names or
    a Model column."""
    if names is None or MODEL_COLUMN not in table.headers:
        return True
    index = table.headers.index(MODEL_COLUMN)
    if index >= len(row.cells):
        return True  # a row of the wrong width stays a candidate, so its width is reported
    return model_matches(row.cells[index], names)


def _config_rows(parsed: ParsedTables, locator: Locator) -> tuple[tuple[Table, ...], list[tuple[Table, TableRow]]]:
    """The official tables of the section, and their rows holding the config substring."""
    tables = tuple(t for t in parsed.official if locator.section_substring in (t.section_line or ""))
    return tables, [(t, r) for t in tables for r in t.rows if locator.config_substring in r.text]


def _configs(candidates: Sequence[tuple[Table, TableRow]]) -> dict[str, list[int]]:
    """Config cell -> the lines of the candidate rows that hold it, in tables with a Config column."""
    found: dict[str, list[int]] = {}
    for table, row in candidates:
        if CONFIG_COLUMN not in table.headers:
            continue
        index = table.headers.index(CONFIG_COLUMN)
        if index < len(row.cells):  # a row of the wrong width is reported by the edit itself
            found.setdefault(row.cells[index], []).append(row.line)
    return found


def _ambiguity(candidates: Sequence[tuple[Table, TableRow]], locator: Locator) -> str | None:
    configs = _configs(candidates)
    if len(configs) < 2:
        return None
    listed = ", ".join(f"{config!r} (line{'s' * (len(lines) > 1)} {', '.join(map(str, lines))})"
                       for config, lines in configs.items())
    return (f"config_substring {locator.config_substring!r} matches rows of {len(configs)} different Configs"
            f" under {locator.section_substring!r}: {listed}")


def config_ambiguity(parsed: ParsedTables, locator: Locator, model: str | None = None,
                     aliases: Sequence[str] = ()) -> str | None:
    """The Configs a locator's substring spans when it spans more than one (this model's rows), else None.
    It needs no hardware tag: a precheck can ask it before anything runs."""
    _, config_rows = _config_rows(parsed, locator)
    names = model_names(model, aliases)
    return _ambiguity([(t, r) for t, r in config_rows if is_models_row(t, r, names)], locator)


AMBIGUITY_FIX = ("a config_substring that matches one Config only (a trailing space keeps 'text' from matching"
                 " 'text+audio')")


def locate(parsed: ParsedTables, locator: Locator, hardware: str, model: str | None = None,
           aliases: Sequence[str] = ()) -> Location:
    tag = hardware_tag(hardware, locator.source_workload)
    if parsed.error:
        return Location(tag, (), (), (), f"the file {parsed.error}")
    tables, config_rows = _config_rows(parsed, locator)
    names = model_names(model, aliases)
    candidates = tuple((t, r) for t, r in config_rows if is_models_row(t, r, names))
    others = tuple((t, r) for t, r in config_rows if not is_models_row(t, r, names))
    matched = tuple((t, r) for t, r in candidates if tag in r.text)
    ambiguity = _ambiguity(candidates, locator)
    if not tables:
        problem: str | None = _missing_section(parsed, locator.section_substring)
    elif ambiguity:
        problem = (f"{ambiguity}; its result would be labelled with, or replace, another Config's row; use"
                   f" {AMBIGUITY_FIX}")
    else:
        problem = None
    return Location(tag, tables, candidates, matched, problem, others)


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
