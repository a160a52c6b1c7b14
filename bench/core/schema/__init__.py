"""The result schema's files. `result.schema.json` is the whole schema a result follows, the one
bench.core.result.files validates against and the one to give a user's own JSON Schema tooling; it is
generated (bench.core.schema.generate), never edited by hand, from the declarations: the result's
TypedDicts, each field with its `Doc` (bench.core.result.model and the blocks it names), the
metric table (bench.core.metrics.table) and the level figures (bench.core.figures), each type's
schema by bench.core.schema.types. bench.core.schema.docs writes docs/metrics.md's tables from the
same declarations.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA_PATH = Path(__file__).parent / "result.schema.json"
