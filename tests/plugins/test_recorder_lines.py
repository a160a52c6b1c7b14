"""The line each finished cell writes: its verdict and figures, read from the result it wrote."""

from __future__ import annotations

from bench.plugins.hooks import BENCHMARK, CellRecord
from bench.plugins.recorder import numbers_line
from tests.support.results import Spec, write_cell


def _record(path, verdict="ok"):
    return CellRecord(kind=BENCHMARK, verdict=verdict, framework="llamacpp", split="chat", result_path=str(path))


def test_line_has_every_level_throughput_and_ttft(tmp_path):
    path = write_cell(tmp_path, Spec(framework="llamacpp", levels=(1, 8)))
    line = numbers_line(_record(path))
    assert line is not None and line.startswith("llamacpp-chat ok: c=1 ")
    parts = line.split(": ", 1)[1].split(" | ")
    assert [p.split()[0] for p in parts] == ["c=1", "c=8"]
    assert all(" tok/s (TTFT p50 " in p and p.endswith(" ms)") for p in parts)


def test_no_result_file_no_line(tmp_path):
    assert numbers_line(_record(None)) is None
    assert numbers_line(_record(tmp_path / "missing.json")) is None
    (tmp_path / "broken.json").write_text("{")
    assert numbers_line(_record(tmp_path / "broken.json")) is None
