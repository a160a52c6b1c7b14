"""A JSON Schema from a declared type: the schema entry of a level figure's TypedDict (bench.core.declare).

`schema_of(kind)` gives the schema of a type as cellbench writes its results: a TypedDict is an
object with exactly its keys (`additionalProperties: false`), its required keys required, each
property described by its `Doc`; `X | None` is a type list with "null"; `list[X]` an array;
`dict[str, X]` an object of X; `Literal[...]` an enum; a bool is never a number. Only what a
result holds is supported: anything else raises, so a figure cannot declare a type its schema
would not check.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints, is_typeddict

from bench.core.declare import Doc

_SCALARS: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def schema_of(kind: Any) -> dict[str, Any]:
    """The JSON Schema of `kind` (a TypedDict, a scalar, a union, list, dict or Literal of them)."""
    description = None
    if get_origin(kind) is typing.Annotated:
        kind, *extras = get_args(kind)
        description = next((e.text for e in extras if isinstance(e, Doc)), None)
    schema = _bare(kind)
    return {"description": description, **schema} if description is not None else schema


def _bare(kind: Any) -> dict[str, Any]:
    if kind in _SCALARS:
        return {"type": _SCALARS[kind]}
    if is_typeddict(kind):
        hints = get_type_hints(kind, include_extras=True)
        required: frozenset[str] = vars(kind)["__required_keys__"]
        return {"type": "object", "additionalProperties": False,
                "required": [name for name in hints if name in required],
                "properties": {name: schema_of(hint) for name, hint in hints.items()}}
    origin, args = get_origin(kind), get_args(kind)
    if origin in (types.UnionType, typing.Union):
        members = [_bare(a) for a in args]
        if all(set(m) == {"type"} for m in members):  # scalars only: one type list
            return {"type": [m["type"] for m in members]}
        return {"anyOf": members}
    if origin is list:
        return {"type": "array", "items": schema_of(args[0])}
    if origin is dict and args[0] is str:
        return {"type": "object", "additionalProperties": schema_of(args[1])}
    if origin is Literal:
        return {"enum": list(args)}
    raise TypeError(f"no JSON Schema for {kind!r}: a result holds scalars, lists, str-keyed dicts and TypedDicts")
