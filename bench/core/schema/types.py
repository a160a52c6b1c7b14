"""A JSON Schema from a declared type: the schema entry of a level figure's TypedDict (bench.core.figures.declare).

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
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args, get_origin, get_type_hints, is_typeddict

from bench.base.doc import Doc, constraints

_SCALARS: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


Refs = Mapping[Any, str]
"""TypedDicts that are entries of the schema's `$defs`, by their name there: a field of that type is
a `$ref` to it (one entry, however many blocks hold it; a block that holds itself, too)."""


def schema_of(kind: Any, refs: Refs = MappingProxyType({})) -> dict[str, Any]:
    """The JSON Schema of `kind` (a TypedDict, a scalar, a union, list, dict or Literal of them;
    `Any` for a free-form value), with its `Doc`'s description and bounds; a TypedDict of `refs`
    as a `$ref` to its entry."""
    doc = None
    if get_origin(kind) is typing.Annotated:
        kind, *extras = get_args(kind)
        doc = next((e for e in extras if isinstance(e, Doc)), None)
    schema = {"$ref": f"#/$defs/{refs[kind]}"} if kind in refs else _bare(kind, refs)
    if doc is None:
        return schema
    if doc.text:  # the field's own description, before the type's
        schema = {"description": doc.text, **{k: v for k, v in schema.items() if k != "description"}}
    return {**schema, **dict(doc.bounds)}


def definition(kind: Any, refs: Refs) -> dict[str, Any]:
    """The `$defs` entry of the TypedDict `kind` itself (the TypedDicts of `refs` in it as `$ref`s)."""
    return _bare(kind, refs)


def _plain(value: Any) -> Any:
    """`value` as JSON data: read-only mappings as dicts."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, list | tuple) else value


def _description(kind: Any) -> dict[str, str]:
    """A TypedDict's docstring, unwrapped, as its schema's description; none without one."""
    text = vars(kind).get("__doc__")
    return {"description": " ".join(text.split())} if text else {}


def _bare(kind: Any, refs: Refs) -> dict[str, Any]:
    if kind is Any:
        return {}
    if kind in _SCALARS:
        return {"type": _SCALARS[kind]}
    if is_typeddict(kind):
        hints = get_type_hints(kind, include_extras=True)
        required: frozenset[str] = vars(kind)["__required_keys__"]
        return {**_description(kind), "type": "object", "additionalProperties": False,
                **({"required": [name for name in hints if name in required]} if required else {}),
                "properties": {name: schema_of(hint, refs) for name, hint in hints.items()},
                **_plain(constraints(kind))}
    origin, args = get_origin(kind), get_args(kind)
    if origin in (types.UnionType, typing.Union):
        members = [schema_of(a, refs) for a in args]
        rest = [key for m in members for key in m if key != "type"]
        if all(isinstance(m.get("type"), str) for m in members) and len(rest) == len(set(rest)):
            # one type list ("array" or "null"), each member's other keywords beside it: they bind only
            # values of the type they are for (`items` an array, `minimum` a number)
            return {"type": [m["type"] for m in members],
                    **{k: v for m in members for k, v in m.items() if k != "type"}}
        return {"anyOf": members}
    if origin is list:
        return {"type": "array", "items": schema_of(args[0], refs)}
    if origin is dict and args[0] is str:  # of any values (free-form): an object, its keys unchecked
        values = {} if args[1] is Any else {"additionalProperties": schema_of(args[1], refs)}
        return {"type": "object", **values}
    if origin is Literal:
        return {"enum": list(args)}
    raise TypeError(f"no JSON Schema for {kind!r}: a result holds scalars, lists, str-keyed dicts and TypedDicts")
