"""A level figure (bench.core.figures) is one declaration, and everything follows it: a figure
planted in the registry, as a contributor's new module would be, reaches the level, the rounds,
the regenerated schema, REPORT.md, the HTML review, comparison.csv, the crosswalk and the docs'
generated tables, and a declaration that would leave one of them wrong is refused."""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Iterator
from typing import Annotated, TypedDict

import jsonschema
import pytest

from bench.core import crosswalk, figures
from bench.core.crosswalk import TOOLS
from bench.core.crosswalk.entry import none
from bench.core.figures.declare import Doc, LevelFigure, Row, by_field, median, total
from bench.core.level_run import LevelRun
from bench.core.result import files as result_module
from bench.core.result.files import validate
from bench.core.rounds import combine_rounds
from bench.core.schema import docs, generate
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.csv_export import comparison_csv
from bench.reports.markdown import write_report
from bench.reports.review import columns
from tests.core.test_metric_table import regenerate_schema
from tests.reports.test_report import table as report_table
from tests.support.results import synthetic_result, write_cell


class OutputSize(TypedDict):
    mean_tokens: Annotated[float | None, Doc("Mean output tokens of a successful request; null without one.")]
    requests: Annotated[int, Doc("Successful requests it is taken over.")]


def output_size(run: LevelRun) -> OutputSize | None:
    ok = [r for r in run.records if r.ok]
    return {"mean_tokens": statistics.fmean(r.output_tokens for r in ok) if ok else None, "requests": len(ok)}


ROWS = (Row("mean_tokens", "Output size", "tokens", digits=2),)
FIGURE = LevelFigure(
    "output_size", OutputSize, "How long the answers were: output tokens per successful request.",
    measure=output_size, pool=by_field({"mean_tokens": median, "requests": total}), rows=ROWS,
    peers={tool: (none("output_size.mean_tokens", "no such figure", "its source"),) for tool in TOOLS})


@pytest.fixture
def planted(monkeypatch, tmp_path) -> Iterator[LevelFigure[OutputSize]]:
    """The registry with the figure in it, as a module of bench/core/figures/ would put it, and the
    schema file regenerated from it."""
    monkeypatch.setattr(figures, "FIGURES", (*figures.FIGURES, FIGURE))
    regenerate_schema(monkeypatch, tmp_path)
    yield FIGURE
    monkeypatch.undo()
    result_module.result_schema.cache_clear()
    result_module._validator.cache_clear()


def test_a_planted_figure_is_measured_in_each_level_and_checked_by_the_regenerated_schema(planted):
    result = synthetic_result()
    for level in result["levels"]:
        block = level.get("output_size")
        assert block == {"mean_tokens": pytest.approx(level["output_tokens_total"] / level["successful"]),
                         "requests": level["successful"]}
    validate(result)
    wrong = json.loads(json.dumps(result))
    wrong["levels"][0]["output_size"]["mean_tokens"] = "many"
    with pytest.raises(jsonschema.ValidationError, match="many"):
        validate(wrong)
    extra = json.loads(json.dumps(result))
    extra["levels"][0]["output_size"]["median_tokens"] = 3
    with pytest.raises(jsonschema.ValidationError, match="median_tokens"):
        validate(extra)  # exactly its declared fields
    earlier = json.loads(json.dumps(result))
    for level in earlier["levels"]:
        del level["output_size"]
    validate(earlier)  # a result written before the figure stays valid


def test_without_the_declaration_the_schema_refuses_the_key():
    result = synthetic_result()
    result["levels"][0]["output_size"] = {"mean_tokens": 1.0, "requests": 1}
    with pytest.raises(jsonschema.ValidationError, match="output_size"):
        validate(result)


def test_rounds_pool_the_figure_as_declared(planted):
    rounds = [dict(level, round=i + 1) for i, level in enumerate(synthetic_result()["levels"][:3])]
    combined = combine_rounds(rounds)
    means = [lv["output_size"]["mean_tokens"] for lv in rounds]
    assert combined["output_size"] == {"mean_tokens": statistics.median(means),
                                       "requests": sum(lv["successful"] for lv in rounds)}


def test_reports_csv_and_review_show_its_rows(planted, tmp_path):
    path = write_cell(tmp_path / "results")
    comparison = read_comparison(write_comparison(path.parent, machine="intelxeonprocessor"))
    level = json.loads(path.read_text())["levels"][0]
    rows = report_table(write_report(path.parent, comparison).read_text(), "Concurrency 1")
    assert rows["Output size (tokens)"] == [f"{level['output_size']['mean_tokens']:.2f}"]
    csv_rows = [r for r in csv.DictReader(io.StringIO(comparison_csv([comparison])))
                if r["metric"] == "output_size.mean_tokens"]
    assert len(csv_rows) == len(json.loads(path.read_text())["levels"])
    assert csv_rows[0]["unit"] == "tokens" and float(csv_rows[0]["value"]) == pytest.approx(
        level["output_size"]["mean_tokens"])
    assert "<th>output size (tokens)</th>" in columns._level_table([level])


def test_a_level_without_the_figure_shows_no_row(planted, tmp_path):
    level = synthetic_result()["levels"][0]
    del level["output_size"]
    assert "output size" not in columns._level_table([level])


def test_the_crosswalk_and_the_docs_tables_list_its_rows(planted):
    assert crosswalk.KEYS[-1] == "output_size.mean_tokens"
    assert crosswalk.peer_name("aiperf", "output_size.mean_tokens") is None
    assert "| `output_size.mean_tokens` | no equivalent |" in docs.crosswalk_summary()
    text = docs.level_figures()
    assert "### `output_size`" in text and "| `mean_tokens` | number or null |" in text
    assert "Output size (tokens)" in text


def test_the_shipped_schema_and_docs_are_what_the_declarations_give():
    assert generate.main(["--check"]) == 0


def test_a_declaration_that_would_leave_a_surface_wrong_is_refused():
    with pytest.raises(ValueError, match="lacks"):
        LevelFigure("x", OutputSize, "", by_field({}), measure=output_size, rows=(Row("p50", "P50", "tokens"),),
                    peers={})
    with pytest.raises(ValueError, match="peers"):
        LevelFigure("x", OutputSize, "", by_field({}), measure=output_size, rows=ROWS, peers={"vllm": ()})
    with pytest.raises(ValueError, match="one per row"):
        LevelFigure("x", OutputSize, "", by_field({}), measure=output_size, rows=ROWS,
                    peers={tool: () for tool in TOOLS})
    with pytest.raises(ValueError, match="one of them"):  # measured from the client and from the server's watch
        LevelFigure("x", OutputSize, "", by_field({}), measure=output_size, watch=lambda seen: None, rows=())
    with pytest.raises(ValueError, match="one of them"):  # from nowhere
        LevelFigure("x", OutputSize, "", by_field({}), rows=())


def test_a_module_of_the_package_is_found_and_one_without_a_figure_is_refused(monkeypatch, tmp_path):
    (tmp_path / "zz_size.py").write_text(f"from {__name__} import FIGURE\n")
    monkeypatch.setattr(figures, "__path__", [*figures.__path__, str(tmp_path)])
    assert figures._declared()[-1] is FIGURE
    (tmp_path / "zz_bare.py").write_text("X = 1\n")
    with pytest.raises(TypeError, match="zz_bare declares no FIGURE"):
        figures._declared()
