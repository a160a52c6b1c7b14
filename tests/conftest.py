"""Fixtures the suite's own tests share, and their default per-test timeout."""

from __future__ import annotations

from pathlib import Path

import httpcore  # noqa: F401  # see below
import pytest
import pytest_timeout

import adapters
from bench.setup.installs.cache import NotInstalled, ensure_installed

# Every test in tests/ gets this timeout unless it carries its own `timeout` marker or the run
# names one (--timeout, PYTEST_TIMEOUT, `timeout =` in an ini): a hung test then fails with
# pytest-timeout's message instead of using up CI's time. The slowest real cell the suite runs
# takes a few minutes on 2 busy cores; a test that may wait for another session's host lock
# carries a larger marker. Set here, not as `timeout =` in pytest.ini, because the ini is also the
# benchmark cells' (`pytest -m chat`), and a cell's budget is capped by its timeout: an ini
# default would cap every user's cell at 14 minutes.
DEFAULT_TIMEOUT_S = 900

# httpx maps httpcore's exceptions to its own through a table it fills on first use. A pytester
# run in this process that first imports httpcore drops that module when it ends, and the table
# then holds classes no later httpcore raises: a refused connection escapes as httpcore's
# ConnectError instead of httpx's, and readiness polls fail. Imported here, before any such run,
# httpcore is never dropped.
TESTS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if pytest_timeout.get_env_settings(config).timeout is not None:
        return  # the run chose a timeout for every test
    for item in items:
        if item.get_closest_marker("timeout") is None and TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT_S))


@pytest.fixture(scope="session")
def llama_server() -> str:
    """The cached llama-server binary (`make test` builds it first on a fresh machine)."""
    try:
        return ensure_installed(adapters.get("llamacpp").recipe, allow_install=False).executable("llama-server")
    except NotInstalled as exc:
        pytest.fail(f"integration tests need llama-server: {exc}")
