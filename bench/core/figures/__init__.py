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

from bench.core.figures.declare import LevelFigure, Prices, Sampled
from bench.core.level_run import LevelRun
from bench.core.metrics.blocks import Level


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
    """Each client-side figure's block over `run`, in FIGURES' order; a figure with nothing to say is left out."""
    return {f.key: block for f in FIGURES if f.measure is not None and (block := f.measure(run)) is not None}


def watched(seen: Sampled) -> dict[str, Mapping[str, Any]]:
    """Each figure the server's watch measures (`watch`), over what it sampled while a level ran."""
    return {f.key: block for f in FIGURES if f.watch is not None and (block := f.watch(seen)) is not None}


def derived(level: Mapping[str, Any], prices: Prices) -> dict[str, Mapping[str, Any]]:
    """Each figure derived from the finished level's other blocks (`derive`), with the run's prices."""
    return {f.key: block for f in FIGURES if f.derive is not None and (block := f.derive(level, prices)) is not None}


def block_of(level: Mapping[str, object], key: str) -> Mapping[str, Any]:
    """A level's figure block by its key ({} where the level has none): a result's levels, typed as
    `Level`, leave the figures' keys to the declarations."""
    found = level.get(key)
    return found if isinstance(found, Mapping) else {}


def attach(level: Level, blocks: Mapping[str, Mapping[str, Any]]) -> None:
    """`level` with the figures' `blocks` (`watched`'s) added, as the server's watch adds them once
    its server has stopped: the figures' keys are declared by the figures, not by `Level`."""
    level.update(blocks)  # type: ignore[typeddict-item]
