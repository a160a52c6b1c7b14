"""A pytest plugin that holds a cellbench session at one known moment until the test that runs it
lets go, so that a test can act at that moment on any host, fast or slow (never a sleep).

`-p tests.support.hold` with `CELLBENCH_TEST_HOLD=<folder>`, and `CELLBENCH_TEST_HOLD_AT`:

- `cell` (the default): when a benchmark cell's record has been logged
  (`pytest_cellbench_cell_finished`, after every other implementation): the cell's result is
  final, its verdict line printed and its journal entry written; its servers still run.
- `teardown`: when the cell's teardown has been logged: its servers are stopped, and nothing of the
  session writes until its closing work (the reports, the journal's last state).

There the session touches `<folder>/holding` and waits until `<folder>/release` exists.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

HOLD_ENV = "CELLBENCH_TEST_HOLD"
HOLD_AT_ENV = "CELLBENCH_TEST_HOLD_AT"


def holding(folder: Path) -> Path:
    """The file the session touches when it holds."""
    return folder / "holding"


def release(folder: Path) -> None:
    (folder / "release").touch()


def _hold() -> None:
    folder = Path(os.environ[HOLD_ENV])
    holding(folder).touch()
    while not (folder / "release").exists():
        time.sleep(0.02)


@pytest.hookimpl(trylast=True)
def pytest_cellbench_cell_finished(config: pytest.Config, nodeid: str, cell) -> None:
    if os.environ.get(HOLD_AT_ENV, "cell") == "cell":
        _hold()


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get(HOLD_AT_ENV) == "teardown" and report.when == "teardown" and "test_cell[" in report.nodeid:
        _hold()
