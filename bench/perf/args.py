"""Argument types of the perf tools: a value that cannot describe a run is a usage error (exit 2,
one line naming the option), never a ZeroDivisionError or a silently shortened list."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _number(convert: Callable[[str], float], least: float, strict: bool, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes {what}, got {text!r}") from None
        if value < least or (strict and value == least) or value != value:  # NaN compares unequal
            raise argparse.ArgumentTypeError(f"takes {what}, got {text!r}")
        return value

    return parse


positive_int = _number(int, 0, True, "a whole number above 0")
positive_float = _number(float, 0.0, True, "a number above 0")
non_negative_float = _number(float, 0.0, False, "a number of 0 or more")


def positive_ints(text: str) -> tuple[int, ...]:
    """`5000,10000`: every element a whole number above 0; an empty element is an error, not skipped."""
    parts = text.split(",")
    if any(not part.strip() for part in parts):
        raise argparse.ArgumentTypeError(f"takes a comma-separated list of whole numbers above 0 with no empty "
                                         f"element, got {text!r}")
    return tuple(int(positive_int(part.strip())) for part in parts)


def peer_names(text: str) -> tuple[str, ...]:
    """`--peers vllm,aiperf`: known peer names, or `none` for cellbench's client alone."""
    if text.strip() == "none":
        return ()
    from bench.perf.peers import peers  # the peers' modules load only for this option

    known = [p.name for p in peers()]
    names = tuple(part.strip() for part in text.split(","))
    unknown = [n for n in names if n not in known]
    if unknown or not all(names):
        raise argparse.ArgumentTypeError(f"takes peers among {', '.join(known)} (or none), got {text!r}")
    return names
