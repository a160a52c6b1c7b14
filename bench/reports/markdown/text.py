"""Markdown's pieces as REPORT.md and the merged report write them: table-safe cells, tables, bullet lists."""

from __future__ import annotations

from typing import Any

MISSING_LEVEL = "—"  # a level this column's framework did not measure
NULL = "N/A"  # a value the level does not have


def num(value: float | None, digits: int, scale: float = 1.0, suffix: str = "") -> str:
    return NULL if value is None else f"{value * scale:.{digits}f}{suffix}"


def cell(text: Any) -> str:
    """Table-safe text: a `|` would end the cell and a newline the row."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list[Any]], align: str = "---") -> list[str]:
    lines = ["| " + " | ".join(cell(h) for h in header) + " |",
             "|" + "|".join(["---", *[align] * (len(header) - 1)]) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def bullets(title: str, items: list[str], none: str) -> list[str]:
    return [f"## {title}", "", *([f"- {cell(i)}" for i in items] or [none]), ""]


