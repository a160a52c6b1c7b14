"""A cell's request sidecar, `<stem>.requests.jsonl`: every request, warm-up included, one JSON line
each, keyed by its level (and round).

The file is created new (never opened over an existing one: a resume or a retry gets names of its
own, bench.core.result.files.free_cell_paths) and each level's records are written in one go when the
level ends, then flushed and fsynced before the cell rewrites its result: a session killed in the
next level (SIGKILL: an OOM killer, a CI runner's hard stop) leaves every record of every finished
level on disk, whole. Nothing is written while a level runs, so the load generator's event loop
never waits on the disk (the cost per chunk is in docs/results.md). A file that cannot be written
raises bench.core.result.files.UnwritableResults.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from bench.core.records import RequestRecord
from bench.core.result.files import UnwritableResults


class RequestLog:
    """The open sidecar of one cell: `write_level` per finished level, closed on exit."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.records = 0  # written so far
        self._file: IO[str] | None = None

    def __enter__(self) -> RequestLog:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("x", encoding="utf-8")  # "x": never over another attempt's file
        except OSError as exc:
            raise UnwritableResults(self.path, exc) from exc
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as error:  # what a failed write left in the buffer
                if kind is None:
                    raise UnwritableResults(self.path, error) from error
            self._file = None

    def write_level(self, key: dict[str, Any], records: Iterable[RequestRecord]) -> None:
        """Append one level's records, each line `key` plus the record, and make them durable."""
        assert self._file is not None, "write_level on a closed RequestLog"
        text = "".join(json.dumps({**key, **record.to_json()}) + "\n" for record in records)
        try:
            self._file.write(text)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise UnwritableResults(self.path, exc) from exc
        self.records += text.count("\n")
