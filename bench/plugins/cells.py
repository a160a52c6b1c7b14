"""One test per (framework, split) cell: `test_cell[llamacpp-chat]`, marked `llamacpp` and `chat`.

Any test that takes the `cell_id` fixture argument is parametrized over the registered
adapters and SPLITS, so `-m chat`, `-m "llamacpp and agent"` and `-k` select cells. With
--endpoint, the server is one of unknown make: only the adapters that bind to an endpoint
(`takes_endpoint`) are parametrized, and a `-k` or `-m` that named another framework, leaving no
cell, says so in one line after collection instead of running nothing in silence. The session's
header names the folder the cells will write to, and what chose its model and machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

import adapters
from bench.base.defaults import SPLITS
from bench.host.machine import detect
from bench.plugins.options import results_root, settings

CELLS_DESELECTED = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[CELLS_DESELECTED] = False
    for name in adapters.registry():
        config.addinivalue_line("markers", f"{name}: framework {name}")


def pytest_report_header(config: pytest.Config) -> str:
    """Where the cells will write, and what chose its model and machine folders, before anything
    writes: a SiliconBench user's `confirm $RESULTS_DIR points where you intend`."""
    s, machine = settings(config), detect()
    where = results_root(config) / s.profile.results_name / machine.folder
    return (f"cellbench cells write to {where}/<split>/ (model {s.profile.name} from {s.model_source}, "
            f"{machine.where()})")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell_id" not in metafunc.fixturenames:
        return
    endpoint = settings(metafunc.config).server.endpoint
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


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    if items and any(cell_id_of(item) for item in items):
        items[0].config.stash[CELLS_DESELECTED] = True


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items: Sequence[pytest.Item]) -> str | None:
    """"--endpoint runs the `openai` cell only: `-k llamacpp` selected none; use -k openai" when the
    selection left no cell because the frameworks it names have no cells with --endpoint."""
    if not settings(config).server.endpoint or not config.stash.get(CELLS_DESELECTED, False):
        return None
    if any(cell_id_of(item) for item in items):
        return None
    registry = adapters.registry()
    standing = sorted(name for name, a in registry.items() if a.benchmark_cells and a.takes_endpoint)
    absent = [name for name, a in registry.items() if a.benchmark_cells and not a.takes_endpoint]
    chosen = settings(config).pytest
    for option, expression, keyword in (("-k", chosen.keyword, True), ("-m", chosen.markexpr, False)):
        if expression and any(_selects(expression, name, keyword) for name in absent):
            cells = " and ".join(f"`{name}`" for name in standing)
            return (f"--endpoint runs the {cells} cell{'s' if len(standing) > 1 else ''} only: `{option} "
                    f"{expression}` selected none; use {option} {standing[0]}")
    return None


def _selects(expression: str, framework: str, keyword: bool) -> bool:
    """Whether a `-k` (substring of a name, or a marker) or `-m` (a marker) expression would select
    a cell of `framework`, had it been parametrized."""
    names = [framework, *SPLITS]
    if keyword:
        names += [f"test_cell[{framework}-{split}]" for split in SPLITS]
    def matches(ident: str, /, **_: str | int | bool | None) -> bool:
        return any(ident.lower() in name.lower() if keyword else ident == name for name in names)

    try:
        return Expression.compile(expression).evaluate(matches)
    except SyntaxError:  # pytest reports a bad expression itself
        return False
