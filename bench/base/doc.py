"""`Doc`: what a field of a result block is, beside its type, for the schema generated from the type."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


class Doc:
    """A field's description, and the JSON Schema keywords that bound its value beyond its type:
    `Annotated[int, Doc("Rounds measured.", minimum=1)]` in a block's TypedDict (`Doc(minimum=0)`: bounds
only, for the values of a dict or list) (a level figure's,
    or any block of the result whose schema entry is generated: bench.core.schema.types)."""

    __slots__ = ("bounds", "text")

    def __init__(self, text: str = "", **bounds: object) -> None:
        self.text = text
        self.bounds = tuple(bounds.items())  # minimum, exclusiveMinimum, minLength, maxItems, ...

    def __repr__(self) -> str:
        return f"Doc({self.text!r}{''.join(f', {k}={v!r}' for k, v in self.bounds)})"


_CONSTRAINTS: dict[Any, Mapping[str, Any]] = {}


def constrain(kind: Any, keywords: Mapping[str, Any]) -> None:
    """Declare, beside the TypedDict `kind`, the JSON Schema keywords that tie its fields together
    (`if`/`then`/`else`, `oneOf`, `dependentSchemas`): what a type cannot say. Its generated schema
    entry has them (bench.core.schema.types)."""
    _CONSTRAINTS[kind] = MappingProxyType(dict(keywords))


def constraints(kind: Any) -> Mapping[str, Any]:
    """The keywords `constrain` declared for `kind`; none for any other type."""
    return _CONSTRAINTS.get(kind, MappingProxyType({}))
