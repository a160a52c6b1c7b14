"""Loads cellbench's pytest plugins for the cells in bench/ and the tests in tests/: the engine's
in bench/plugins/, the fixtures a cell or an eval row takes in fixtures/.

The same modules are pytest11 entry points (pyproject.toml), under the same names, so an
installed cellbench loads them once either way. pytester is here because pytest only honours
`pytest_plugins` in the root conftest; the suite's own plugin tests run real pytest sessions with it.
"""

pytest_plugins = [
    "bench.plugins.options",
    "bench.plugins.budget",
    "bench.plugins.transport",
    "bench.plugins.cells",
    "bench.plugins.verdicts",
    "fixtures.cells",
    "fixtures.servers",
    "bench.plugins.signals",
    "bench.plugins.recorder",
    "bench.plugins.html",
    "bench.plugins.eval",
    "fixtures.eval_rows",
    "pytester",
]
