"""The level figures: each module of this package but `declare` (what a declaration holds,
bench.core.figures.declare.LevelFigure) declares one, as `FIGURE`.

`FIGURES` holds them in module-name order, found by listing the package, so a new figure is its
own module and nothing else: the level (`measured`), the rounds (bench.core.rounds), the schema
(bench.core.schema.generate), REPORT.md, the HTML review, comparison.csv and the crosswalk read
them from here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from bench.core.figures.declare import LevelFigure
from bench.core.level_run import LevelRun


def _declared() -> tuple[LevelFigure[Any], ...]:
    found = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module.name == "declare":
            continue
        declared = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FIGURE", None)
        if not isinstance(declared, LevelFigure):
            raise TypeError(f"{__name__}.{module.name} declares no FIGURE")
        found.append(declared)
    keys = [f.key for f in found]
    if len(set(keys)) != len(keys):
        raise ValueError(f"two level figures share a key: {keys}")
    return tuple(found)


FIGURES: tuple[LevelFigure[Any], ...] = _declared()
BY_KEY: Mapping[str, LevelFigure[Any]] = {f.key: f for f in FIGURES}


def measured(run: LevelRun) -> dict[str, Mapping[str, Any]]:
    """Each figure's block over `run`, in FIGURES' order; a figure with nothing to say is left out."""
    return {f.key: block for f in FIGURES if (block := f.measure(run)) is not None}
