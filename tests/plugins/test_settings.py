"""The Settings a real session builds: each option's value in its record's field, parsed once, frozen."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench.base.defaults import (
    DEFAULT_DEGRADED_THRESHOLD,
    DEFAULT_LEVELS,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_REQUESTS,
    DEFAULT_WARMUP,
)
from bench.core.client_settings import ClientSettings
from bench.plugins.opts.settings import OPTIONS, RESOLVED, Settings
from bench.run.config import BudgetSettings, LoadSettings, ReportingSettings, ServerSettings

DUMP = """
import dataclasses
import json
from pathlib import Path

from bench.plugins.options import settings


def test_dump(request):
    s = settings(request.config)
    frozen = []
    for record in (s, s.load, s.server, s.client, s.budget, s.reporting):
        try:
            record.run_id = "changed"
        except dataclasses.FrozenInstanceError:
            frozen.append(True)
    Path("settings.json").write_text(json.dumps({
        "frozen": frozen, "concurrency": s.load.concurrency, "requests": s.load.requests, "warmup": s.load.warmup,
        "request_timeout_s": s.client.request_timeout_s, "skip_existing_s": s.budget.skip_existing_s,
        "keep_alive": s.client.keep_alive, "hang_s": s.budget.hang_s, "cell_budget_s": s.budget.cell_budget_s,
        "server_metrics_s": s.server.server_metrics_s, "degraded_threshold": s.reporting.degraded_threshold,
        "cell_budget_named": sorted(s.budget.cell_budget_named), "endpoint": s.server.endpoint, "run_id": s.run_id,
        "rounds": s.load.rounds, "table_from": s.eval.table_from, "gpu_pool": s.eval.gpu_pool,
        "markexpr": s.pytest.markexpr, "keyword": s.pytest.keyword}))
"""


def _settings(pytester: pytest.Pytester, *args: str) -> dict:
    pytester.makepyfile(test_dump=DUMP)
    pytester.runpytest("-p", "no:cacheprovider", *args).assert_outcomes(passed=1)
    return json.loads((pytester.path / "settings.json").read_text())


def test_defaults_are_the_declared_ones(pytester: pytest.Pytester):
    s = _settings(pytester)
    assert s["frozen"] == [True] * 6, "Settings and each of its records"
    assert (tuple(s["concurrency"]), s["requests"], s["warmup"], s["request_timeout_s"]) == (
        DEFAULT_LEVELS, DEFAULT_REQUESTS, DEFAULT_WARMUP, DEFAULT_REQUEST_TIMEOUT_S)
    assert s["degraded_threshold"] == DEFAULT_DEGRADED_THRESHOLD
    assert s["skip_existing_s"] is None and s["keep_alive"] is False and s["endpoint"] is None
    assert s["hang_s"] == {"chat": 30 * 60.0, "agent": 45 * 60.0}
    assert s["cell_budget_s"] == {"chat": 45 * 60.0, "agent": 90 * 60.0} and s["cell_budget_named"] == []
    assert (s["rounds"], s["table_from"], s["gpu_pool"]) == (1, "round1", None)
    assert s["run_id"]


def test_each_option_lands_parsed_in_its_field(pytester: pytest.Pytester):
    s = _settings(pytester, "--concurrency", "2,4", "--requests=7", "--warmup", "0", "--request-timeout", "9.5",
                  "--skip-existing", "2", "--keep-alive", "--hang-minutes", "chat=1", "--cell-budget", "agent=2m",
                  "--endpoint", "http://127.0.0.1:9/v1/", "--rounds", "3", "--table-from", "mean",
                  "--gpu-pool", "0,1", "--run-id", "r1", "--degraded-threshold", "0.5", "-m", "not agent", "-k", "dump")
    assert (s["concurrency"], s["requests"], s["warmup"], s["request_timeout_s"]) == ([2, 4], 7, 0, 9.5)
    assert s["skip_existing_s"] == 7200.0, "--skip-existing is hours; the field holds seconds"
    assert s["keep_alive"] is True and s["hang_s"] == {"chat": 60.0}
    assert s["cell_budget_named"] == ["agent"] and s["cell_budget_s"] == {"chat": 45 * 60.0, "agent": 120.0}
    assert s["degraded_threshold"] == 0.5
    assert s["endpoint"] == "http://127.0.0.1:9", "a trailing /v1/ is dropped"
    assert (s["rounds"], s["table_from"], s["gpu_pool"], s["run_id"]) == (3, "mean", [0, 1], "r1")
    assert (s["markexpr"], s["keyword"]) == ("not agent", "dump")


def test_server_metrics_is_on_every_2_s_off_or_seconds(pytester: pytest.Pytester):
    assert _settings(pytester)["server_metrics_s"] == 2.0
    assert _settings(pytester, "--server-metrics", "off")["server_metrics_s"] is None
    assert _settings(pytester, "--server-metrics=0.25")["server_metrics_s"] == 0.25


def test_the_later_of_keep_alive_and_its_negation_wins(pytester: pytest.Pytester):
    assert _settings(pytester, "--keep-alive", "--no-keep-alive")["keep_alive"] is False
    assert _settings(pytester, "--skip-existing")["skip_existing_s"] == 0.0, "alone: this run's results"


@pytest.mark.parametrize("args, line", [
    (("--rounds", "0"), "ERROR: --rounds takes a count >= 1, got 0"),
    (("--smoke", "0"), "ERROR: --smoke takes a sample count >= 1, got 0"),
    (("--skip-existing", "-1"), "ERROR: --skip-existing takes hours, 0 or more, got -1"),
    (("--host-lock-timeout", "-5"), "ERROR: --host-lock-timeout takes seconds, 0 or more, got -5"),
    (("--request-timeout", "0"), "ERROR: --request-timeout takes seconds, more than 0, got 0"),
    (("--server-metrics", "0"), "ERROR: --server-metrics takes on, off or the seconds between scrapes (more than 0), "
                                "got '0'"),
    (("--server-metrics", "yes"), "ERROR: --server-metrics takes on, off or the seconds between scrapes "
                                  "(more than 0), got 'yes'"),
])
def test_a_declared_check_is_the_options_own_usage_error(pytester: pytest.Pytester, args: tuple[str, ...], line: str):
    pytester.makepyfile(test_dump=DUMP)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [ln for ln in result.stderr.lines if ln.strip()] == [line]


def test_settings_are_a_frozen_dataclass():
    assert dataclasses.is_dataclass(Settings) and Settings.__dataclass_params__.frozen


RECORDS = {"": Settings, "load": LoadSettings, "server": ServerSettings, "client": ClientSettings,
           "budget": BudgetSettings, "reporting": ReportingSettings}
# Record fields no option of their own fills: servers listen on the loopback interface only, and
# the splits --cell-budget named come with its `budget.cell_budget_s`.
NOT_AN_OPTION = {"server.host", "budget.cell_budget_named"}


def test_each_option_fills_one_record_field_named_after_its_flag():
    """One name from flag to field: `--request-timeout` fills `client.request_timeout_s`, the unit
    added where the value has one and the flag's unit changed once, at parse (`--hang-minutes`:
    `budget.hang_s`). Only a field several options make together (`load.plan`) has a name of its own."""
    for option in OPTIONS:
        record, _, name = option.into.rpartition(".")
        assert name in {f.name for f in dataclasses.fields(RECORDS[record])}, f"{option.flag}: no field {option.into}"
        if len({o.name for o in OPTIONS if o.into == option.into}) > 1:
            continue
        stem = option.name.removesuffix("_minutes")
        assert name in (stem, f"{stem}_s", f"{stem}_bytes"), f"{option.flag} fills {option.into}"


def test_every_record_field_is_an_options_and_every_resolved_one_is_made_in_the_builder():
    filled = {option.into for option in OPTIONS}
    for record, cls in RECORDS.items():
        if record:
            fields = {f"{record}.{f.name}" for f in dataclasses.fields(cls)}
            assert fields - filled == {f for f in NOT_AN_OPTION if f.startswith(f"{record}.")}, record
    assert set(RESOLVED) <= filled
