"""Result files: where they go, how they are written, and the schema they must satisfy.

Layout: `results/<model>/<machine>/<split>/<framework>_<run id>.json`, with the per-request
records beside it (`.requests.jsonl`) and the server logs under `logs/`. A run id is a UTC
timestamp plus a random suffix, so ids sort by time and two runs never collide; later tools pick
"the newest result" by run id and recorded timestamp, never by file mtime.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

import jsonschema

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).parent / "schema" / "result.schema.json"


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
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


def write_json_atomic(path: Path, data: dict) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@cache
def result_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def validate(result: dict) -> None:
    """Raise `jsonschema.ValidationError` if `result` does not follow the result schema."""
    jsonschema.validate(result, result_schema(), cls=jsonschema.Draft202012Validator)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
