"""cellbench's own pytest hook, and the record it carries.

`pytest_cellbench_cell_finished` fires once per finished cell, on the process that owns the
session's files (the xdist controller, or the only process without xdist), after the cell's
call phase has been reported. The journal recorder (bench/plugins/recorder.py), the pytest-html
wiring (bench/plugins/html.py) and the eval recorder (bench/plugins/eval_rows/recorder.py)
implement it; how the record reaches the controller is bench/plugins/transport.py's business.

It also holds how a plugin module registers its per-session hook object (`register_stashed`,
`unregister_stashed`). It is never registered as a plugin itself: bench/plugins/transport.py
passes it to `pluginmanager.add_hookspecs`, which reads every `pytest_*` function here as a
specification.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import pytest

P = TypeVar("P")

BENCHMARK = "cell"  # a (framework, split) benchmark cell, bench/test_cells.py
EVAL = "eval"  # an eval row, bench/test_eval.py


@dataclass(frozen=True)
class CellRecord:
    """What one finished cell reports: plain JSON-able values, so it can cross from an xdist
    worker to the controller (`to_json` / `from_json`).

    A benchmark cell fills the verdict fields, the numbers of its HTML row (`row`, from
    bench.reports.review.columns.row_data) and, when it ran as a real cell rather than a test's
    stand-in, where its journal lives (`model`, `machine`, `results_root`). An eval row fills
    `eval_row` (its id) and `eval_run` (bench.eval.row.RowRun.to_json()); its verdict is the
    row's status (`ok`, `fail`, `skipped`)."""

    kind: str  # BENCHMARK or EVAL
    verdict: str  # a bench.core.verdicts.Verdict value for a benchmark cell
    reason: str = ""
    framework: str | None = None
    split: str | None = None
    annotations: tuple[str, ...] = ()
    result_path: str | None = None  # the result file the cell wrote or kept
    evidence: dict[str, Any] = field(default_factory=dict)  # dominant error, server logs, why suspicious
    row: dict[str, Any] = field(default_factory=dict)  # the HTML row's numbers
    framework_version: tuple[str, str] | None = None  # (framework name, version) from the result
    model: str | None = None
    machine: str | None = None
    machine_folder: str | None = None  # its folder under <model>/: the slug, or "" (SiliconBench's legacy tree)
    results_root: str | None = None
    eval_row: str | None = None
    eval_run: dict[str, Any] | None = None

    @property
    def journaled(self) -> bool:
        """A real benchmark cell: it has a journal entry (a plugin test's stand-in has none)."""
        where = (self.framework, self.split, self.model, self.machine, self.results_root)
        return self.kind == BENCHMARK and all(where)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["annotations"] = list(self.annotations)
        data["framework_version"] = list(self.framework_version) if self.framework_version else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellRecord:
        version = data.get("framework_version")
        return cls(**{**data, "annotations": tuple(data.get("annotations") or ()),
                      "framework_version": tuple(version) if version else None})


@pytest.hookspec(firstresult=False)
def pytest_cellbench_cell_finished(config: pytest.Config, nodeid: str, cell: CellRecord) -> None:
    """A cell (`nodeid`) finished with `cell`. Called on the controller only, once per cell, in the
    order the cells finished; every implementation sees it (the results are ignored)."""


def register_stashed(config: pytest.Config, key: pytest.StashKey[P], plugin: P, name: str) -> P:
    """Registers `plugin`'s hooks for this session and keeps it under `key`, for
    `unregister_stashed` to find at `pytest_unconfigure`."""
    config.stash[key] = plugin
    config.pluginmanager.register(plugin, name)
    return plugin


def unregister_stashed(config: pytest.Config, key: pytest.StashKey[Any]) -> None:
    """Takes the session's hook object off again, so that the next session in this process
    (pytester runs many) starts without it."""
    plugin = config.stash.get(key, None)
    if plugin is not None:
        config.pluginmanager.unregister(plugin)
        del config.stash[key]
