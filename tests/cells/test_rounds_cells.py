"""--rounds on a real cell: llama-server on the built-in tiny model, each level measured twice.

What a user relies on: a fresh server for every (level, round) (or one throughout with
--share-server), every round kept in the result, the level shown being the median of its rounds
with intervals from them, and each request line saying which round it belongs to.
"""

from __future__ import annotations

import json
import statistics

import pytest

from tests.cells.test_cells_llamacpp import load_valid, no_leaked_servers, result_files, run_pytest
from tests.support.busy import TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]
__all__ = ["no_leaked_servers"]  # the fixture, used by name

ARGS = ("-m", "chat", "-k", "llamacpp", "--rounds", "2", "--concurrency", "1,2", "--requests", "8", "--port", "0")


def _run(tmp_path, *extra: str) -> tuple[dict, list[dict]]:
    proc = run_pytest(*ARGS, *extra, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat --rounds 2")
    records = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    return result, records


def _check_rounds(result: dict, records: list[dict]) -> None:
    assert result["run_config"]["rounds"] == 2
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2], "one combined level per level"
    for level in result["levels"]:
        rounds = level["rounds"]
        assert [r["round"] for r in rounds] == [1, 2] and all(r["concurrency"] == level["concurrency"] for r in rounds)
        assert level["successful"] == sum(r["successful"] for r in rounds) == 16
        assert level["num_requests"] == 16 and level["failed"] == 0
        assert level["output_tokens_total"] == sum(r["output_tokens_total"] for r in rounds)
        assert level["ttft_ms"]["p50"] == pytest.approx(statistics.median(r["ttft_ms"]["p50"] for r in rounds))
        assert level["ttft_ms"]["n"] == 16
        assert level["output_throughput_tps"] == pytest.approx(
            statistics.median(r["output_throughput_tps"] for r in rounds))
        low, high = level["ttft_ms"]["ci95"]["p50"]["low"], level["ttft_ms"]["ci95"]["p50"]["high"]
        assert low <= level["ttft_ms"]["p50"] <= high, "the p50's interval from the two rounds"
        assert level["ttft_ms"]["ci95"]["p99"] == {"low": None, "high": None, "needs_n": 299}
        tput = level["throughput_ci95"]["output_throughput_tps"]
        assert tput["low"] <= level["output_throughput_tps"] <= tput["high"]
        assert level["uncertainty"] == {"basis": "rounds", "rounds": 2, "windows": None}
        # each round, on its own, says how sure it is within itself: 8 requests give 4 time windows
        assert all(r["uncertainty"] == {"basis": "within-run", "rounds": 1, "windows": 4} for r in rounds)
        for r in rounds:
            measured = [x for x in records if x["concurrency"] == level["concurrency"] and x["round"] == r["round"]
                        and not x["warmup"]]
            assert len(measured) == 8 and r["output_tokens_total"] == sum(x["usage_completion_tokens"]
                                                                          for x in measured)
    assert all("round" in x for x in records), "every request line says its round"


def test_two_rounds_each_level_and_round_on_a_fresh_server(tmp_path, no_leaked_servers):
    result, records = _run(tmp_path)
    _check_rounds(result, records)
    assert [s["levels"] for s in result["servers"]] == [[1], [2], [1], [2]], "round-major, a server each"
    logs = [s["log"].rsplit("/", 1)[1] for s in result["servers"]]
    assert len(set(logs)) == 4 and any(name.endswith("_c2.r2.server.log") for name in logs), logs


def test_two_rounds_on_one_shared_server(tmp_path, no_leaked_servers):
    result, records = _run(tmp_path, "--share-server")
    _check_rounds(result, records)
    assert [s["levels"] for s in result["servers"]] == [[1, 2, 1, 2]], "one server, both rounds round-major"
