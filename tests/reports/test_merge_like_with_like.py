"""Like with like in the merged report: where its cells ran with different request settings,
MERGED.md's and index.html's table opens with a Differing settings row, each cell carries its
settings' mark, a note names them, and both plots mark them; a table of cells alike has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from bench.reports import drawing, markdown
from bench.reports.merged import gather, render
from bench.reports.merged import index as merge_html
from tests.reports.test_merge import machine, md_section
from tests.support.results import Spec, write_cell

EOS = '{"ignore_eos": true}'


def _merged(tmp_path: Path, *, eos_on_m2: bool) -> render.Merged:
    """llamacpp and vllm on m1 and m2; with `eos_on_m2`, m2's llamacpp ran with ignore_eos."""
    for slug in ("m1", "m2"):
        for fw in ("llamacpp", "vllm"):
            path = write_cell(tmp_path / slug, Spec(framework=fw, levels=(1, 4), requests=4, warmup=0),
                              machine=machine(slug))
            if eos_on_m2 and (slug, fw) == ("m2", "llamacpp"):
                result = json.loads(path.read_text())
                result["run_config"]["request_extras"] = {"ignore_eos": True}
                path.write_text(json.dumps(result))
    return gather.collect([tmp_path / "m1", tmp_path / "m2"], ["m1", "m2"])


def test_cells_with_different_settings_are_marked_in_the_table_the_note_and_the_html(tmp_path):
    merged = _merged(tmp_path, eos_on_m2=True)
    md = render.render_markdown(merged, {})
    rows = md_section(md, "tiny — chat")
    settings = rows[markdown.UNLIKE_ROW]
    assert settings[1].startswith(f"llamacpp: request_extras={EOS} · vllm: request_extras=")  # m2's column
    assert settings[0].startswith("llamacpp: request_extras=") and "ignore_eos" not in settings[0]
    assert rows["llamacpp"][1].endswith(" ‡") and rows["llamacpp"][0].endswith(" †")
    assert rows["vllm"][0].endswith(" †") and rows["vllm"][1].endswith(" †")  # alike with llamacpp on m1
    note = md.split("## tiny — chat\n", 1)[1].split("\n### ", 1)[0]
    assert f"‡ llamacpp on m2: request_extras={EOS}" in note
    assert "† llamacpp on m1, vllm on m1, vllm on m2: request_extras=" in note
    html = merge_html.render_html(merged, {})
    assert f"<td>{markdown.UNLIKE_ROW}</td>" in html and "Not like with like: request_extras differ." in html


def _figures(merged: render.Merged, monkeypatch) -> list[Figure]:
    drawn: list[Figure] = []

    def keep(fig: Figure) -> bytes:
        drawn.append(fig)
        return b""

    monkeypatch.setattr(drawing, "png", keep)
    render.plot_images(merged)
    return drawn


def test_both_plots_mark_the_cells_and_name_the_settings(tmp_path, monkeypatch):
    by_machine, vs_concurrency = _figures(_merged(tmp_path, eos_on_m2=True), monkeypatch)
    for fig in (by_machine, vs_concurrency):
        note: Any = getattr(fig, "_supxlabel", None)
        assert note is not None and "request_extras differ" in note.get_text().replace("\n", " ")
    bar_marks = sorted(t.get_text() for t in by_machine.axes[0].texts)
    assert bar_marks == ["†", "†", "†", "‡"]  # llamacpp and vllm on each machine; llamacpp on m2 differs
    m1, m2 = ([t.get_text() for t in ax.get_legend().get_texts()] for ax in vs_concurrency.axes)
    assert (m1, m2) == (["llamacpp †", "vllm †"], ["llamacpp ‡", "vllm †"])


def test_cells_alike_carry_no_row_no_mark_and_no_note(tmp_path, monkeypatch):
    merged = _merged(tmp_path, eos_on_m2=False)
    md = render.render_markdown(merged, {})
    assert markdown.UNLIKE_ROW not in md and "Not like with like" not in md and "†" not in md
    for fig in _figures(merged, monkeypatch):
        assert getattr(fig, "_supxlabel", None) is None
