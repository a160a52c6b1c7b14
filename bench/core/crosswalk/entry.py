"""One entry of the crosswalk: what a peer tool calls one of cellbench's figures, and how it computes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TOOLS: tuple[str, ...] = ("vllm", "aiperf", "guidellm", "siliconbench")
"""The peer tools of the crosswalk, each a module of bench.core.crosswalk."""

Likeness = Literal["same", "close", "different", "none"]
"""How the peer's figure compares with cellbench's: "same" (one definition; only the clock or the
units may differ), "close" (the same quantity, measured from or to a slightly different moment, or
with tokens counted another way: comparable with care), "different" (another quantity under a
name that invites the comparison), "none" (the peer reports nothing for it)."""


@dataclass(frozen=True)
class PeerMetric:
    key: str  # cellbench's level key (a dotted path for a nested figure: "goodput.goodput_rps")
    name: str | None  # the peer's own name for it, as its output labels it; None: no equivalent
    field: str | None  # where the peer's export holds it (its tag, attribute or JSON key)
    formula: str  # the peer's definition, in the peer's terms; "" when it has none
    likeness: Likeness
    note: str  # how it differs from cellbench's definition (or, without an equivalent, the nearest thing)
    source: str  # the file of the peer's package (or repository) the definition was read in

    def __post_init__(self) -> None:
        # An entry either names the peer's figure with its definition, or says there is none.
        assert (self.name is None) == (self.likeness == "none") == (self.field is None) == (not self.formula), self


def none(key: str, note: str, source: str) -> PeerMetric:
    """An entry for a figure the peer does not report; `note` names the nearest thing it has."""
    return PeerMetric(key, None, None, "", "none", note, source)
