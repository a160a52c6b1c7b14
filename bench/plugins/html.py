"""The pytest-html report's cellbench parts (bench.reports.review.columns renders them).

Active with pytest-html only. On the process that ran a cell, the cell's extras (summary, plot,
result JSON, server log tails, request timelines) are built when its call report is made: only that process has
the cell's files, so under xdist the extras travel on the report as pytest-html's own
`report.extras`. On the controller, `HtmlReport` implements `pytest_cellbench_cell_finished`:
it keeps each benchmark cell's record for the cell's row (the verdict and numbers columns,
filled when pytest-html builds the row, after the hook has fired) and adds each framework's
version to the environment table; the run id, the machine and the model go there when the
session is configured. The session's run id is "this run" of each row's standing
(bench.reports.standing): a result --skip-existing kept from another run is marked so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.host.machine import detect
from bench.plugins.hooks import BENCHMARK, CellRecord, register_stashed, unregister_stashed
from bench.plugins.options import settings
from bench.plugins.transport import finished
from bench.plugins.verdicts import cell_outcome
from bench.reports.review import columns
from bench.reports.review import summary as review_summary
from bench.reports.timeline import svg as timeline_svg

HTML_REPORT = pytest.StashKey["HtmlReport"]()


def html_path(config: pytest.Config) -> Path | None:
    """Where pytest-html writes its report (resolved as pytest-html does), or None without --html."""
    html = settings(config).pytest.htmlpath
    return Path.cwd() / Path(os.path.expandvars(html)).expanduser() if html else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    cell, outcome = finished(item), cell_outcome(item)
    if report.when == "call" and cell is not None and outcome is not None and html_path(item.config) is not None:
        report.extras = [*getattr(report, "extras", []), *columns.extras_for(cell.to_json(), outcome.result),
                         *_timelines(cell.result_path, outcome.result)]
    return report


def _timelines(result_path: str | None, result: object) -> list[dict]:
    """The cell's request timelines as a pytest-html extra (bench.reports.timeline.svg), if it logged requests."""
    from pytest_html import extras  # only called when pytest-html is active

    drawn = timeline_svg.timelines_html(result_path, result)
    return [] if drawn is None else [extras.html(drawn)]


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("html"):
        return
    register_stashed(config, HTML_REPORT, HtmlReport(config), "cellbench-html")
    s = settings(config)
    columns.add_session_facts(config, run_id=s.run_id, machine=detect().to_json(), model=s.profile.results_name)


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_stashed(config, HTML_REPORT)


class HtmlReport:
    """pytest-html's hooks, on the controller."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.cells: dict[str, CellRecord] = {}  # node id -> its benchmark cell's record

    def pytest_cellbench_cell_finished(self, nodeid: str, cell: CellRecord) -> None:
        if cell.kind != BENCHMARK:
            return
        self.cells[nodeid] = cell
        if cell.framework_version:
            columns.add_framework_version(self.config, *cell.framework_version)

    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str],
                                   session: pytest.Session) -> None:
        cells = [cell.to_json() for cell in self.cells.values()]
        prefix.append(review_summary.session_summary_html(cells, settings(self.config).run_id))

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = columns.header_cells()  # after Result and Test

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        cell = self.cells.get(report.nodeid) if report.when == "call" else None
        cells[2:2] = columns.row_cells(cell.to_json() if cell else None, settings(self.config).run_id)
