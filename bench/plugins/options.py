"""Every cellbench option: declared once, registered here, read once into `Settings`.

The benchmark cells (bench/plugins/cells.py, fixtures/cells.py) and the eval rows
(bench/plugins/eval.py) share options (`--model`, `--results-dir`, `--port`, `--install`,
`--host-lock-timeout`, the run id), so both read them from this module. Each option is declared
once (bench/plugins/opts): a cell option in `settings.OPTIONS`, naming the field of a `Settings`
record that holds its value; an eval row's as its `EvalSettings` field. `pytest_addoption`
registers every declaration, and `pytest_configure` turns the command line into one frozen
`Settings` on `config.stash[SETTINGS]` (bench.plugins.opts.build); a consumer reads
`settings(config).<record>.<field>` (`.server.port`), or `.eval.<field>`. `results_root` is the
one place `--results-dir` is resolved. Bad values are usage errors before any server starts, not
one failed test per cell later.
docs/options.md lists the options (`python -m bench.plugins.opts.reference > docs/options.md`).

The rootdir is decided again once the options are known (bench.plugins.opts.rootdir).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.base import paths
from bench.plugins.hooks import register_stashed, unregister_stashed
from bench.plugins.opts.build import GROUPS, RUN_ID_KEY, build
from bench.plugins.opts.rootdir import redecide_rootdir
from bench.plugins.opts.settings import Settings

__all__ = ["SETTINGS", "RUN_ID_KEY", "Settings", "redecide_rootdir", "results_root", "settings"]

SETTINGS = pytest.StashKey[Settings]()
XDIST_HOOKS = pytest.StashKey[object]()


def settings(config: pytest.Config) -> Settings:
    return config.stash[SETTINGS]


def results_root(config: pytest.Config) -> Path:
    """--results-dir (relative to where pytest was invoked), else <rootdir>/results; absolute
    (bench.base.paths.results_root, the rule the `cellbench` commands follow too)."""
    return paths.results_root(settings(config).results_dir, config.invocation_params.dir, config.rootpath)


def pytest_addoption(parser: pytest.Parser) -> None:
    for group, options in GROUPS:
        added_to = parser.getgroup(*group)
        for option in options:
            option.add_to(added_to)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    redecide_rootdir(early_config, parser, args)


@pytest.hookimpl(tryfirst=True)  # before every plugin that reads the settings in its own pytest_configure
def pytest_configure(config: pytest.Config) -> None:
    config.stash[SETTINGS] = build(config)
    if config.pluginmanager.hasplugin("xdist"):
        register_stashed(config, XDIST_HOOKS, _XdistRunId(), "cellbench-xdist-run-id")


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_stashed(config, XDIST_HOOKS)


class _XdistRunId:
    """Every worker gets the controller's run id, so one session writes one run."""

    def pytest_configure_node(self, node) -> None:
        node.workerinput[RUN_ID_KEY] = node.config.stash[SETTINGS].run_id
