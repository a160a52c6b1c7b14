"""`run.log`: one eval run's story as it happens, for `tail -f` in a second terminal.

The session creates it first thing, with the run's folder and the precheck, and prints its path,
so the second terminal can follow from before any server starts.
Every row's stages (START, server ready, client running, PASS/FAIL with the table edit) and every
line its server and client print, each line prefixed with the row and its source. The stage
lines also go to the console through `say`; the servers' and clients' own output only to the
file (each round keeps its `server.log` and `client.log` too). Rows on xdist workers append to
the same file: each write is one whole line in append mode, so lines never interleave mid-line.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

RUN_LOG = "run.log"
FOLLOW_INTERVAL_S = 0.5


class RunLog:
    def __init__(self, path: Path, say: Callable[[str], None] | None = None):
        self.path = path
        self.say = say

    def _append(self, lines: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as log:
            for line in lines:
                log.write(line + "\n")
                log.flush()

    def note(self, lines: list[str]) -> None:
        """Lines of the whole run (its start, the precheck), in run.log only; the file exists after it."""
        stamp = time.strftime("%H:%M:%S")
        self._append([f"{stamp} {line}" for line in lines])

    def stage(self, row_id: str, text: str) -> None:
        """A stage of a row: in run.log and on the console."""
        line = f"{time.strftime('%H:%M:%S')} {row_id}: {text}"
        self._append([line])
        if self.say is not None:
            self.say(line)

    @contextlib.contextmanager
    def following(self, row_id: str, logs: dict[str, Path]) -> Iterator[None]:
        """Copy what is appended to each of `logs` (label -> file) into run.log while the block runs."""
        offsets = {label: 0 for label in logs}
        partial = {label: "" for label in logs}
        done = threading.Event()

        def copy_new() -> None:
            for label, path in logs.items():
                try:
                    with path.open("rb") as f:
                        f.seek(offsets[label])
                        data = f.read()
                except OSError:
                    continue
                offsets[label] += len(data)
                text = partial[label] + data.decode("utf-8", errors="replace")
                *lines, partial[label] = text.split("\n")
                if lines:
                    self._append([f"{row_id} {label} | {line}" for line in lines])

        def follow() -> None:
            while not done.wait(FOLLOW_INTERVAL_S):
                copy_new()

        thread = threading.Thread(target=follow, name=f"run.log {row_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(5)
            copy_new()
            self._append([f"{row_id} {label} | {rest}" for label, rest in partial.items() if rest])
