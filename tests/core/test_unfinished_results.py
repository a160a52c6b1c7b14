"""A result written while its cell runs, and what is left when the cell is killed: the `unfinished`
block and its verdict, the names a later attempt of the same run id takes, finding a killed run's
result and saying what it kept, and the check of a results folder before anything runs."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys

import jsonschema
import pytest

from bench.core.result.files import (
    CellPaths,
    UnwritableResults,
    free_cell_paths,
    results_folder_problem,
    unfinished_block,
    validate,
    write_result,
)
from bench.core.result.store import kept_line, killed, load_results, writer_gone
from tests.support.results import Spec, synthetic_result, write_cell

RUN = "20261204T100000Z-ab12"


def unfinished(result: dict, *, pid: int | None = None, host: str | None = None, done: int = 1) -> dict:
    """`result` as a cell writes it after `done` levels (its levels cut to those)."""
    out = copy.deepcopy(result)
    out["levels"] = out["levels"][:done]
    out["verdict"] = {"verdict": "capped", "reason": f"unfinished: written after {done} of 2 levels; ...",
                      "annotations": []}
    out["unfinished"] = {**unfinished_block(done), **({"pid": pid} if pid else {}), **({"host": host} if host else {})}
    return out


def a_gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_an_unfinished_result_follows_the_schema_and_says_capped_unfinished():
    result = unfinished(synthetic_result(Spec(levels=(1, 2))))
    validate(result)
    assert result["unfinished"] == {"pid": os.getpid(), "host": socket.gethostname(),
                                    "updated_at": result["unfinished"]["updated_at"], "levels_done": 1}
    for verdict in ({"verdict": "ok", "reason": "unfinished: ..."}, {"verdict": "capped", "reason": "budget spent"}):
        wrong = {**result, "verdict": {**result["verdict"], **verdict}}
        with pytest.raises(jsonschema.ValidationError):
            validate(wrong)  # nothing may read an unfinished result as a cell that ran to its end
    with pytest.raises(jsonschema.ValidationError):
        validate({**result, "unfinished": {**result["unfinished"], "extra": 1}})


def test_a_later_attempt_of_a_run_id_takes_names_of_its_own(tmp_path):
    first = CellPaths(tmp_path, "llamacpp", RUN)
    assert free_cell_paths(first) == first and first.stem == f"llamacpp_{RUN}"
    first.requests.write_text("")  # a killed cell opens its sidecar before its first server starts
    second = free_cell_paths(first)
    assert second.attempt == 2 and second.result.name == f"llamacpp_{RUN}-2.json"
    assert second.requests.name == f"llamacpp_{RUN}-2.requests.jsonl"
    assert second.server_log("c1").name == f"llamacpp_{RUN}-2_c1.server.log"
    second.server_log("c1").parent.mkdir()
    second.server_log("c1").write_text("a log alone is an attempt too\n")
    assert free_cell_paths(first).attempt == 3
    # `cellbench clean` finds a cell's files by `<stem>.*` and `logs/<stem>_*`: one attempt's never
    # take in another's
    second.requests.write_text("")
    assert list(tmp_path.glob(f"{first.stem}.*")) == [first.requests]
    assert list((tmp_path / "logs").glob(f"{first.stem}_*")) == []


def test_the_store_reads_a_later_attempt_and_refuses_a_misnamed_file(tmp_path):
    path = write_cell(tmp_path, Spec(run_id=RUN))
    data = json.loads(path.read_text())
    (path.parent / f"llamacpp_{RUN}-2.json").write_text(json.dumps(data))
    (path.parent / f"llamacpp_{RUN}-x.json").write_text(json.dumps(data))
    loaded, ignored = load_results(path.parent)
    assert sorted(r.path.name for r in loaded) == [f"llamacpp_{RUN}-2.json", f"llamacpp_{RUN}.json"]
    assert [i.file for i in ignored] == [f"llamacpp_{RUN}-x.json"]


def test_a_killed_run_is_an_unfinished_result_whose_writer_is_gone(tmp_path):
    base = synthetic_result(Spec(levels=(1, 2)))
    assert writer_gone(base) is None, "a finished result"
    assert writer_gone(unfinished(base)) is False, "its writer (this process) still runs"
    assert writer_gone(unfinished(base, pid=a_gone_pid())) is True
    assert writer_gone(unfinished(base, pid=a_gone_pid(), host="another-host")) is None, "nothing here can tell"
    # a pid that now belongs to a process started after the result was written is not its writer
    later = unfinished(base, pid=os.getpid())
    later["unfinished"]["updated_at"] = "2000-01-01T00:00:00+00:00"
    assert writer_gone(later) is True


def test_killed_lists_the_killed_results_and_kept_line_says_what_they_kept(tmp_path):
    path = write_cell(tmp_path, Spec(run_id=RUN, levels=(1, 2), requests=8, warmup=2))
    split_dir = path.parent
    gone = unfinished(json.loads(path.read_text()), pid=a_gone_pid())
    write_result(path, gone)
    running = unfinished(json.loads(path.read_text()))
    running["run_id"] = "20261204T110000Z-cd34"
    write_result(split_dir / "llamacpp_20261204T110000Z-cd34.json", running)
    (found,) = killed(split_dir)
    assert found.path == path
    sidecar = split_dir / gone["requests_file"]
    records = len(sidecar.read_text().splitlines())
    assert kept_line(found) == f"kept c=1 (8 of 8 requests ok), {records} request records"
    sidecar.unlink()
    assert kept_line(found) == "kept c=1 (8 of 8 requests ok)"


def test_a_results_folder_is_checked_before_anything_runs(tmp_path):
    assert results_folder_problem(tmp_path) is None
    assert not list(tmp_path.iterdir()), "the check leaves nothing behind"
    assert results_folder_problem(tmp_path / "new" / "results") is None
    assert not (tmp_path / "new").exists(), "a folder still to be created is not created by the check"
    (tmp_path / "file").write_text("x")
    assert results_folder_problem(tmp_path / "file") == f"results folder {tmp_path / 'file'} is a regular file"
    assert results_folder_problem(tmp_path / "file" / "r") == (
        f"results folder {tmp_path / 'file' / 'r'} cannot be created: {tmp_path / 'file'} is a regular file")


def test_an_unwritable_file_is_one_line_naming_the_folder_the_file_and_the_cause(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnwritableResults) as raised:
        write_result(tmp_path / "file" / "x.json", synthetic_result())  # under a file: no folder to write in
    assert raised.value.line(tmp_path) == (f"results folder {tmp_path} cannot be written: File exists (EEXIST) "
                                           f"(writing {tmp_path / 'file' / 'x.json'})")
