"""The line each finished cell writes: its verdict and figures, read from the result it wrote; and the
line a session writes for each run a killed session left."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from bench.core.result.files import write_result
from bench.plugins.hooks import BENCHMARK, CellRecord
from bench.plugins.recorder import name_killed_runs, numbers_line
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


def test_a_killed_run_is_named_once_with_what_it_kept_and_journaled_interrupted(tmp_path):
    path = write_cell(tmp_path, Spec(framework="llamacpp", levels=(1, 8), requests=8, warmup=2))
    result = json.loads(path.read_text())
    result["levels"] = result["levels"][:1]
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    block = {"pid": int(gone.stdout), "host": socket.gethostname(), "updated_at": "2026-11-30T10:00:20+00:00",
             "levels_done": 1}
    result["unfinished"] = block
    result["verdict"] = {"verdict": "capped", "reason": "unfinished: written after 1 of 2 levels; ...",
                         "annotations": []}
    write_result(path, result)
    records = len((path.parent / result["requests_file"]).read_text().splitlines())
    directory = path.parent.parent  # results/<model>/<machine>
    (line,) = name_killed_runs(directory)
    assert line == (f"cellbench: run {result['run_id']} was killed in llamacpp/chat after 1 of 2 levels "
                    f"(pid {block['pid']}, last written {block['updated_at']}): kept c=1 (8 of 8 requests ok), "
                    f"{records} request records; its result: {path}")
    assert name_killed_runs(directory) == [], "named once: its journal has it"
    (journal,) = directory.glob("weekly_*.journal.json")
    (cell,) = json.loads(journal.read_text())["cells"]
    assert (cell["framework"], cell["verdict"], cell["result_path"]) == ("llamacpp", "interrupted", str(path))
