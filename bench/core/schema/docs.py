"""docs/metrics.md's generated tables, written with the schema by `python -m bench.core.schema.generate`.

Each is the text between a `<!-- generated: NAME -->` line and the next `<!-- end generated -->`
line of docs/metrics.md; the prose around them is hand-written. NAME is

- `level-figures`: each declared level figure (bench.core.figures): its key, its definition, and
  per field its type, description and report row;
- `crosswalk`: the summary table of what each peer tool calls each cellbench figure;
- `crosswalk-TOOL`: that tool's entries, with formula, likeness, difference and source file.
"""

from __future__ import annotations

import re
from typing import Any, get_type_hints

from bench.base.paths import PROJECT_ROOT
from bench.core import crosswalk, figures
from bench.core.crosswalk import TOOLS, PeerMetric, peer_metric
from bench.core.schema.types import schema_of

DOCS_PATH = PROJECT_ROOT / "docs" / "metrics.md"
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
             *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)]
    return "\n".join(lines) + "\n"


def crosswalk_summary() -> str:
    """One row per cellbench figure: each tool's name for it and its likeness."""
    def name(e: PeerMetric) -> str:
        return "no equivalent" if e.name is None else f"{e.name} ({e.likeness})"
    return _table(["cellbench", *(crosswalk.tool_label(t) for t in TOOLS)],
                  [[f"`{key}`", *(name(peer_metric(t, key)) for t in TOOLS)] for key in crosswalk.KEYS])


def crosswalk_tool(tool: str) -> str:
    """A tool's entries: name, field, formula, likeness, difference and source file."""
    return _table(["cellbench", "name", "field", "formula", "likeness", "how it differs", "source"],
                  [[f"`{e.key}`", e.name or "no equivalent", f"`{e.field}`" if e.field else "—", e.formula or "—",
                    e.likeness, e.note or "—", f"`{e.source}`"] for e in crosswalk.crosswalk(tool)])


def _type_text(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "object")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def level_figures() -> str:
    """Each level figure: `key`, its definition, and a table of its fields."""
    if not figures.FIGURES:
        return "No level figure is declared.\n"
    parts = []
    for figure in figures.FIGURES:
        shown = {row.field: row.title() for row in figure.rows}
        fields = [[f"`{name}`", _type_text(schema := schema_of(hint)), schema.get("description", ""),
                   shown.get(name, "—")] for name, hint in get_type_hints(figure.block, include_extras=True).items()]
        parts.append(f"### `{figure.key}`\n\n{figure.description}\n\n"
                     + _table(["field", "type", "what it is", "shown as"], fields))
    return "\n".join(parts)


def generated() -> dict[str, str]:
    """Every generated table of docs/metrics.md, by its marker's NAME."""
    return {"level-figures": level_figures(), "crosswalk": crosswalk_summary(),
            **{f"crosswalk-{tool}": crosswalk_tool(tool) for tool in TOOLS}}


def rewritten(text: str) -> str:
    """`text` (docs/metrics.md) with each generated table as the declarations give it; a marker
    without a table of that name, or a table without its marker, raises."""
    tables = generated()
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in tables:
            raise ValueError(f"docs/metrics.md marks a table no declaration gives: {name}")
        seen.add(name)
        return match[1] + tables[name] + match[4]
    out = _BLOCK.sub(replace, text)
    if missing := sorted(set(tables) - seen):
        raise ValueError(f"docs/metrics.md has no marker for the generated tables {missing}")
    return out
