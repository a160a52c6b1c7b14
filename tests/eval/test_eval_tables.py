"""The reference-table engine: parse docstring tables, replace or append one row, write safely."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import filelock
import pytest

from bench.eval import tables
from bench.eval.tables import (
    EditOutcome,
    Locator,
    RowEdit,
    apply_edits,
    describe,
    parse_tables,
    plan_edit,
)
from bench.eval.tables import write as table_write

DOC = '''"""Tiny arithmetic eval.

H200 Reference Results

Accuracy (summary)

| Model | Config        | accuracy | correct | failed | Source                       |
| ----- | ------------- | -------- | ------- | ------ | ---------------------------- |
| tiny  | llamacpp, c=4 | 50.00%   | 25/50   | 0      | PR #1 [H100, full-set, c=4]  |
| tiny  | vllm, c=4     | 60.00%   | 30/50   | 1      | PR #1 [H100, full-set, c=4]  |

Speed (speed)

| Model | Config        | latency_mean_s | throughput_qps | Source                      |
| ----- | ------------- | -------------- | -------------- | --------------------------- |
| tiny  | llamacpp, c=4 | 0.349          | 22.91          | PR #1 [H100, full-set, c=4] |

Local v1 Pipeline Result (this workspace, 2026-05-01)

Accuracy (summary)

| Model | Config | accuracy | Source |
| --- | --- | --- | --- |
| tiny | llamacpp, c=4 | 1% | local [H200, full-set, c=4] |
"""

VALUE = 42
'''


def make_edit(
    hardware: str = "H100",
    cells: dict[str, str] | None = None,
    section: str = "Accuracy (summary)",
    config: str = "llamacpp",
    workload: str = "full-set, c=4",
    **kw,
) -> RowEdit:
    cells = {"accuracy": "51.00%", "correct": "26/50"} if cells is None else cells
    return RowEdit(kw.pop("row_id", "r1"), Locator(section, config, workload), hardware, "PR #2", cells, **kw)


def line_of(text: str, needle: str) -> int:
    """1-based number of the only line containing `needle`."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def changed_lines(old: str, new: str) -> list[int]:
    a, b = old.splitlines(), new.splitlines()
    assert len(a) == len(b)
    return [n for n, (x, y) in enumerate(zip(a, b, strict=True), 1) if x != y]


@pytest.fixture
def bench_file(tmp_path: Path) -> Path:
    path = tmp_path / "benchmarks" / "benchmark_tiny.py"
    path.parent.mkdir()
    path.write_text(DOC)
    return path


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    return tmp_path / "locks"


# --------------------------------------------------------------------------- parsing


def test_parse_finds_docstring_tables_sections_and_local():
    parsed = parse_tables(DOC)
    assert parsed.error is None and parsed.docstring == (1, 25)
    assert [(t.header_line, t.section_line, t.local) for t in parsed.tables] == [
        (7, "Accuracy (summary)", False),
        (14, "Speed (speed)", False),
        (22, "Accuracy (summary)", True),
    ]
    first = parsed.tables[0]
    assert first.headers == ("Model", "Config", "accuracy", "correct", "failed", "Source")
    assert [r.cells[1] for r in first.rows] == ["llamacpp, c=4", "vllm, c=4"]
    assert parsed.tables[2].marker.startswith("Local v1 Pipeline Result")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "def f(:\n| a | b |\n| - | - |\n",
        "x = 1\x00\n",
        '"""| a | b |\n| - | - |\n| 1 |"""\n',
        '"""\n|\n||\n|||\n| \\|\n|-|-|\n| a | b |\n| -- | -- |\n"""\n',
        '"""\n| a | b |\n| - | - |\n| 1 | 2 | 3 |\n| 4 |\n| x | y |\n| - | - |\n"""\n',
        "# | a | b |\n# | - | - |\n",
        "\ufeff\r\n\r",
    ],
)
def test_parse_never_raises(text: str):
    parsed = parse_tables(text)
    assert isinstance(parsed, tables.ParsedTables)
    assert describe(text) is not None


def test_a_pipe_row_followed_by_a_separator_starts_a_new_table_without_a_section():
    text = '"""Doc.\n\nSpeed\n| a | b |\n|:-|-:|\n| 1 | 2 |\n| c | d |\n| --- | --- |\n| 3 | 4 |\n"""\n'
    parsed = parse_tables(text)
    assert [(t.header_line, t.section_line, [r.line for r in t.rows]) for t in parsed.tables] == [
        (4, "Speed", [6]),
        (7, None, [9]),
    ]


def test_unparseable_file_is_an_error_result_and_an_edit_fails():
    text = DOC + "def broken(:\n"
    assert "does not parse" in parse_tables(text).error
    new, outcome = plan_edit(text, make_edit())
    assert new == text and outcome.status == "fail" and "does not parse" in outcome.reason


def test_cell_count_mismatch_is_flagged_and_editing_that_row_fails():
    text = DOC.replace("| 0      | PR #1 [H100, full-set, c=4]  |", "| PR #1 [H100, full-set, c=4]  |")
    row = parse_tables(text).tables[0].rows[0]
    assert not row.width_ok and len(row.cells) == 5
    new, outcome = plan_edit(text, make_edit())
    assert new == text and outcome.status == "fail"
    assert "5 cells but its header has 6" in outcome.reason


def test_a_table_outside_the_module_docstring_is_ignored():
    text = DOC + '\n\ndef f():\n    """Speed (other)\n\n    | Model | Config | x | Source |\n    | - | - | - | - |\n'
    text += '    | tiny | llamacpp | 1 | PR #1 [H100, full-set, c=4] |\n    """\n\nOTHER = """\n'
    text += "Speed (other)\n\n| Model | Config | x | Source |\n| - | - | - | - |\n"
    text += '| tiny | llamacpp | 1 | PR #1 [H100, full-set, c=4] |\n"""\n'
    assert len(parse_tables(text).tables) == 3
    new, outcome = plan_edit(text, make_edit(section="Speed (other)", cells={"x": "2"}))
    assert new == text and outcome.status == "fail"
    assert "no official table has a section line containing 'Speed (other)'" in outcome.reason


def test_old_comment_format_is_reported_never_edited():
    comments = "\n# Accuracy (summary)\n# | Model | Config | accuracy | Source |\n# | - | - | - | - |\n"
    comments += "# | tiny | llamacpp | TBD | PR #1 [H100, full-set, c=4] |\n"
    parsed = parse_tables(DOC + comments)
    assert parsed.comment_table_lines == (30, 31, 32)  # DOC is 27 lines, then a blank
    assert len(parsed.tables) == 3
    new, outcome = plan_edit(DOC + comments, make_edit())  # the docstring table still edits
    assert outcome.status == "ok" and new.endswith(comments)
    assert "comment table rows (never edited): lines [30, 31, 32]" in describe(DOC + comments)[-1]


def test_a_file_with_only_comment_tables_fails_saying_so():
    text = '"""Tiny eval, tables below."""\n\n# Accuracy (summary)\n# | Model | Config | accuracy | Source |\n'
    text += "# | ----- | ------ | -------- | ------ |\n# | tiny | llamacpp | TBD | PR #1 [H100, full-set, c=4] |\nX = 1\n"  # noqa: E501 (data: one row, as written)
    new, outcome = plan_edit(text, make_edit())
    assert new == text and outcome.status == "fail"
    assert "old-format tables in `#` comments (lines [4, 5, 6])" in outcome.reason
    no_doc = text.split("\n", 1)[1]
    _, outcome = plan_edit(no_doc, make_edit())
    assert "no module docstring" in outcome.reason and "`#` comments" in outcome.reason


def test_source_saying_local_v1_sweep_does_not_make_the_next_table_local():
    text = '"""Eval.\n\nReference Results\n\nSpeed (speed)\n\n| Model | Config | tput | Source |\n| - | - | - | - |\n'
    text += "| tiny | a | 1.0 | local v1 sweep [H200, c=8] |\n\nAccuracy (summary)\n\n"
    text += '| Model | Config | acc | Source |\n| - | - | - | - |\n| tiny | a | 1% | PR #1 [H100, c=8] |\n"""\n'
    assert [t.local for t in parse_tables(text).tables] == [False, False]
    new, outcome = plan_edit(text, make_edit(config="| a |", workload="c=8", cells={"acc": "2%"}))
    assert outcome.status == "ok" and outcome.action == "replaced"
    assert "| tiny | a | 2% | PR #2 [H100, c=8] |" in new  # " 1% " had room for "2%"


def test_a_line_starting_with_local_marks_the_tables_below_local():
    text = DOC.replace("Speed (speed)\n", "Local H200 sweep, n=3 mean\n\nSpeed (speed)\n")
    assert [t.local for t in parse_tables(text).tables] == [False, True, True]
    new, outcome = plan_edit(text, make_edit(section="Speed", cells={"throughput_qps": "1.0"}))
    assert new == text and "Local table has that section" in outcome.reason


# --------------------------------------------------------------------------- replace


def test_replace_changes_only_the_target_line_and_keeps_widths():
    new, outcome = plan_edit(DOC, make_edit())
    assert (outcome.status, outcome.action, outcome.line) == ("ok", "replaced", 9)
    assert changed_lines(DOC, new) == [9]
    old_line, new_line = DOC.splitlines()[8], new.splitlines()[8]
    assert new_line == "| tiny  | llamacpp, c=4 | 51.00%   | 26/50   | 0      | PR #2 [H100, full-set, c=4]  |"
    assert len(new_line) == len(old_line)
    old_cells, new_cells = tables.raw_cells(old_line), tables.raw_cells(new_line)
    assert [new_cells[i] == old_cells[i] for i in range(6)] == [True, True, False, False, True, False]
    assert (outcome.before, outcome.after) == (old_line, new_line)


def test_replace_keeps_indent_trailing_space_and_crlf():
    text = DOC.replace("| tiny  | llamacpp, c=4 | 50.00%", "    | tiny  | llamacpp, c=4 | 50.00%")
    text = text.replace("[H100, full-set, c=4]  |\n| tiny  | vllm", "[H100, full-set, c=4]  |  \n| tiny  | vllm")
    text = text.replace("\n", "\r\n")
    new, outcome = plan_edit(text, make_edit())
    assert outcome.status == "ok"
    assert new.count("\r\n") == text.count("\r\n") and "\n" not in new.replace("\r\n", "")
    assert "\r\n    | tiny  | llamacpp, c=4 | 51.00%   | 26/50   | 0      | PR #2 [H100, full-set, c=4]  |  \r\n" in new


def test_rows_wider_than_the_header_keep_their_own_widths():
    wide = "| tiny  | llamacpp, c=4, a much longer config | 50.00%     | 25/50   | 0      | PR #1 [H100, full-set, c=4]  |"  # noqa: E501 (data: one row, as written)
    text = DOC.replace("| tiny  | llamacpp, c=4 | 50.00%   | 25/50   | 0      | PR #1 [H100, full-set, c=4]  |", wide)
    new, outcome = plan_edit(text, make_edit())
    assert outcome.status == "ok"
    assert new.splitlines()[8] == wide.replace("50.00%  ", "51.00%  ").replace("25/50", "26/50").replace("#1", "#2")


def test_text_that_does_not_fit_its_cell_widens_the_row_only():
    new, outcome = plan_edit(DOC, make_edit(cells={"accuracy": "51.0000000%"}, source_note="(n=3 mean)"))
    assert outcome.status == "ok" and changed_lines(DOC, new) == [9]
    row = new.splitlines()[8]
    assert row == "| tiny  | llamacpp, c=4 | 51.0000000% | 25/50   | 0      | PR #2 [H100, full-set, c=4] (n=3 mean) |"
    assert parse_tables(new).tables[0].rows[0].cells[5] == "PR #2 [H100, full-set, c=4] (n=3 mean)"


def test_a_source_note_does_not_stop_the_next_run_from_replacing():
    first, _ = plan_edit(DOC, make_edit(source_note="(n=3 mean)"))
    second, outcome = plan_edit(first, make_edit(cells={"accuracy": "52.00%"}))
    assert (outcome.action, outcome.line) == ("replaced", 9)
    assert "52.00%" in second.splitlines()[8] and "(n=3 mean)" not in second.splitlines()[8]


def test_replacing_with_the_same_values_is_ok_and_changes_nothing():
    same = make_edit(cells={"accuracy": "50.00%", "correct": "25/50"})
    new, outcome = plan_edit(DOC, RowEdit("r1", same.locate, "H100", "PR #1", same.cells))
    assert new == DOC and outcome.status == "ok" and "unchanged" in outcome.reason


def test_escaped_pipes_round_trip_in_a_raw_docstring():
    text = "r" + DOC.replace("| 0      | PR #1 [H100, full-set, c=4]  |", "| a \\| b | PR #1 [H100, full-set, c=4]  |", 1)  # noqa: E501 (data: one row, as written)
    row = parse_tables(text).tables[0].rows[0]
    assert row.width_ok and row.cells[4] == "a | b"
    new, outcome = plan_edit(text, make_edit(cells={"accuracy": "x|y", "correct": "1\\|2"}))
    assert outcome.status == "ok" and changed_lines(text, new) == [9]
    line = new.splitlines()[8]
    assert "| x\\|y     |" in line and "| a \\| b |" in line and "| 1\\\\|2  " in line
    assert parse_tables(new).tables[0].rows[0].cells[2:5] == ("x|y", "1\\|2", "a | b")


def test_a_pipe_in_a_plain_docstring_is_refused():
    new, outcome = plan_edit(DOC, make_edit(cells={"accuracy": "x|y"}))
    assert new == DOC and outcome.status == "fail" and "not a raw string" in outcome.reason


# --------------------------------------------------------------------------- append


def test_append_goes_after_the_sections_last_row_with_identity_copied_and_metrics_blank():
    new, outcome = plan_edit(DOC, make_edit(hardware="H200", cells={"accuracy": "70.00%"}))
    assert (outcome.status, outcome.action, outcome.line) == ("ok", "appended", 11)
    lines = new.splitlines()
    assert lines[:10] == DOC.splitlines()[:10] and lines[11:] == DOC.splitlines()[10:]
    assert lines[10] == "| tiny  | llamacpp, c=4 | 70.00%   | –       | –      | PR #2 [H200, full-set, c=4]  |"
    assert outcome.after == lines[10] and outcome.before is None
    assert lines[-4] == DOC.splitlines()[-4] and "local [H200" in lines[-4]  # the Local row with the same tag is untouched  # noqa: E501 (data: one row, as written)


def test_appended_row_is_replaced_by_the_next_run():
    once, _ = plan_edit(DOC, make_edit(hardware="H200", cells={"accuracy": "70.00%"}))
    twice, outcome = plan_edit(once, make_edit(hardware="H200", cells={"accuracy": "71.00%"}))
    assert (outcome.action, outcome.line) == ("replaced", 11) and changed_lines(once, twice) == [11]


def test_append_uses_new_row_when_there_is_no_template():
    edit = make_edit(
        hardware="H200",
        config="sglang, c=4",
        cells={"latency_mean_s": "0.1", "throughput_qps": "9.0"},
        section="Speed",
        new_row={"Model": "tiny", "Config": "sglang, c=4"},
    )
    new, outcome = plan_edit(DOC, edit)
    assert (outcome.action, outcome.line) == ("appended", 17)
    assert new.splitlines()[16] == "| tiny  | sglang, c=4   | 0.1            | 9.0            | PR #2 [H200, full-set, c=4] |"  # noqa: E501 (data: one row, as written)


def test_append_without_template_or_new_row_fails():
    new, outcome = plan_edit(DOC, make_edit(config="sglang", section="Speed", cells={"throughput_qps": "1"}))
    assert new == DOC and outcome.status == "fail" and "no new_row was given" in outcome.reason


def test_new_row_must_name_real_columns_and_not_overwrite_cells():
    bad_key = make_edit(hardware="H200", new_row={"Modle": "tiny"})
    assert "new_row key 'Modle' is not a column" in plan_edit(DOC, bad_key)[1].reason
    clash = make_edit(hardware="H200", new_row={"accuracy": "1%"})
    assert "new_row sets ['accuracy']" in plan_edit(DOC, clash)[1].reason


def test_append_to_one_of_two_same_named_sections_fails_listing_them():
    text = DOC.replace("Speed (speed)", "Accuracy (summary)")
    new, outcome = plan_edit(text, make_edit(hardware="H200"))
    assert new == text and outcome.status == "fail"
    assert "2 official tables" in outcome.reason and "line 7" in outcome.reason and "line 14" in outcome.reason
    _, outcome = plan_edit(text, make_edit(config="vllm"))  # a unique match still replaces
    assert outcome.action == "replaced"


def test_an_appended_row_the_locator_would_not_find_again_is_refused():
    edit = make_edit(hardware="H200", section="Speed", config="22.91", cells={"throughput_qps": "9.0"})
    new, outcome = plan_edit(DOC, edit)
    assert new == DOC and outcome.status == "fail" and "locator would find" in outcome.reason


# --------------------------------------------------------------------------- failures that name the problem


def test_ambiguous_match_fails_listing_every_match(bench_file: Path, lock_dir: Path):
    text = DOC.replace("| tiny  | vllm, c=4     | 60.00%", "| tiny  | llamacpp, c=4 | 60.00%")  # one Config, twice
    bench_file.write_text(text)
    [outcome] = apply_edits(bench_file, [make_edit()], lock_dir)
    assert outcome.status == "fail" and outcome.reason.startswith("2 rows match")
    assert "line 9: | tiny  | llamacpp, c=4 | 50.00%" in outcome.reason
    assert "line 10: | tiny  | llamacpp, c=4 | 60.00%" in outcome.reason
    assert bench_file.read_text() == text


def test_unknown_cell_column_fails_naming_it_and_the_columns():
    new, outcome = plan_edit(DOC, make_edit(cells={"accuracy": "1%", "output_tok_per_req_s": "4.7"}))
    assert new == DOC and outcome.status == "fail"
    assert "'output_tok_per_req_s' is not a column" in outcome.reason
    assert "['Model', 'Config', 'accuracy', 'correct', 'failed', 'Source']" in outcome.reason


def test_table_without_source_column_fails():
    text = DOC.replace("| Source                       |", "| Origin                       |")
    _, outcome = plan_edit(text, make_edit())
    assert outcome.status == "fail" and "no 'Source' column" in outcome.reason


def test_missing_section_lists_the_official_sections():
    _, outcome = plan_edit(DOC, make_edit(section="Accuracy (full set)"))
    assert outcome.status == "fail"
    assert "official section lines: ['Accuracy (summary)', 'Speed (speed)']" in outcome.reason


def test_empty_locator_parts_and_line_breaks_are_refused():
    assert "config_substring is empty" in plan_edit(DOC, make_edit(config=""))[1].reason
    assert "line break" in plan_edit(DOC, make_edit(cells={"accuracy": "1\n2"}))[1].reason


def test_outcome_to_json():
    _, outcome = plan_edit(DOC, make_edit())
    assert outcome.to_json() == {
        "row_id": "r1",
        "status": "ok",
        "action": "replaced",
        "reason": "replaced line 9",
        "line": 9,
        "before": outcome.before,
        "after": outcome.after,
        "warning": "",
    }


# --------------------------------------------------------------------------- apply_edits


def test_two_edits_in_one_call_both_land_and_report_final_lines(bench_file: Path, lock_dir: Path):
    speed = make_edit(row_id="speed", section="Speed", cells={"throughput_qps": "30.00"})
    append = make_edit(row_id="acc", hardware="H200", cells={"accuracy": "70.00%"})
    outcomes = apply_edits(bench_file, [speed, append], lock_dir)
    assert [(o.row_id, o.status, o.action, o.line) for o in outcomes] == [
        ("speed", "ok", "replaced", 17),  # reported at 16, moved down by the append above it
        ("acc", "ok", "appended", 11),
    ]
    lines = bench_file.read_text().splitlines()
    assert lines[16] == outcomes[0].after and "30.00" in lines[16]
    assert lines[10] == outcomes[1].after and "[H200, full-set, c=4]" in lines[10]


def test_a_failed_edit_leaves_the_others_applying(bench_file: Path, lock_dir: Path):
    bad = make_edit(row_id="bad", cells={"nope": "1"})
    outcomes = apply_edits(bench_file, [bad, make_edit(row_id="good")], lock_dir)
    assert [o.status for o in outcomes] == ["fail", "ok"]
    assert changed_lines(DOC, bench_file.read_text()) == [9]


def test_written_file_imports_and_keeps_its_mode(bench_file: Path, lock_dir: Path):
    bench_file.chmod(0o640)
    [outcome] = apply_edits(bench_file, [make_edit()], lock_dir)
    assert outcome.status == "ok"
    assert bench_file.stat().st_mode & 0o777 == 0o640
    spec = importlib.util.spec_from_file_location("benchmark_tiny_written", bench_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.VALUE == 42 and "| 51.00%   | 26/50   |" in (module.__doc__ or "")


def test_lock_file_lives_in_lock_dir_and_a_held_lock_times_out(bench_file: Path, lock_dir: Path):
    apply_edits(bench_file, [make_edit()], lock_dir)
    digest = hashlib.sha1(str(bench_file.resolve()).encode()).hexdigest()
    assert (lock_dir / f"{digest}.lock").exists()
    assert sorted(p.name for p in bench_file.parent.iterdir()) == ["benchmark_tiny.py"]
    before = bench_file.read_bytes()
    with filelock.FileLock(str(tables.lock_path(bench_file, lock_dir))):
        [outcome] = apply_edits(bench_file, [make_edit(cells={"accuracy": "1%"})], lock_dir, lock_timeout=0.05)
    assert outcome.status == "fail" and "could not lock" in outcome.reason
    assert bench_file.read_bytes() == before


def test_nothing_to_change_writes_nothing(bench_file: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch):
    def no_write(*args, **kwargs):
        raise AssertionError("wrote")

    monkeypatch.setattr(table_write, "atomic_write", no_write)
    same = RowEdit("r1", make_edit().locate, "H100", "PR #1", {"accuracy": "50.00%"})
    outcomes = apply_edits(bench_file, [make_edit(cells={"nope": "1"}), same], lock_dir)
    assert [o.status for o in outcomes] == ["fail", "ok"]


@pytest.mark.parametrize("patched", ["replace", "fsync"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError])
def test_interrupted_write_leaves_the_original_and_no_temp_file(
    bench_file: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch, patched: str, exc: type[BaseException]
):
    before = bench_file.read_bytes()
    seen: list[str] = []

    def boom(*args):
        seen.append(str(args[0]))
        raise exc("interrupted")

    monkeypatch.setattr(os, patched, boom)
    if exc is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            apply_edits(bench_file, [make_edit()], lock_dir)
    else:
        [outcome] = apply_edits(bench_file, [make_edit()], lock_dir)
        assert outcome.status == "fail" and "nothing written: OSError: interrupted" in outcome.reason
    assert seen, "the write never reached the patched call"
    assert bench_file.read_bytes() == before
    assert sorted(p.name for p in bench_file.parent.iterdir()) == ["benchmark_tiny.py"]


def test_a_file_changed_behind_the_lock_is_not_overwritten(
    bench_file: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    real_fsync = os.fsync

    def sneaky_fsync(fd: int):
        bench_file.write_text(DOC + "# edited by hand\n")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", sneaky_fsync)
    [outcome] = apply_edits(bench_file, [make_edit()], lock_dir)
    assert outcome.status == "fail" and "changed while it was being edited" in outcome.reason
    assert bench_file.read_text() == DOC + "# edited by hand\n"
    assert sorted(p.name for p in bench_file.parent.iterdir()) == ["benchmark_tiny.py"]


def test_cell_text_that_would_break_the_module_is_refused(bench_file: Path, lock_dir: Path):
    outcomes = apply_edits(bench_file, [make_edit(cells={"accuracy": '1"""'}), make_edit(row_id="r2")], lock_dir)
    assert outcomes[0].status == "fail" and "does not parse" in outcomes[0].reason
    assert outcomes[1].status == "ok" and changed_lines(DOC, bench_file.read_text()) == [9]


def fake_plan(mutate):
    """A plan_edit that reports a replace of line 9 but returns `mutate(text)`."""

    def plan(text: str, edit: RowEdit) -> tuple[str, EditOutcome]:
        return mutate(text), EditOutcome(edit.row_id, "ok", "replaced", "replaced line 9", 9, None, None)

    return plan


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda t: t.replace("VALUE = 42", "VALUE = ("), "does not parse as Python"),
        (lambda t: t.replace("Speed (speed)", "Speed (fast)"), "touches more than"),
        (lambda t: t.replace("| 50.00%   |", "| 50\\|00%  |"), "adds Python warnings"),
        (lambda t: t.replace("| tiny  | vllm", "| tiny  | llamacpp, c=4 |\n| tiny  | vllm"), "touches more than"),
    ],
    ids=["syntax-error", "other-line-changed", "new-warning", "unannounced-insert"],
)
def test_verification_refuses_what_the_edits_did_not_announce(
    bench_file: Path, lock_dir: Path, monkeypatch: pytest.MonkeyPatch, mutate, reason: str
):
    monkeypatch.setattr(table_write, "plan_edit", fake_plan(mutate))
    outcomes = apply_edits(bench_file, [make_edit(), make_edit(row_id="r2")], lock_dir)
    assert [o.status for o in outcomes] == ["fail", "fail"]
    assert all(o.reason.startswith("nothing written: ") and reason in o.reason for o in outcomes)
    assert bench_file.read_text() == DOC


def test_verify_rewrite_accepts_exactly_the_announced_lines():
    new, outcome = plan_edit(DOC, make_edit())
    assert tables.verify_rewrite(DOC, new, [outcome]) is None
    moved = EditOutcome("r1", "ok", "replaced", "", 10, None, None)
    assert "touches more than" in tables.verify_rewrite(DOC, new, [moved])


def test_apply_edits_writes_through_a_symlink(bench_file: Path, lock_dir: Path, tmp_path: Path):
    link = tmp_path / "link.py"
    link.symlink_to(bench_file)
    [outcome] = apply_edits(link, [make_edit()], lock_dir)
    assert outcome.status == "ok" and link.is_symlink()
    assert "51.00%" in bench_file.read_text()


# --------------------------------------------------------------------------- real-world layout: notes, models, means

OMNI = '''"""Omni eval.

H200 Full-Set Reference Results

Reproducibility references for the full eval set.

Accuracy (accuracy.wer)

Note (EN rows): the ASR model changed on 2026-04-20; older rows are not comparable.

| Model      | Config            | wer_corpus | evaluated | Source                         |
| ---------- | ----------------- | ---------- | --------- | ------------------------------ |
| Qwen3-Omni | EN, c=16          | 1.95%      | 1088/1088 | PR #411 [H200, full-set, c=16] |
| S2-Pro     | EN, c=16          | 1.41%      | 1088/1088 | PR #420 [H200, full-set, c=16] |
| Qwen3-Omni | EN, c=16          | 2.01%      | 1088/1088 | PR #351 [H100, full-set, c=16] (n=3 mean) |

Generation speed (generation.speed)

| Model      | Config   | latency_mean_s | output_tok_per_req_s | Source                         |
| ---------- | -------- | -------------- | ------------------------------ | ------------------------------ |
| Qwen3-Omni | EN, c=16 | 3.06           | 4.7                            | PR #411 [H200, full-set, c=16] |
"""
'''


def omni_edit(
    hardware: str = "H200",
    model: str | None = "qwen3-omni",
    cells: dict[str, str] | None = None,
    section: str = "accuracy.wer",
    workload: str = "full-set, c=16",
    **kw,
) -> RowEdit:
    cells = {"wer_corpus": "1.90%"} if cells is None else cells
    locator = Locator(section, "EN, c=16", workload)
    return RowEdit(kw.pop("row_id", "r1"), locator, hardware, "PR #2", cells, model=model, **kw)


def doc_with_section(above_table: str) -> str:
    """A docstring whose only table sits under `above_table`."""
    return f'"""Doc.\n\n{above_table}\n\n| Model | Source |\n| - | - |\n| tiny | PR #1 [H100] |\n"""\n'


def test_a_note_between_the_heading_and_its_table_keeps_the_heading_as_the_section():
    assert [t.section_line for t in parse_tables(OMNI).tables] == [
        "Accuracy (accuracy.wer)",
        "Generation speed (generation.speed)",
    ]
    new, outcome = plan_edit(OMNI, omni_edit())
    assert (outcome.status, outcome.reason) == ("ok", "replaced line 13")
    assert new.splitlines()[12] == "| Qwen3-Omni | EN, c=16          | 1.90%      | 1088/1088 | PR #2 [H200, full-set, c=16]   |"  # noqa: E501 (data: one row, as written)


@pytest.mark.parametrize(
    "above_table, section",
    [
        ("Speed (speed)", "Speed (speed)"),
        ("Speed (speed)\n\nNotes: warm cache, one GPU.", "Speed (speed)"),
        ("Speed (speed)\n\nNB the ASR model changed", "Speed (speed)"),
        ("Speed (speed)\n\nMeasured with a warm cache\nand one GPU", "Speed (speed)"),
        ("Speed (speed)\n\nRows below are medians:", "Speed (speed)"),
        ("Speed (speed)\n\n* median of 3 runs", "Speed (speed)"),
        ("Speed (speed)\n\n- median of 3 runs", "Speed (speed)"),
        ("Speed (speed)\n\n> copied from the nightly report", "Speed (speed)"),
        ("Speed (speed)\n\n(all rows on one GPU)", "Speed (speed)"),
        ("## Speed (speed)\nMeasured with a warm cache.\n\nNOTE: one GPU.", "## Speed (speed)"),
        ("Notebook runs (speed)", "Notebook runs (speed)"),
        ("Every row below is a median.", None),
        ("Note: no heading at all", None),
    ],
    ids=[
        "heading", "note-word", "nb", "multi-line", "colon", "bullet", "dash", "quote", "aside",
        "markdown", "note-is-a-word", "sentence-only", "note-only",
    ],
)
def test_the_section_is_the_nearest_heading_paragraph_above_the_table(above_table: str, section: str | None):
    assert [t.section_line for t in parse_tables(doc_with_section(above_table)).tables] == [section]


def test_a_note_right_under_the_previous_table_gives_no_section():
    text = OMNI.replace("Generation speed (generation.speed)\n", "Note: speed rows are medians.\n")
    assert [t.section_line for t in parse_tables(text).tables] == ["Accuracy (accuracy.wer)", None]


@pytest.mark.parametrize(
    "model, aliases, line",
    [
        ("qwen3-omni", (), 13),
        ("Qwen/Qwen3-Omni-30B-A3B-Instruct", ("Qwen3-Omni",), 13),  # a declared alias
        ("QWEN3_OMNI", (), 13),
        ("s2-pro", (), 14),
        ("fishaudio/S2Pro", (), 14),
    ],
)
def test_a_model_hint_replaces_only_that_models_row(model: str, aliases: tuple[str, ...], line: int):
    new, outcome = plan_edit(OMNI, omni_edit(model=model, aliases=aliases))
    assert (outcome.status, outcome.reason) == ("ok", f"replaced line {line}")
    assert changed_lines(OMNI, new) == [line]


def test_a_repo_id_is_not_a_table_name_it_merely_contains():
    new, outcome = plan_edit(OMNI, omni_edit(model="Qwen/Qwen3-Omni-30B-A3B-Instruct"))
    assert new == OMNI and outcome.status == "fail"
    assert "only rows of other models do: ['Qwen3-Omni', 'S2-Pro']" in outcome.reason
    assert "declare it in the config (model_aliases: {Qwen/Qwen3-Omni-30B-A3B-Instruct: [Qwen3-Omni]})" \
        in outcome.reason


def test_without_a_model_hint_two_models_rows_are_ambiguous():
    new, outcome = plan_edit(OMNI, omni_edit(model=None))
    assert new == OMNI and outcome.reason.startswith("2 rows match")


def test_a_model_hint_appends_copying_only_that_models_identity_cells():
    new, outcome = plan_edit(OMNI, omni_edit(hardware="H100", model="s2-pro", cells={"wer_corpus": "1.50%"}))
    assert (outcome.status, outcome.reason) == ("ok", "appended line 16")  # the Qwen3-Omni H100 row is untouched
    assert new.splitlines()[15] == "| S2-Pro     | EN, c=16          | 1.50%      | –         | PR #2 [H100, full-set, c=16]   |"  # noqa: E501 (data: one row, as written)
    assert new.splitlines()[14] == OMNI.splitlines()[14]


def test_an_append_never_copies_identity_cells_from_another_model():
    new, outcome = plan_edit(OMNI, omni_edit(model="MiniCPM-o"))
    assert new == OMNI and outcome.status == "fail"
    assert "no 'MiniCPM-o' row of the table at line 11 contains 'EN, c=16'" in outcome.reason
    assert "only rows of other models do: ['Qwen3-Omni', 'S2-Pro']" in outcome.reason
    new, outcome = plan_edit(OMNI, omni_edit(model="MiniCPM-o", new_row={"Model": "MiniCPM-o", "Config": "EN, c=16"}))
    assert (outcome.status, outcome.reason) == ("ok", "appended line 16")
    # no MiniCPM-o row to copy: the widths come from the last data row, whose Source cell is wider
    assert new.splitlines()[15] == "| MiniCPM-o  | EN, c=16          | 1.90%      | –         | PR #2 [H200, full-set, c=16]              |"  # noqa: E501 (data: one row, as written)


def test_a_model_hint_that_normalises_to_nothing_matches_no_row():
    _, outcome = plan_edit(OMNI, omni_edit(model="--"))
    assert outcome.status == "fail" and "only rows of other models do" in outcome.reason


def test_a_model_hint_does_not_filter_a_table_without_a_model_column():
    text = DOC.replace("| Model | Config        |", "| Name  | Config        |")
    new, outcome = plan_edit(text, make_edit(model="qwen3-omni"))
    assert (outcome.status, outcome.reason) == ("ok", "replaced line 9")


def test_an_appended_row_takes_its_widths_from_the_data_rows_not_the_header():
    cells = {"latency_mean_s": "2.50", "output_tok_per_req_s": "5.0"}
    new, outcome = plan_edit(OMNI, omni_edit(hardware="H100", section="generation.speed", cells=cells))
    assert (outcome.status, outcome.line) == ("ok", 22)
    assert new.splitlines()[21] == "| Qwen3-Omni | EN, c=16 | 2.50           | 5.0                            | PR #2 [H100, full-set, c=16]   |"  # noqa: E501 (data: one row, as written)
    first = omni_edit(model="s2-pro", section="generation.speed", cells=cells, new_row={"Model": "S2-Pro", "Config": "EN, c=16"})  # noqa: E501 (one call)
    new, outcome = plan_edit(OMNI, first)  # no S2-Pro row to copy: the last data row gives the widths
    assert new.splitlines()[21] == "| S2-Pro     | EN, c=16 | 2.50           | 5.0                            | PR #2 [H200, full-set, c=16]   |"  # noqa: E501 (data: one row, as written)


def test_the_first_row_of_an_empty_table_takes_the_separators_widths():
    text = '"""Doc.\n\nSpeed\n\n| Model | Config | tps | Source |\n| ---------- | -------- | ------ | ------------------ |\n"""\n'  # noqa: E501 (data: as written)
    edit = RowEdit("r1", Locator("Speed", "c=4", "c=4"), "H200", "PR #2", {"tps": "9.5"}, new_row={"Model": "tiny", "Config": "c=4"})  # noqa: E501 (one call)
    new, outcome = plan_edit(text, edit)
    assert (outcome.status, outcome.line) == ("ok", 7)
    assert new.splitlines()[6] == "| tiny       | c=4      | 9.5    | PR #2 [H200, c=4]  |"


def test_reasons_name_the_final_line_after_a_later_append_moves_the_row(bench_file: Path, lock_dir: Path):
    speed = make_edit(row_id="speed", section="Speed", cells={"throughput_qps": "30.00"})
    same = make_edit(row_id="same", config="vllm", cells={"accuracy": "60.00%", "correct": "30/50"})
    same = RowEdit("same", same.locate, "H100", "PR #1", same.cells)
    append = make_edit(row_id="acc", hardware="H200", cells={"accuracy": "70.00%"})
    outcomes = apply_edits(bench_file, [speed, same, append], lock_dir)
    assert [(o.row_id, o.line, o.reason) for o in outcomes] == [
        ("speed", 17, "replaced line 17"),
        ("same", 10, "replaced line 10 (values unchanged)"),  # above the append: not moved
        ("acc", 11, "appended line 11"),
    ]


def test_two_appends_renumber_the_first_when_the_second_lands_above_it(bench_file: Path, lock_dir: Path):
    speed = make_edit(row_id="speed", hardware="H200", section="Speed", cells={"throughput_qps": "30.00"})
    acc = make_edit(row_id="acc", hardware="H200", cells={"accuracy": "70.00%"})
    outcomes = apply_edits(bench_file, [speed, acc], lock_dir)
    assert [(o.row_id, o.reason) for o in outcomes] == [("speed", "appended line 18"), ("acc", "appended line 11")]
    lines = bench_file.read_text().splitlines()
    assert lines[17] == outcomes[0].after and lines[10] == outcomes[1].after


def test_a_mean_in_the_workload_tag_is_not_repeated_by_the_note():
    edit = omni_edit(workload="full-set, c=16, n=3 mean", source_note="(n=3 mean)", mean_of=3)
    assert edit.source == "PR #2 [H200, full-set, c=16, n=3 mean]"
    assert omni_edit(source_note="(n=3 mean)", mean_of=3).source == "PR #2 [H200, full-set, c=16] (n=3 mean)"
    note = omni_edit(workload="full-set, c=16, n=3 mean", source_note="(n=3 mean) warm cache", mean_of=3)
    assert note.source == "PR #2 [H200, full-set, c=16, n=3 mean] warm cache"
    new, outcome = plan_edit(OMNI, omni_edit(hardware="H100", workload="full-set, c=16, n=3 mean", source_note="(n=3 mean)", mean_of=3))  # noqa: E501 (one call)
    assert (outcome.status, outcome.warning) == ("ok", "")
    assert new.splitlines()[15] == "| Qwen3-Omni | EN, c=16          | 1.90%      | –         | PR #2 [H100, full-set, c=16, n=3 mean]    |"  # noqa: E501 (data: one row, as written)


def test_conflicting_mean_markers_and_a_mean_of_zero_are_refused():
    new, outcome = plan_edit(OMNI, omni_edit(workload="full-set, c=16, n=3 mean", source_note="(n=2 mean)", mean_of=2))
    assert new == OMNI and outcome.status == "fail"
    assert "the Source would claim 2 means (n=3 mean, n=2 mean)" in outcome.reason
    assert "must be at least 1, not 0" in plan_edit(OMNI, omni_edit(mean_of=0))[1].reason


@pytest.mark.parametrize(
    "mean_of, note, warning",
    [
        (1, "", "overwrites an n=3 mean row with a single-round value"),
        (2, "(n=2 mean)", "overwrites an n=3 mean row with an n=2 mean"),
        (3, "(n=3 mean)", ""),
    ],
)
def test_overwriting_a_mean_row_warns_but_still_edits(mean_of: int, note: str, warning: str):
    new, outcome = plan_edit(OMNI, omni_edit(hardware="H100", source_note=note, mean_of=mean_of))
    assert (outcome.status, outcome.reason, outcome.warning) == ("ok", "replaced line 15", warning)
    source = f"PR #2 [H100, full-set, c=16] {note}".strip()
    assert new.splitlines()[14] == f"| Qwen3-Omni | EN, c=16          | 1.90%      | 1088/1088 | {source:<41} |"
    assert outcome.to_json()["warning"] == warning


def test_a_source_claiming_a_mean_the_values_are_not_warns():
    _, outcome = plan_edit(OMNI, omni_edit(workload="full-set, c=16, n=3 mean"))
    assert (outcome.status, outcome.action) == ("ok", "appended")
    assert outcome.warning == "the new Source claims an n=3 mean but the values are a single-round value"
    _, outcome = plan_edit(OMNI, omni_edit(hardware="H100", source_note="(n=5 mean)", mean_of=2))
    assert outcome.warning == (
        "overwrites an n=3 mean row with an n=2 mean; the new Source claims an n=5 mean but the values are an n=2 mean"
    )
