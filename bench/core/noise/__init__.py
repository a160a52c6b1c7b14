"""A machine's noise floor (bench.core.noise.floor): how much each compared figure of one cell
moves between identical runs, measured from a result of K >= 2 rounds and stored per (model,
machine, split, framework) under `<results root>/<model>/<machine>/noise/<split>/<framework>.json`.
A package of its own so that bench/core keeps to ten modules; `Floors` finds those beside a split's
results (bench.core.noise.beside)."""

from bench.core.noise.beside import Floors
from bench.core.noise.floor import (
    FOLDER,
    KIND,
    SPREAD_KEYS,
    VERSION,
    Floor,
    FloorError,
    floor_path,
    load,
    log_sd,
    measure,
    read,
    spread_settings,
    write,
)

__all__ = ["FOLDER", "KIND", "SPREAD_KEYS", "VERSION", "Floor", "FloorError", "Floors", "floor_path", "load", "log_sd",
           "measure", "read", "spread_settings", "write"]
