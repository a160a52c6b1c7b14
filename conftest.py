"""Loads cellbench's pytest plugin and fixtures for the cells in bench/ and the tests in tests/.

pytester is here because pytest only honours `pytest_plugins` in the root conftest; the suite's
own plugin tests run real pytest sessions with it.
"""

pytest_plugins = ["bench.plugins.cells", "bench.plugins.eval", "bench.plugins.servers", "pytester"]
