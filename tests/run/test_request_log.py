"""The request sidecar as a cell writes it (bench.run.writes.sidecar): each level's records whole and on
disk when the level ends, never over an existing file, a full or vanished folder as UnwritableResults;
and what writing as it goes costs per chunk, timed with pytest-benchmark:

    .venv/bin/python -m pytest tests/run/test_request_log.py -p no:cacheprovider

Two costs are new since results are written as the cell goes, both paid once per level between two
levels, never while one is measured (nothing is written while requests stream): the level's records
written, flushed and fsynced (`write_level`), and the result rewritten atomically (validated,
written, fsynced, renamed, its folder fsynced). Each is timed on a level of 200 real 100-chunk
records (the receive benchmark's, tests/load/test_receive_benchmark.py), by wall clock, since an
fsync waits for the disk rather than using the CPU; the figures per chunk are that level's.
"""

from __future__ import annotations

import json
import time

import pytest

from bench.core.records import RequestRecord
from bench.core.result.files import UnwritableResults, write_result
from bench.run.writes.sidecar import RequestLog
from tests.load.test_receive_benchmark import RESPONSES, as_reads, null_server_response, replay
from tests.support.results import Spec, synthetic_result

CHUNKS = RESPONSES * 100  # the level's chunks: 200 records of 100 content chunks


@pytest.fixture(scope="module")
def level_records() -> list[RequestRecord]:
    records = replay(as_reads(null_server_response()))
    assert len(records) == RESPONSES and all(r.n_chunks == 100 for r in records)
    return records


def test_each_level_is_appended_whole_and_the_file_is_never_reopened_over(tmp_path, level_records):
    path = tmp_path / "chat" / "llamacpp_x.requests.jsonl"
    with RequestLog(path) as log:
        log.write_level({"concurrency": 1}, level_records[:3])
        first = path.read_text()  # on disk as soon as the level is written, the file still open
        log.write_level({"concurrency": 8, "round": 2}, level_records[3:5])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(first.splitlines()) == 3 and log.records == 5
    assert [(r["concurrency"], r.get("round")) for r in lines] == [(1, None)] * 3 + [(8, 2)] * 2
    assert lines[0] == {"concurrency": 1, **level_records[0].to_json()}
    before = path.read_bytes()
    with pytest.raises(UnwritableResults), RequestLog(path):
        pass  # an attempt's file is never opened again: a later attempt takes names of its own
    assert path.read_bytes() == before


def test_a_folder_that_cannot_hold_it_is_unwritable_results(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnwritableResults) as raised, RequestLog(tmp_path / "file" / "r.requests.jsonl"):
        pass
    assert raised.value.path == tmp_path / "file" / "r.requests.jsonl"


def _per_chunk(benchmark, record_property, name: str) -> None:
    if benchmark.stats is None:  # --benchmark-disable, or under xdist: ran once, not timed
        return
    stats = benchmark.stats.stats
    for what, value in (("median", stats.median), ("min", stats.min), ("max", stats.max), ("iqr", stats.iqr)):
        benchmark.extra_info[f"us_per_chunk_{what}"] = round(value / CHUNKS * 1e6, 4)
    record_property(f"{name}_us_per_chunk_median", benchmark.extra_info["us_per_chunk_median"])


@pytest.mark.benchmark(group="writes", timer=time.perf_counter)
def test_a_levels_records_written_and_synced_cost_per_chunk(benchmark, record_property, tmp_path, level_records):
    logs: list[RequestLog] = []

    def fresh() -> tuple[tuple, dict]:
        log = RequestLog(tmp_path / f"r{len(logs)}.requests.jsonl").__enter__()
        logs.append(log)
        return (log,), {}

    benchmark.pedantic(lambda log: log.write_level({"concurrency": 16}, level_records), setup=fresh, rounds=20,
                       warmup_rounds=2)
    for log in logs:
        log.__exit__(None, None, None)
    assert all(log.records == RESPONSES for log in logs)
    _per_chunk(benchmark, record_property, "level_records")


@pytest.mark.benchmark(group="writes", timer=time.perf_counter)
def test_the_same_records_as_written_before_cost_per_chunk(benchmark, record_property, tmp_path, level_records):
    """What a level's records cost before (serialised into a buffered file, never flushed nor synced):
    the part of the figure above that is not new."""
    files = []

    def fresh() -> tuple[tuple, dict]:
        files.append((tmp_path / f"b{len(files)}.requests.jsonl").open("w"))
        return (files[-1],), {}

    def before(sidecar) -> None:
        for record in level_records:
            sidecar.write(json.dumps({"concurrency": 16, **record.to_json()}) + "\n")

    benchmark.pedantic(before, setup=fresh, rounds=20, warmup_rounds=2)
    for f in files:
        f.close()
    _per_chunk(benchmark, record_property, "level_records_before")


@pytest.mark.benchmark(group="writes", timer=time.perf_counter)
def test_a_result_rewritten_after_a_level_cost_per_chunk(benchmark, record_property, tmp_path):
    result = synthetic_result(Spec(levels=(1, 8, 16), requests=100))  # the third level's rewrite: the largest
    path = tmp_path / "llamacpp_x.json"
    benchmark.pedantic(write_result, args=(path, result), rounds=20, warmup_rounds=2)
    assert json.loads(path.read_text()) == result
    _per_chunk(benchmark, record_property, "result_rewrite")

