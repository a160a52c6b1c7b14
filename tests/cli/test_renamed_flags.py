"""One meaning per flag: the commands that read results folders take `--results-name`, the perf
tools `--requests-per-stream`; the old spellings (`--model`, `--rounds`) still work for one
release, doing the same, and warn once that they mean something else elsewhere."""

from __future__ import annotations

import argparse

import pytest

from bench.base.flags import add_requests_per_stream
from bench.cli.main import main as cellbench
from bench.perf import ceiling, client_overhead, compare
from bench.perf.args import positive_int
from tests.support.results import Spec, write_cell

WARNING = ("warning: --model is deprecated here and goes in the next release; use --results-name "
           "(--model is a model profile where a command starts servers)")


def test_report_takes_a_results_name_and_the_old_model_spelling_warns_and_does_the_same(tmp_path, capsys):
    write_cell(tmp_path, Spec(model="alpha"))
    write_cell(tmp_path, Spec(model="beta"))
    assert cellbench(["report", "--csv", "--results-dir", str(tmp_path), "--results-name", "alpha"]) == 0
    new = capsys.readouterr()
    assert cellbench(["report", "--csv", "--results-dir", str(tmp_path), "--model", "alpha"]) == 0
    old = capsys.readouterr()
    rows = new.out.splitlines()[1:]
    assert rows and all(row.startswith("alpha,") for row in rows)  # beta's rows are not there
    assert old.out == new.out
    assert WARNING not in new.err and old.err.count(WARNING) == 1


def test_clean_takes_a_results_name_and_the_old_spelling(tmp_path, capsys):
    write_cell(tmp_path, Spec(model="alpha"))
    for flag in ("--results-name", "--model"):
        assert cellbench(["clean", "--results-dir", str(tmp_path), flag, "alpha", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert out.err.count(WARNING) == 1


@pytest.mark.parametrize(("tool", "words"), [(ceiling, []), (client_overhead, []), (compare, ["compare"])])
def test_the_perf_tools_take_both_spellings_of_requests_per_stream(tool, words, capsys):
    """Both spellings reach the same field and its check: a value of 0 is refused, naming the flag given."""
    for flag in ("--requests-per-stream", "--rounds"):
        with pytest.raises(SystemExit) as ended:
            tool.main([*words, flag, "0"])
        assert ended.value.code == 2
        assert f"argument {flag}: takes a whole number above 0, got '0'" in capsys.readouterr().err


def test_the_old_rounds_spelling_sets_requests_per_stream_and_warns_once(capsys):
    parser = argparse.ArgumentParser(prog="cellbench perf ceiling")
    add_requests_per_stream(parser, type=positive_int, default=4, help="requests per stream")
    assert parser.parse_args([]).requests_per_stream == 4
    assert parser.parse_args(["--requests-per-stream", "7"]).requests_per_stream == 7
    assert capsys.readouterr().err == ""
    assert parser.parse_args(["--rounds", "7"]).requests_per_stream == 7
    assert capsys.readouterr().err == ("cellbench perf ceiling: warning: --rounds is deprecated here and goes in the "
                                       "next release; use --requests-per-stream (--rounds is rounds per level in a "
                                       "pytest session)\n")
    assert "--rounds" not in parser.format_help()
