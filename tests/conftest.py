"""Fixtures the suite's own tests share, and their default per-test timeout."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpcore  # noqa: F401  # see below
import pytest
import pytest_timeout

import adapters
from bench.base.paths import cache_root, host_lock_path
from bench.plugins.options import SETTINGS, settings
from bench.setup.installs.cache import NotInstalled, ensure_installed
from tests.support.busy import HOST_LOCK_WAIT_S
from tests.support.workers import HostBusy, host_shared, worker_cache

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

# The servers the suite starts compute on one thread each, unless the run's environment names a
# count. A CPU server's default (a thread per core, spinning while it waits for work) is right for
# a benchmark on an idle machine but pathological on a shared one: beside `stress-ng --cpu 2`,
# llama-server with its default 2 threads took 32x as long for the same requests, with one thread
# twice as long (docs/measurements.md). The tests check verdicts, bytes and plumbing, not speed,
# and the product keeps each framework's defaults. vLLM on CPU already keeps to one OpenMP thread
# on 2 cores (it reserves a core for its scheduler).
ONE_THREAD = {"LLAMA_ARG_THREADS": "1", "OMP_NUM_THREADS": "1"}
for _name, _value in ONE_THREAD.items():
    os.environ.setdefault(_name, _value)


HOST_LOCK_FLAG = "--host-lock-timeout"


def _names_the_flag(args: list[str]) -> bool:
    return any(arg.split("=")[0] == HOST_LOCK_FLAG for arg in args)


def pytest_configure(config: pytest.Config) -> None:
    """A test whose cell finds the host lock held fails after HOST_LOCK_WAIT_S, naming the holder,
    instead of waiting up to the product's hour (tests/support/busy.py): the suite's own cells get
    the bound here (its xdist workers with the options they are given), and every pytest session a
    test starts (a nested `pytest -m chat`, the sessions of `cellbench weekly`) through
    PYTEST_ADDOPTS, where a flag given later on its command line still wins. A run that names
    --host-lock-timeout itself has its value everywhere instead."""
    if hasattr(config, "workerinput"):
        config.stash[HOST_LOCK] = host_lock_path()
        config.stash[WORKER_CACHE] = worker_cache(config.workerinput["workerid"], cache_root())
        os.environ["CELLBENCH_CACHE"] = str(config.stash[WORKER_CACHE])
        return
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    if not _names_the_flag([*map(str, config.invocation_params.args), *shlex.split(addopts)]):
        config.option.host_lock_timeout = float(HOST_LOCK_WAIT_S)
        s = settings(config)
        bounded = dataclasses.replace(s.budget, host_lock_timeout_s=float(HOST_LOCK_WAIT_S))
        config.stash[SETTINGS] = dataclasses.replace(s, budget=bounded)
    if not _names_the_flag(shlex.split(addopts)):
        bound = settings(config).budget.host_lock_timeout_s
        os.environ["PYTEST_ADDOPTS"] = f"{addopts} {HOST_LOCK_FLAG} {bound:g}".strip()


# With `--dist loadgroup` (`make test`), a module's tests run on one worker, in order, so a
# module-scoped fixture (a nightly replay) is made once; modules that look at the same processes
# share a group: test_killed_run leaves an orphaned llama-server for its next session, which
# test_cells_llamacpp's leak check would take for one of its own. The Python servers' cells stay one
# group, one server at a time: transformers serve grew to 10-14 GB resident on the tiny model, and
# with two at once (the chat and agent cells spread over both workers) the kernel's OOM killer
# ended one mid-run on the 24 GiB machine.
# Modules with real servers go first (`make test` gives --no-loadscope-reorder: xdist would
# otherwise start the groups of most tests first), so the many short tests fill both workers at the
# end instead of one long module running alone. Each worker has a cache of its own and holds the host lock shared
# (tests/support/workers.py).
SAME_WORKER = {"tests/cells/test_killed_run.py": "llama-server-orphans",
               "tests/cells/test_cells_llamacpp.py": "llama-server-orphans"}
WORKER_CACHE = pytest.StashKey[Path]()
HOST_LOCK = pytest.StashKey[Path]()


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(WORKER_CACHE, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)  # the links go, never what they point to


@pytest.fixture(autouse=True)
def _host_shared_by_the_workers(request: pytest.FixtureRequest) -> Iterator[None]:
    """An xdist worker's integration test holds the real host lock shared (tests/support/workers.py)."""
    lock = request.config.stash.get(HOST_LOCK, None)
    if lock is None or request.node.get_closest_marker("integration") is None:
        yield
        return
    bound = settings(request.config).budget.host_lock_timeout_s
    with contextlib.ExitStack() as held:
        busy = None
        try:
            held.enter_context(host_shared(lock, bound, controller=os.getppid()))  # the controller: the worker's parent
        except HostBusy as exc:
            busy = str(exc)
        if busy is not None:
            pytest.fail(busy, pytrace=False)
        yield


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules = {item: item.path.relative_to(config.rootpath).as_posix() for item in items
               if TESTS_DIR in item.path.parents}
    for item, module in modules.items():
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(SAME_WORKER.get(module, module)))
    if config.getoption("dist", "no") == "loadgroup":
        heavy = {modules.get(item) for item in items if item.get_closest_marker("integration")}
        items.sort(key=lambda item: modules.get(item) not in heavy)  # stable: the order within each stays
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
