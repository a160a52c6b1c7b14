"""Like with like on the plots (docs/results.md): a figure that puts frameworks side by side whose
runs' request settings differ marks each framework's label with the mark of its settings and names
the differing settings under the figure; a figure of runs alike, or of one framework, says nothing.
The figures are read as matplotlib objects (their legend, tick labels and note), not as pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from bench.core.result.files import read_result
from bench.reports import drawing, plots
from bench.reports.comparison import read_comparison, write_comparison
from tests.support.results import cell_dir, put, variant, write_cell

EOS = '{"ignore_eos": true}'


@pytest.fixture
def drawn(tmp_path, monkeypatch) -> dict[str, Figure]:
    """llamacpp at c=1, 2 and vllm at c=1, 2, 4 with ignore_eos: every figure of the report, by file name."""
    template = read_result(write_cell(tmp_path / "cell"))
    d = cell_dir(tmp_path / "results", template)
    put(d, variant(template, run_id="20300101T000000Z-aaaa"))
    eos = variant(template, framework="vllm", run_id="20300101T000000Z-aaaa", levels=[1, 2, 4])  # the same run
    eos["run_config"]["request_extras"] = {"ignore_eos": True}
    put(d, eos)
    figures: dict[str, Figure] = {}

    def keep(fig: Figure, path: Path) -> Path:
        figures[path.name] = fig
        return path

    monkeypatch.setattr(plots, "save", keep)
    plots.write_plots(read_comparison(write_comparison(d, machine=template["machine"]["slug"])), d)
    return figures


def _note(fig: Figure) -> str:
    label: Any = getattr(fig, "_supxlabel", None)
    return label.get_text().replace("\n", " ") if label is not None else ""


def test_a_throughput_plot_of_frameworks_with_different_ignore_eos_marks_them_and_says_why(drawn):
    fig = drawn[plots.THROUGHPUT_PNG]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["llamacpp †", "vllm ‡"]
    note = _note(fig)
    assert note.startswith("Not like with like: levels, request_extras differ.")
    assert f"‡ vllm: levels=[1, 2, 4]; request_extras={EOS}" in note and "† llamacpp: levels=[1, 2]; " in note


def test_a_latency_plot_compares_only_the_frameworks_at_its_level(drawn):
    c1 = drawn[plots.latency_png(1)]
    # "*": no sidecar was copied, so the boxes are the stats blocks' summaries
    assert [t.get_text() for t in c1.axes[0].get_xticklabels()] == ["llamacpp †*", "vllm ‡*"]
    assert "request_extras" in _note(c1)
    c4 = drawn[plots.latency_png(4)]  # vllm alone: nothing side by side, nothing to mark
    assert [t.get_text() for t in c4.axes[0].get_xticklabels()] == ["vllm*"] and _note(c4) == ""


def test_runs_alike_get_no_marks_and_the_same_settings_share_a_mark():
    base: Any = {"levels": [1], "request_extras": {}}
    assert drawing.unlike({"a": base, "b": dict(base)}) == drawing.Unlike({}, None)
    found = drawing.unlike({"a": base, "b": dict(base), "c": {**base, "unique_prompts": True}})
    assert found.marks == {"a": "†", "b": "†", "c": "‡"}
    assert found.note == ('Not like with like: unique_prompts differ. † a, b: unique_prompts="missing" '
                          "· ‡ c: unique_prompts=true")
    assert drawing.marked("c", found, "c, imported (SiliconBench)") == "c, imported (SiliconBench) ‡"
