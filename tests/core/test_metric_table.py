"""The metric table (bench.core.metrics.table): each per-request distribution metric is declared
once, and the level's TypedDicts, the result schema, summarize_level and the reports all follow
it. Adding a metric is one row there (and its key in the table's TypedDicts, docs/metrics.md, and
the schema file regenerated): the last test adds one and follows it to every place a metric shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import get_type_hints

import jsonschema
import pytest

from bench.core.metrics import table
from bench.core.metrics.blocks import Level
from bench.core.metrics.stats.statistics import Stats
from bench.core.records import RequestRecord
from bench.core.result import files as result_module
from bench.core.result.files import result_schema, validate
from bench.core.schema import generate
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.markdown import write_report
from bench.reports.review import columns
from tests.reports.test_report import table as report_table
from tests.support.results import synthetic_result, write_cell

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
STATS_KEYS = set(get_type_hints(table.LevelStats)) - {"reasoning"}


def test_every_row_has_one_key_and_a_stats_block_in_the_typed_level():
    keys = [m.key for m in table.METRICS]
    assert len(keys) == len(set(keys)) and set(table.BY_KEY) == set(keys)
    assert set(keys) == STATS_KEYS
    hints = get_type_hints(Level)
    assert all(hints[k] is Stats for k in keys)
    # required in the TypedDict exactly when every level has it (imported ones too)
    assert table.RequiredStats.__required_keys__ == {m.key for m in table.METRICS if m.when == "always"}
    assert table.OptionalStats.__optional_keys__ == {m.key for m in table.METRICS if m.when != "always"}
    assert {m.key for m in table.METRICS if m.when == "always"} <= Level.__required_keys__
    assert {m.key for m in table.METRICS if m.when != "always"} <= Level.__optional_keys__


def test_every_row_names_its_formula_and_docs_define_it():
    docs = DOCS.read_text()
    for m in table.METRICS:
        assert m.of.__doc__ and "=" in m.of.__doc__, f"{m.key}: the per-request function states its formula"
        assert f"`{m.key}`" in docs, f"{m.key} is not in docs/metrics.md"
        assert m.over in ("successful", "sent") and m.when in ("always", "measured", "reasoning", "open_loop")


def test_the_schema_has_each_row_as_a_stats_block_required_as_its_when_says():
    schema = result_schema()
    level = schema["$defs"]["level"]
    measured = set(schema["else"]["properties"]["levels"]["items"]["required"])
    open_loop = next(set(b["required"]) for b in level["oneOf"] if "request_rate" in b["required"])
    for m in table.METRICS:
        assert level["properties"][m.key] == {"description": m.description, "$ref": "#/$defs/stats"}
        assert (m.key in level["required"]) == (m.when == "always")
        assert (m.key in measured) == (m.when == "measured")
        assert (m.key in open_loop) == (m.when == "open_loop")


def test_a_level_has_the_rows_present_for_its_kind():
    closed = synthetic_result()["levels"][0]
    every_level = {m.key for m in table.METRICS if m.when in ("always", "measured", "added")}
    assert {k for k in closed if k in table.BY_KEY} == every_level
    ordered = [k for k in closed if k in table.BY_KEY]
    assert ordered == [m.key for m in table.METRICS if m.key in closed]  # in the table's order


def thinking_time(r: RequestRecord) -> float | None:
    """Thinking time = t_first_answer - t_first_token (the reasoning before the answer)."""
    return None if r.t_first_answer is None or r.t_first_token is None else r.t_first_answer - r.t_first_token


EXTRA = table.Metric("thinking_ms", thinking_time, "Thinking", "ms", description="Thinking time, ms.",
                     when="added", report=table.Shown(("p50",)), review=".1f")


def regenerate_schema(monkeypatch, folder: Path) -> None:
    """The schema file as `python -m bench.core.schema.generate` writes it from the table as it is
    now, written under `folder` and read by bench.core.result.files in place of the committed one."""
    path = folder / "result.schema.json"
    assert generate.main([], target=path, docs_path=None) == 0
    monkeypatch.setattr(result_module, "SCHEMA_PATH", path)
    result_module.result_schema.cache_clear()
    result_module._validator.cache_clear()


@pytest.fixture
def extra_metric(monkeypatch, tmp_path) -> Iterator[table.Metric]:
    """The table with one more row, as a contributor would add it, and the schema file
    regenerated from it."""
    monkeypatch.setattr(table, "METRICS", (*table.METRICS, EXTRA))
    monkeypatch.setattr(table, "BY_KEY", {**table.BY_KEY, EXTRA.key: EXTRA})
    regenerate_schema(monkeypatch, tmp_path)
    yield EXTRA
    monkeypatch.undo()  # the committed schema file again, before the caches are emptied
    result_module.result_schema.cache_clear()
    result_module._validator.cache_clear()


def test_a_metric_added_to_the_table_reaches_the_level_the_schema_and_the_reports(extra_metric, monkeypatch, tmp_path):
    result = synthetic_result()
    level = result["levels"][0]
    assert "thinking_ms" in level and level["thinking_ms"]["n"] == level["successful"]
    assert set(level["thinking_ms"]["ci95"]) == {"p50", "p90", "p95", "p99"}  # its intervals came with the row
    validate(result)  # the regenerated schema took the row too
    bad = json.loads(json.dumps(result))
    bad["levels"][0]["thinking_ms"] = {"n": 1}
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    earlier = json.loads(json.dumps(result))
    del earlier["levels"][0]["thinking_ms"]
    validate(earlier)  # a result written before the row was added stays valid ("added")
    with monkeypatch.context() as m:  # as "measured", the schema would refuse every earlier result
        m.setattr(table, "METRICS", (*table.METRICS[:-1], replace(EXTRA, when="measured")))
        (tmp_path / "measured").mkdir()
        regenerate_schema(m, tmp_path / "measured")
        with pytest.raises(jsonschema.ValidationError, match="thinking_ms"):
            validate(earlier)
    result_module.result_schema.cache_clear()
    result_module._validator.cache_clear()

    path = write_cell(tmp_path / "results")
    report = write_report(path.parent, read_comparison(write_comparison(path.parent, machine="intelxeonprocessor")))
    rows = report_table(report.read_text(), "Concurrency 1")
    p50, ci = level["thinking_ms"]["p50"], level["thinking_ms"]["ci95"]["p50"]  # with its interval, as every p50
    assert rows["Thinking p50 (ms)"] == [f"{p50:.1f} [{ci['low']:.1f}, {ci['high']:.1f}]"]
    html = columns._level_table(result["levels"])
    assert "<th>Thinking p50 (ms)</th>" in html


def test_without_the_row_the_schema_refuses_its_key():
    result = synthetic_result()
    result["levels"][0]["thinking_ms"] = result["levels"][0]["ttft_ms"]
    with pytest.raises(jsonschema.ValidationError, match="thinking_ms"):
        validate(result)


def test_a_row_without_report_or_review_shows_in_neither(extra_metric, monkeypatch, tmp_path):
    hidden = replace(extra_metric, report=None, review=None)
    monkeypatch.setattr(table, "METRICS", (*table.METRICS[:-1], hidden))
    level = synthetic_result()["levels"][0]
    assert "thinking_ms" in level and "Thinking" not in columns._level_table([level])
    path = write_cell(tmp_path / "results")
    report = write_report(path.parent, read_comparison(write_comparison(path.parent, machine="intelxeonprocessor")))
    assert "Thinking" not in report.read_text()
