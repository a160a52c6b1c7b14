"""A cell's wall-clock budget, and pytest-timeout's timeout as its backstop.

pytest-timeout kills a test at its timeout with nothing written. A cell therefore stops itself
earlier: its budget is --cell-budget for its split (by default the weekly run's 45 minutes for
chat, 90 for agent), capped by the test's timeout less TIMEOUT_MARGIN_S, the time cellbench keeps
to stop the server and write the result. A selected cell whose timeout is within that margin
would get no budget at all; unless --cell-budget names its split, that is a usage error when
collection finishes, before any server starts (under xdist on the controller, when a worker's
collection is reported: a worker cannot stop the session cleanly).
"""

from __future__ import annotations

import os

import pytest
import pytest_timeout

from bench.base.defaults import SPLITS
from bench.plugins.cells import cell_id_of
from bench.plugins.hooks import register_stashed, unregister_stashed
from bench.plugins.options import settings

TIMEOUT_MARGIN_S = 60.0
XDIST_HOOKS = pytest.StashKey[object]()


def cell_budget(item: pytest.Item) -> float | None:
    """The cell's budget in seconds: its split's, capped by the item's timeout less the margin.
    A timeout within the margin was refused at collection unless --cell-budget named the split;
    then that budget stands."""
    budget = _split_budget(item)
    timeout = _item_timeout(item)
    if timeout is None or timeout <= TIMEOUT_MARGIN_S:
        return budget
    backstop = timeout - TIMEOUT_MARGIN_S
    return backstop if budget is None else min(budget, backstop)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        register_stashed(config, XDIST_HOOKS, _XdistBudgetCheck(), "cellbench-xdist-budget")


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_stashed(config, XDIST_HOOKS)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected cell whose timeout leaves it no budget is a usage error."""
    if hasattr(session.config, "workerinput"):
        return
    for item in session.items:
        cell = "cell_id" in getattr(item, "fixturenames", ())
        timeout = _item_timeout(item) if cell and not _given(item) else None
        if timeout is not None and timeout <= TIMEOUT_MARGIN_S:
            if item.get_closest_marker("timeout") is not None:
                raise pytest.UsageError(_no_budget_left(f"@pytest.mark.timeout({timeout:g}) on {item.nodeid}"))
            raise pytest.UsageError(_no_budget_left(_session_timeout(session.config)[1]))


class _XdistBudgetCheck:
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        """pytest_collection_finish's check, on the controller, before any cell is scheduled. It sees
        node ids only, so a `timeout` marker's value is not checked here."""
        timeout, source = _session_timeout(node.config)
        short = timeout is not None and timeout <= TIMEOUT_MARGIN_S
        given = settings(node.config).budget.cell_budget_named
        if short and any(f"-{split}]" in nodeid and split not in given
                         for nodeid in ids if "test_cell[" in nodeid for split in SPLITS):
            raise pytest.UsageError(_no_budget_left(source))


def _split_budget(item: pytest.Item) -> float | None:
    """The budget of the item's split (--cell-budget's, else the default); None when not a cell."""
    cell = cell_id_of(item)
    return settings(item.config).budget.cell_budget_s.get(cell[1]) if cell else None


def _given(item: pytest.Item) -> bool:
    """Whether --cell-budget named the item's split."""
    cell = cell_id_of(item)
    return cell is not None and cell[1] in settings(item.config).budget.cell_budget_named


def _session_timeout(config: pytest.Config) -> tuple[float | None, str]:
    """pytest-timeout's timeout for every test (--timeout, else $PYTEST_TIMEOUT, else the ini's
    `timeout`), as pytest-timeout resolves it, and where it came from."""
    if not config.pluginmanager.hasplugin("timeout"):
        return None, ""
    timeout = pytest_timeout.get_env_settings(config).timeout
    if timeout is None:
        return None, ""
    if settings(config).pytest.timeout is not None:
        source = f"--timeout={timeout:g}"
    elif os.environ.get("PYTEST_TIMEOUT"):
        source = f"PYTEST_TIMEOUT={timeout:g}"
    else:
        source = f"the ini setting timeout = {timeout:g}"
    return timeout, source


def _no_budget_left(source: str) -> str:
    return (f"{source} leaves a cell no budget: cellbench keeps {TIMEOUT_MARGIN_S:g} s of "
            f"pytest-timeout's timeout to stop the server and write the result; pass a timeout above "
            f"{TIMEOUT_MARGIN_S:g} s (e.g. --timeout=5400), or --cell-budget SECONDS to set the budget yourself")


def _item_timeout(item: pytest.Item) -> float | None:
    """pytest-timeout's timeout for `item`, resolved by pytest-timeout itself (a `timeout` marker,
    else --timeout, $PYTEST_TIMEOUT, the ini's `timeout`); None when the item has none."""
    if not item.config.pluginmanager.hasplugin("timeout"):
        return None
    timeout = pytest_timeout._get_item_settings(item).timeout
    return timeout if timeout is not None and timeout > 0 else None
