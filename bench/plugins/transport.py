"""How a finished cell's record reaches the controller, where `pytest_cellbench_cell_finished` fires.

The test that runs a cell settles it with `finish(item, record)` (bench/plugins/verdicts.py for a
benchmark cell, fixtures/eval_rows.py for an eval row). When its call phase is reported, the
record goes on the TestReport as one declared attribute, `report.cellbench_cell`
(REPORT_ATTRIBUTE), holding `CellRecord.to_json()`. A report attribute is what crosses from an
xdist worker to the controller: xdist serialises reports with pytest's
`pytest_report_to_serializable`, which keeps every plain-data attribute. `report.user_properties`
would cross too, but junitxml writes each property's str() into its XML, which would put every
cell's evidence and HTML numbers there; so the record has its own attribute, and
`user_properties` carries only a benchmark cell's verdict (`cellbench_verdict`) for junitxml's
readers.

Only this module writes and reads the attribute. On the controller, `pytest_runtest_logreport`
(tryfirst: before pytest-html, which builds its rows trylast) turns it back into a CellRecord and
calls the hook, so the recorders implement the hook instead of reading reports. `record_of` is
for what must be decided per report on either side (the terminal's status letter).
"""

from __future__ import annotations

import pytest

from bench.plugins import hooks
from bench.plugins.hooks import BENCHMARK, CellRecord, register_stashed, unregister_stashed

REPORT_ATTRIBUTE = "cellbench_cell"
FINISHED = pytest.StashKey[CellRecord]()
CONTROLLER = pytest.StashKey[object]()


def finish(item: pytest.Item, record: CellRecord) -> None:
    """Settle `item`'s cell with `record`: it goes on the item's call report."""
    item.stash[FINISHED] = record


def finished(item: pytest.Item) -> CellRecord | None:
    return item.stash.get(FINISHED, None)


def record_of(report: pytest.TestReport) -> CellRecord | None:
    """The cell record a call report carries, on the worker or the controller; None for any other report."""
    data = getattr(report, REPORT_ATTRIBUTE, None)
    return CellRecord.from_json(data) if data and report.when == "call" else None


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hooks)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    record = finished(item)
    if record is not None and report.when == "call":
        setattr(report, REPORT_ATTRIBUTE, record.to_json())
        if record.kind == BENCHMARK:
            report.user_properties.append(("cellbench_verdict", record.verdict))
    return report


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        register_stashed(config, CONTROLLER, _Controller(config), "cellbench-transport")


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_stashed(config, CONTROLLER)


class _Controller:
    """Fires the hook once per finished cell, on the process that writes the session's files."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = record_of(report)
        if record is not None:
            self.config.hook.pytest_cellbench_cell_finished(config=self.config, nodeid=report.nodeid, cell=record)
