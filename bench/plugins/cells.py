"""One test per (framework, split) cell: `test_cell[llamacpp-chat]`, marked `llamacpp` and `chat`.

Any test that takes the `cell_id` fixture argument is parametrized over the registered
adapters and SPLITS, so `-m chat`, `-m "llamacpp and agent"` and `-k` select cells. With
--endpoint, the server is one of unknown make: only the adapters that bind to an endpoint
(`takes_endpoint`) are parametrized.
"""

from __future__ import annotations

import pytest

import adapters
from bench.plugins.options import SPLITS, settings


def pytest_configure(config: pytest.Config) -> None:
    for name in adapters.registry():
        config.addinivalue_line("markers", f"{name}: framework {name}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell_id" not in metafunc.fixturenames:
        return
    endpoint = settings(metafunc.config).endpoint
    names = sorted(name for name, a in adapters.registry().items()
                   if a.benchmark_cells and (a.takes_endpoint or not endpoint))
    params = [
        pytest.param((name, split), id=f"{name}-{split}",
                     marks=[getattr(pytest.mark, split), getattr(pytest.mark, name)])
        for name in names
        for split in SPLITS
    ]
    metafunc.parametrize("cell_id", params)


def cell_id_of(item: pytest.Item) -> tuple[str, str] | None:
    """The (framework, split) of a benchmark cell; None for any other test (a plugin test's stand-in)."""
    return item.callspec.params.get("cell_id") if hasattr(item, "callspec") else None
