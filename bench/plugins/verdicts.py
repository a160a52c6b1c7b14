"""How a cell's verdict becomes a pytest outcome, and what the cell's record says about it.

`enforce` settles the cell with its CellOutcome. The pytest outcome is coarse (ok and degraded
pass, wrong-model / all-failed / failed / oom fail, skipped skips; --strict-verdicts fails
degraded and capped too); the fine verdict travels in the cell's CellRecord
(bench/plugins/transport.py). A fixture that finds during setup that the cell cannot run (the host
lock timed out) settles it the same way with `settle_before_call`, and its body never runs.
The fixtures that call these (`enforce_verdict`, `host_lock`) are in fixtures/; signals.py settles
an interrupted cell with `enforce`, html.py reads `cell_outcome`.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.core.metrics import audit_lines
from bench.core.result.model import NoResult, Result
from bench.core.verdicts import Verdict, dominant_error
from bench.host.machine import detect
from bench.plugins import transport
from bench.plugins.cells import cell_id_of
from bench.plugins.hooks import BENCHMARK, CellRecord
from bench.plugins.options import results_root, settings
from bench.reports.review import columns
from bench.run.cell import CellOutcome

CELL_OUTCOME = pytest.StashKey[CellOutcome]()
SETTLED = pytest.StashKey[CellOutcome]()  # decided during setup: the body is not run
IN_CALL = pytest.StashKey[bool]()  # the test's body has started


def enforce(item: pytest.Item, outcome: CellOutcome) -> None:
    item.stash[CELL_OUTCOME] = outcome
    transport.finish(item, cell_record(item, outcome))
    verdict, reason = outcome.verdict.verdict, outcome.verdict.reason
    if verdict is Verdict.SKIPPED:
        pytest.skip(reason)
    strict = settings(item.config).reporting.strict_verdicts
    failing = verdict.is_failure or (strict and verdict not in (Verdict.OK, Verdict.FIXED))
    if failing:
        where = f"\nresult: {outcome.result_path}" if outcome.result_path else ""
        pytest.fail(f"{verdict.value}: {reason}{where}", pytrace=False)


def cell_outcome(item: pytest.Item) -> CellOutcome | None:
    """The outcome `item`'s cell was settled with, on the process that ran it."""
    return item.stash.get(CELL_OUTCOME, None)


def settle_before_call(item: pytest.Item, outcome: CellOutcome) -> None:
    """Settle a test with `outcome` without running its body: its call phase reports `outcome`
    through the same path as a cell's verdict, so it is counted, journaled and in the HTML
    report. Called from inside a running body (a fixture requested there), it fails the test at once."""
    if item.stash.get(IN_CALL, False):
        pytest.fail(f"{outcome.verdict.verdict.value}: {outcome.verdict.reason}", pytrace=False)
    item.stash[SETTLED] = outcome


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    item.stash[IN_CALL] = True
    settled = item.stash.get(SETTLED, None)
    if settled is not None:  # raising here keeps pytest from running the body
        enforce(item, settled)


def cell_record(item: pytest.Item, outcome: CellOutcome) -> CellRecord:
    """What the journal, the HTML report and the terminal learn about the cell."""
    framework = outcome.result["framework"] if "levels" in outcome.result else None  # NoResult: {}
    cell_id = cell_id_of(item)
    where: dict[str, Any] = {}
    if cell_id is not None:  # a benchmark cell, not a plugin test's stand-in: it goes in the journal
        where = {"framework": cell_id[0], "split": cell_id[1], "model": settings(item.config).profile.results_name,
                 "machine": detect().slug, "machine_folder": detect().folder,
                 "results_root": str(results_root(item.config))}
    return CellRecord(
        kind=BENCHMARK,
        verdict=outcome.verdict.verdict.value,
        reason=outcome.verdict.reason,
        annotations=tuple(outcome.verdict.annotations),
        result_path=str(outcome.result_path) if outcome.result_path else None,
        evidence=_evidence(outcome.result),
        row=columns.row_data(outcome.result),
        framework_version=(framework["name"], framework["version"]) if framework else None,
        **where,
    )


def _evidence(cell_result: Result | NoResult) -> dict[str, Any]:
    """What the journal shows: the dominant error and the server logs of a failure, why the cell
    is suspicious (bench.run.cell compared it with the cell's previous result), the failure a
    `fixed` cell's adapter edit answered, and the lines of its levels' audits (bench.core.metrics.audits)."""
    if "levels" not in cell_result:  # NoResult: the cell wrote no result, so there is nothing to show
        return {"server_logs": []}
    result = cell_result
    evidence: dict[str, Any] = {"server_logs": [s["log"] for s in result.get("servers", []) if s.get("log")]}
    dominant = dominant_error(tuple(result["levels"]))
    if dominant:
        evidence["dominant_error"] = dominant
    suspicious = result["verdict"].get("suspicious")
    if suspicious:
        evidence["suspicious"] = suspicious
    if audits := audit_lines(result["levels"]):
        evidence["audits"] = audits
    fix = result["verdict"].get("fix")
    if fix:  # the journal's Auto-Fixes section
        evidence["fix"] = {**fix, "run_id": result["run_id"]}
    return evidence
