"""`loads(bytes)`: one JSON document from bytes, as cheaply as this machine allows; the per-event
parse of the load generator's SSE path (bench.core.sse).

orjson when it is installed (the `fast` extra: about a third of the stdlib's time per chunk), the
stdlib's C scanner otherwise (~40% cheaper than `json.loads`: no encoding sniffing, no argument
checks). Either way the results and the errors (`ValueError`s) are the stdlib's: what orjson
refuses (NaN, a lone surrogate, bad JSON) goes to the stdlib, which decides. One difference is
left: orjson reads an integer past 64 bits as a float.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner behind json.loads

try:
    import orjson
except ImportError:  # optional
    orjson = None  # type: ignore[assignment]

PARSER = "orjson" if orjson is not None else "json"  # which one `loads` uses


def stdlib_loads(data: bytes) -> Any:
    """`json.loads(data)`, without its per-call checks: the same result, the same errors for
    anything that is not exactly one JSON value."""
    text = data.decode()
    try:
        obj, end = _scan(text, 0)
    except StopIteration:  # no JSON value at offset 0 (empty, leading blank): let json say why
        return json.loads(text)
    if end != len(text) and text[end:].strip():
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


# orjson's loads when installed, else `stdlib_loads`. A ValueError from it is not the last word:
# `stdlib_loads` then decides (what `loads` does in one call; a hot path saves that call).
fast_loads: Callable[[bytes], Any] = orjson.loads if orjson is not None else stdlib_loads


def loads(data: bytes) -> Any:
    try:
        return fast_loads(data)
    except ValueError:
        return stdlib_loads(data)
