"""The result schema's files. `result.schema.json` is the whole schema a result follows, the one
bench.core.result.files validates against and the one to give a user's own JSON Schema tooling; it is
generated (bench.core.schema.generate), never edited by hand. `result.source.json` is its source:
everything but the `$defs` entries of the blocks declared as TypedDicts with their fields'
descriptions (bench.core.schema.generate.DEFS), the per-level stats entries, which come from the
metric table (bench.core.metrics.table), and the level figures' entries, which come from their declarations
(bench.core.figures, each type's schema by bench.core.schema.types). bench.core.schema.docs
writes docs/metrics.md's tables from the same declarations.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA_PATH = Path(__file__).parent / "result.schema.json"
SOURCE_PATH = Path(__file__).parent / "result.source.json"
