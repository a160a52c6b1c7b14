"""Result files: where they go, the schema they follow, and the one way they are written and read.

Layout: `results/<model>/<machine>/<split>/<framework>_<run id>.json`, with the per-request
records beside it (`.requests.jsonl`) and the server logs under `logs/`. A run id is a UTC
timestamp plus a random suffix, so ids sort by time and two runs never collide; later tools pick
"the newest result" by run id and recorded timestamp, never by file mtime.

A result is checked against `schema/result.schema.json` twice: by `write_result`, so a cell can
never leave a file the reports would refuse, and by `read_result`, so a file edited or written by
another tool is refused with the place it breaks the schema. `SCHEMA_VERSION` changes only when
the document's shape does; `READABLE_VERSIONS` are those `read_result` accepts.

The `imported` block (a result converted from another benchmark's file, bench.imports) kept
version 1: a measured result's shape and what it must hold are unchanged (the schema still
requires everything of a result without `imported`), and a cellbench that predates the block
refuses an imported file naming the `imported` key rather than misreading it. Open-loop levels
(`request_rate` and `open_loop` in place of `concurrency`), `run_config.load` and `sweep` kept it
for the same reasons: a closed-loop result is as it was, and an older cellbench refuses an
open-loop one by the key it does not know.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, cast

import jsonschema

from bench.base import clock
from bench.base.files import atomic_write
from bench.core.metrics.table import schema_entries
from bench.core.result_model import Result

SCHEMA_VERSION = 1
READABLE_VERSIONS = (1,)
SCHEMA_PATH = Path(__file__).parent / "schema" / "result.schema.json"


def new_run_id(now: datetime | None = None) -> str:
    now = now or clock.now()
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class CellPaths:
    split_dir: Path
    framework: str
    run_id: str

    @property
    def stem(self) -> str:
        return f"{self.framework}_{self.run_id}"

    @property
    def result(self) -> Path:
        return self.split_dir / f"{self.stem}.json"

    @property
    def requests(self) -> Path:
        return self.split_dir / f"{self.stem}.requests.jsonl"

    def server_log(self, label: str) -> Path:
        return self.split_dir / "logs" / f"{self.stem}_{label}.server.log"


def cell_paths(results_root: Path, model: str, machine: str, split: str, framework: str, run_id: str) -> CellPaths:
    return CellPaths(results_root / model / machine / split, framework, run_id)


@cache
def result_schema() -> dict[str, Any]:
    """The result schema: its file, with each level stats block of the metric table
    (bench.core.metrics.table.schema_entries), so that a metric is declared in one place."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return schema_entries(schema)


@cache
def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(result_schema())  # once, not on every result
    return jsonschema.Draft202012Validator(result_schema())


def validate(result: Any) -> None:
    """Raise `jsonschema.ValidationError` (the most relevant error, as `jsonschema.validate`
    chooses it) if `result` does not follow the result schema."""
    error = jsonschema.exceptions.best_match(_validator().iter_errors(result))
    if error is not None:
        raise error


def write_json_atomic(path: Path, data: Any) -> None:
    """`data` as cellbench writes every JSON file (indent 1, a final newline), replaced atomically."""
    atomic_write(path, json.dumps(data, indent=1) + "\n")


def write_result(path: Path, result: Result) -> None:
    """Validate `result`, then write it: a result that breaks the schema is a bug of the code that
    assembled it, so it raises `jsonschema.ValidationError` and no file is left behind."""
    validate(result)
    write_json_atomic(path, result)


class NotAResult(ValueError):
    """A JSON file that is not a readable cellbench result; `str()` says why, for a reader."""


def read_result(path: Path) -> Result:
    """The result in `path`, validated. Raises NotAResult (unreadable, another version or tool,
    off the schema, a `finished_at` that is not a timestamp)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAResult(f"unreadable: {exc}") from exc
    return as_result(data)


def as_result(data: Any) -> Result:
    """`data` (parsed JSON) as a Result, after the checks `read_result` makes."""
    if not isinstance(data, dict) or data.get("schema_version") not in READABLE_VERSIONS:
        found = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise NotAResult(f"not a cellbench v{SCHEMA_VERSION} result (schema_version {found!r})")
    try:
        validate(data)
        datetime.fromisoformat(data["finished_at"])
    except jsonschema.ValidationError as exc:
        where = "/".join(map(str, exc.absolute_path)) or "top level"
        raise NotAResult(f"does not follow the result schema at {where}: {exc.message}") from exc
    except ValueError as exc:
        raise NotAResult(f"finished_at is not a timestamp: {exc}") from exc
    # The one narrowing of a result read: the schema validation just above checked it, and
    # tests/core/test_result_model.py checks the schema against the Result TypedDicts.
    return cast(Result, data)
