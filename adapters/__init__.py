"""One module per framework; each exports `ADAPTER`. The registry finds them by import.

PYTEST_DONT_REWRITE: part of an installed pytest plugin, not test code (see bench/__init__.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from bench.setup.adapter import Adapter

_NOT_ADAPTERS: set[str] = set()


@cache
def registry() -> dict[str, Adapter]:
    found: dict[str, Adapter] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _NOT_ADAPTERS or info.name.startswith("_"):
            continue
        adapter = importlib.import_module(f"{__name__}.{info.name}").ADAPTER
        found[adapter.name] = adapter
    return found


def get(name: str) -> Adapter:
    try:
        return registry()[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(registry())}") from None
