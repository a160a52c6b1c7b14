"""The plugin in real pytest sessions: verdicts become outcomes, categories and one summary line."""

from __future__ import annotations

import pytest

CELLS = """
import pytest
from bench.cell import CellOutcome
from bench.verdicts import CellVerdict, Verdict

@pytest.mark.parametrize("verdict", ["ok", "degraded", "wrong-model", "all-failed", "skipped"])
def test_cell(verdict, enforce_verdict):
    enforce_verdict(CellOutcome(CellVerdict(Verdict(verdict), f"because {verdict}"), None))
"""


EXPECTED = {"passed": 1, "failed": 2, "skipped": 1, "degraded": 1}


@pytest.fixture
def cells(pytester: pytest.Pytester):
    pytester.makepyfile(test_fake_cells=CELLS)
    return pytester


def test_verdicts_map_to_outcomes_and_categories(cells):
    result = cells.runpytest("-p", "bench.plugin", "-v")
    assert result.parseoutcomes() == EXPECTED
    result.stdout.fnmatch_lines(
        [
            "*test_cell?ok? OK*",
            "*test_cell?degraded? DEGRADED*",
            "*test_cell?wrong-model? WRONG-MODEL*",
            "*test_cell?all-failed? ALL-FAILED*",
            "*test_cell?skipped? SKIPPED (because skipped)*",
            "wrong-model: because wrong-model",
            "*cellbench verdicts: 1 ok, 1 degraded, 1 all-failed, 1 wrong-model, 1 skipped*",
            "WRONG-MODEL *test_cell?wrong-model? - Failed: wrong-model*",
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_strict_fails_degraded_cells(cells):
    result = cells.runpytest("-p", "bench.plugin", "--strict-verdicts", "-k", "degraded")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*degraded: because degraded*"])


def test_verdicts_travel_from_xdist_workers_to_the_controller(cells):
    result = cells.runpytest_subprocess("-p", "bench.plugin", "-n", "2")
    assert result.parseoutcomes() == EXPECTED
    result.stdout.fnmatch_lines(["*cellbench verdicts: 1 ok, 1 degraded, 1 all-failed, 1 wrong-model, 1 skipped*"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--concurrency", "1,x"], "*--concurrency takes comma-separated integers*"),
        (["--concurrency", "0"], "*--concurrency levels must be >= 1*"),
        (["--model", "no-such-model"], "*no-such-model*"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args, message):
    pytester.makepyfile(test_nothing="def test_nothing(): pass\n")
    result = pytester.runpytest("-p", "bench.plugin", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
