"""Result files: where they go, the schema they follow, and the one way they are written and read.

Layout: `results/<model>/<machine>/<split>/<framework>_<run id>.json`, with the per-request
records beside it (`.requests.jsonl`) and the server logs under `logs/`. A run id is a UTC
timestamp plus a random suffix, so ids sort by time and two runs never collide; later tools pick
"the newest result" by run id and recorded timestamp, never by file mtime. A cell of a run id that
already has files there (a resume of a killed run, a retry) writes `<framework>_<run id>-2.json`
and its own sidecars (`-3`, ...): no cell ever writes over another attempt's files (`free_cell_paths`).

While a cell runs, its result is rewritten after every level with an `unfinished` block (who is
writing it, when, how many levels); the cell's last write drops it (bench.run.cell). A result
still unfinished once its writer is gone is a killed run's (bench.core.result.store.killed).

A result is checked against `bench/core/schema/result.schema.json`, read as it is (the whole schema, the
metric table's entries included: `python -m bench.core.schema.generate` writes it), twice: by
`write_result`, so a cell can never leave a file the reports would refuse, and by `read_result`,
so a file edited or written by another tool is refused with the place it breaks the schema
(`follows_schema`: jsonschema_rs's quick yes, jsonschema's decided and explained no).
`SCHEMA_VERSION` changes only when the document's shape does; `READABLE_VERSIONS` are those
`read_result` accepts.

The `imported` block (a result converted from another benchmark's file, bench.imports) kept
version 1: a measured result's shape and what it must hold are unchanged (the schema still
requires everything of a result without `imported`), and a cellbench that predates the block
refuses an imported file naming the `imported` key rather than misreading it. Open-loop levels
(`request_rate` and `open_loop` in place of `concurrency`), `run_config.load` and `sweep` kept it
for the same reasons: a closed-loop result is as it was, and an older cellbench refuses an
open-loop one by the key it does not know.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import tempfile
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, TypeGuard

import jsonschema
import jsonschema_rs

from bench.base import clock
from bench.base.files import atomic_write
from bench.core.result.model import Result, Unfinished
from bench.core.schema import SCHEMA_PATH

SCHEMA_VERSION = 1
READABLE_VERSIONS = (1,)


def new_run_id(now: datetime | None = None) -> str:
    now = now or clock.now()
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class CellPaths:
    split_dir: Path
    framework: str
    run_id: str
    attempt: int = 1  # the n-th cell of this framework and run id in the folder: `-n` after the run id from 2 on

    @property
    def stem(self) -> str:
        return f"{self.framework}_{self.run_id}" + (f"-{self.attempt}" if self.attempt > 1 else "")

    @property
    def result(self) -> Path:
        return self.split_dir / f"{self.stem}.json"

    @property
    def requests(self) -> Path:
        return self.split_dir / f"{self.stem}.requests.jsonl"

    def server_log(self, label: str) -> Path:
        return self.split_dir / "logs" / f"{self.stem}_{label}.server.log"

    def taken(self) -> bool:
        """Whether a cell already wrote files under these names (a result, requests or a server log)."""
        logs = self.split_dir / "logs"
        return (self.result.exists() or self.requests.exists()
                or (logs.is_dir() and any(logs.glob(f"{self.stem}_*.server.log"))))


def cell_paths(results_root: Path, model: str, folder: str, split: str, framework: str, run_id: str) -> CellPaths:
    """A cell's files under `results_root/model/folder/split/`: `folder` is the machine's slug, or ""
    for SiliconBench's legacy tree (bench.host.machine.HostMachine.folder)."""
    return CellPaths(results_root / model / folder / split, framework, run_id)


def free_cell_paths(paths: CellPaths) -> CellPaths:
    """`paths`, or the first later attempt whose names no cell has used: a resume or a retry of the
    same run id never writes over the files of the attempt before it, a killed one's included."""
    attempt = paths.attempt
    while CellPaths(paths.split_dir, paths.framework, paths.run_id, attempt).taken():
        attempt += 1
    return CellPaths(paths.split_dir, paths.framework, paths.run_id, attempt)


def unfinished_block(levels_done: int) -> Unfinished:
    """The `unfinished` block of a result written while its cell still runs: this process, this
    host, now, and how many levels (with --rounds, level rounds) it holds."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "updated_at": clock.now_iso(),
            "levels_done": levels_done}


class UnwritableResults(Exception):
    """A file under the results folder could not be written: the folder is missing, read-only,
    not a folder, or its disk is full. `line` says where and why, in one line."""

    def __init__(self, path: Path, cause: OSError):
        super().__init__(f"{path}: {cause.strerror or cause}")
        self.path, self.cause = Path(path), cause

    def line(self, root: Path) -> str:
        """'results folder R cannot be written: No space left on device (ENOSPC) (writing F)'."""
        return f"results folder {root} cannot be written: {_cause(self.cause)} (writing {self.path})"


def _cause(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0)
    return f"{exc.strerror} ({name})" if exc.strerror and name else str(exc)


def results_folder_problem(root: Path) -> str | None:
    """Why no cell could write under `root`, found before anything runs, or None: a path that is
    (or runs through) something other than a folder, or a folder where no file can be written
    (read-only, no permission, no space). The check writes a small hidden file in `root`, or in its
    nearest existing parent when `root` is still to be created, and removes it. The line names the
    path and the cause."""
    root = Path(root)
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        kind = "a regular file" if existing.is_file() else "not a folder"
        return (f"results folder {root} is {kind}" if existing == root
                else f"results folder {root} cannot be created: {existing} is {kind}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".cellbench-write-check.", dir=existing)
        try:
            os.write(fd, b"cellbench checks that its results folder can be written\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        return (f"results folder {root} cannot be written: {_cause(exc)}" if existing == root
                else f"results folder {root} cannot be created in {existing}: {_cause(exc)}")
    return None


@cache
def result_schema() -> dict[str, Any]:
    """The result schema: its file as it is, the metric table's entries already in it
    (bench.core.schema.generate writes it; tests/core/test_schema_file.py fails when it is stale)."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return schema


@cache
def _validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(result_schema())  # once, not on every result
    return jsonschema.Draft202012Validator(result_schema())


@cache
def _quick() -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(result_schema())


def follows_schema(data: object) -> bool:
    """Whether `data` follows the result schema, as `jsonschema` decides it. jsonschema_rs says
    yes about 300 times sooner (30 us for a result of two levels, where jsonschema takes 9 ms);
    only where it says no (or meets a value JSON does not have) is jsonschema asked, so a no is
    always jsonschema's (tests/core/test_schema_validators.py checks the two agree). One yes is
    jsonschema_rs's alone: a tuple in memory passes as the list it is written as."""
    return _quick_yes(data) or _validator().is_valid(data)


def _quick_yes(data: object) -> bool:
    try:
        return _quick().is_valid(data)
    except ValueError:  # a value of no JSON type (a numpy integer, a Path): jsonschema decides
        return False


def validate(result: Any) -> None:
    """Raise `jsonschema.ValidationError` (the most relevant error, as `jsonschema.validate`
    chooses it) if `result` does not follow the result schema."""
    if _quick_yes(result):
        return
    error = jsonschema.exceptions.best_match(_validator().iter_errors(result))
    if error is not None:
        raise error


def write_json_atomic(path: Path, data: Any) -> None:
    """`data` as cellbench writes every JSON file (indent 1, a final newline), replaced atomically."""
    atomic_write(path, json.dumps(data, indent=1) + "\n")


def write_result(path: Path, result: Result) -> None:
    """Validate `result`, then write it: a result that breaks the schema is a bug of the code that
    assembled it, so it raises `jsonschema.ValidationError` and no file is left behind. A file
    that cannot be written (a full disk, a read-only or vanished folder) raises UnwritableResults."""
    validate(result)
    try:
        write_json_atomic(path, result)
    except OSError as exc:
        raise UnwritableResults(path, exc) from exc


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
    if not is_result(data):
        error = jsonschema.exceptions.best_match(_validator().iter_errors(data))  # as `validate` reports it
        where = "/".join(map(str, error.absolute_path)) or "top level"
        raise NotAResult(f"does not follow the result schema at {where}: {error.message}")
    try:
        datetime.fromisoformat(data["finished_at"])
    except ValueError as exc:
        raise NotAResult(f"finished_at is not a timestamp: {exc}") from exc
    return data


def is_result(data: object) -> TypeGuard[Result]:
    """Whether `data` follows the result schema: the one narrowing of a result read, as
    tests/core/test_result_model.py checks the schema against the Result TypedDicts."""
    return follows_schema(data)
