"""Dotted paths into JSON data, the one way cellbench names a nested field: `summary.accuracy`,
`per_task.0.score` (an integer indexes a list), `request_extras.ignore_eos`."""

from __future__ import annotations

from typing import Any


def json_path(data: Any, path: str) -> Any:
    """The value at `path` in `data`; KeyError naming the first part that is not there."""
    node = data
    for part in path.split("."):
        if isinstance(node, list) and part.lstrip("-").isdigit():
            try:
                node = node[int(part)]
            except IndexError:
                raise KeyError(f"JSON path {path!r}: index {part} out of range") from None
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(f"JSON path {path!r}: no {part!r}")
    return node


def json_path_or(data: Any, path: str, default: Any = None) -> Any:
    """The value at `path` in `data`, or `default` where the path is not there."""
    try:
        return json_path(data, path)
    except KeyError:
        return default
