"""`launching`: a `bench.run.cell.Launcher` that can never leak a server.

A server joins the launcher's list right after `Popen`, before the readiness wait, so a timeout or
Ctrl-C during start still stops it; every server it started is stopped when the block ends. The
cells' `server_launcher` fixture (fixtures/servers.py), the eval rows that lease GPUs
(fixtures/eval_rows.py), `cellbench serve` and `cellbench perf compare --llama-server` start
their servers through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.run.config import Launcher
from bench.run.server.process import ServerProcess
from bench.setup.adapter import Adapter, ServeCommand
from bench.setup.profiles import ApiKey


@contextmanager
def launching() -> Iterator[Launcher]:
    """A `bench.run.cell.Launcher` for the block: every server it starts is stopped when the block ends."""
    started: list[ServerProcess] = []

    def launch(command: ServeCommand, adapter: Adapter, host: str, port: int, log_path: Path,
               memory_limit_bytes: int | None = None, budget_s: float | None = None,
               hang_s: float | None = None, api_key: ApiKey | None = None) -> ServerProcess:
        server = ServerProcess(command, host=host, port=port, ready_path=adapter.ready_path,
                               startup_timeout_s=adapter.startup_timeout_s, log_path=log_path,
                               memory_limit_bytes=memory_limit_bytes, api_key=api_key)
        started.append(server)
        server.start()
        try:
            server.wait_ready(budget_s=budget_s, stall_timeout_s=hang_s)
        except BaseException:
            server.stop()
            raise
        return server

    try:
        yield launch
    finally:
        for server in reversed(started):
            server.stop()
