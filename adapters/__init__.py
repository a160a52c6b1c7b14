"""One module per framework; each exports `ADAPTER`. The registry finds them by import.

Size: one small declaration per framework, so each framework more is a module more.

PYTEST_DONT_REWRITE: part of an installed pytest plugin, not test code (see bench/__init__.py).
"""

from __future__ import annotations

import hashlib
import importlib
import pkgutil
from functools import cache
from pathlib import Path

from bench.core.result.model import AdapterSource
from bench.setup.adapter import Adapter

_NOT_ADAPTERS: set[str] = set()


@cache
def _modules() -> dict[str, tuple[str, AdapterSource]]:
    """Adapter name -> (its module's name, `{"file", "sha256"}` of that module as it was imported)."""
    found: dict[str, tuple[str, AdapterSource]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _NOT_ADAPTERS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        path = Path(module.__file__ or "")
        found[module.ADAPTER.name] = (module.__name__, {"file": f"{__name__}/{path.name}",
                                                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return found


@cache
def registry() -> dict[str, Adapter]:
    return {name: importlib.import_module(module).ADAPTER for name, (module, _) in _modules().items()}


def source(name: str) -> AdapterSource:
    """`{"file": "adapters/<module>.py", "sha256": ...}` of the module that defines adapter `name`,
    read when this process imported it, so an edit made later in the session is not claimed for
    cells that ran the old code. Two results whose digests differ ran different adapter code:
    that is how a cell fixed by an adapter edit is told apart from a lucky retry."""
    return _modules()[name][1].copy()


def get(name: str) -> Adapter:
    try:
        return registry()[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(registry())}") from None
