"""Fixtures the suite's own tests share, and their default per-test timeout."""

from __future__ import annotations

from pathlib import Path

import httpcore  # noqa: F401  (see below)
import pytest
import pytest_timeout

import adapters
from bench.setup.installs import NotInstalled, ensure_installed

# Every test in tests/ gets this timeout unless it carries its own `timeout` marker or the run
# names one (--timeout, PYTEST_TIMEOUT, `timeout =` in an ini): a hung test then fails with
# pytest-timeout's message instead of using up CI's time. The slowest real cell the suite runs
# takes a few minutes on 2 busy cores; a test that may wait for another session's host lock
# carries a larger marker. Set here, not as `timeout =` in pytest.ini, because the ini is also the
# benchmark cells' (`pytest -m chat`), and a cell's budget is capped by its timeout: an ini
# default would cap every user's cell at 14 minutes.
DEFAULT_TIMEOUT_S = 900
# httpx imports httpcore on its first client. Were that first client made inside an in-process
# pytester session, pytester would drop httpcore from sys.modules when the session ends, a later
# import would load it again, and httpx would no longer recognise its exceptions (a refused
# connection escaping `except httpx.HTTPError`, as seen on an xdist worker): it is imported here first.
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
