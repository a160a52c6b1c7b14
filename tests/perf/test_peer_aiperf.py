"""AIPerf as a peer of `cellbench perf compare`: its exports read back, and its row end to end.

The reader is checked on a real AIPerf 0.13.0 export of a run against the null server in which
three of six measured requests timed out (tests/data/peers/aiperf/README.md says how it was
made); the command is checked by running it with AIPerf from the framework cache.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.perf.client_figures import itl_errors, stream_of, ttft_errors
from bench.perf.clients import Workload
from bench.perf.null_server.server import MODEL
from bench.perf.peers import aiperf as peer
from bench.perf.peers import peers
from bench.setup.installs.cache import cached
from tests.support.busy import TEST_TIMEOUT_S
from tests.support.perf_compare import perf_compare

EXPORT = Path(__file__).parent.parent / "data" / "peers" / "aiperf"


def test_a_real_export_is_read_per_request_with_its_failures_apart():
    run = peer.read_aiperf_exports(EXPORT, cpu_s=7.0, wall_s=11.0)
    # The warm-up (stream 1) is left out; streams 3 and 4 timed out, 2, 5, 6 and 7 got all 5 chunks.
    assert (run.ok, run.failed, run.chunks, run.cpu_s, run.wall_s) == (4, 2, 20, 7.0, 11.0)
    assert [stream_of(text) for text, _, _ in run.timings] == ["5", "2", "6", "7"]  # in AIPerf's record order
    assert run.timings[1] == (" #2 tok tok tok tok", pytest.approx(0.037815964),
                              pytest.approx([0.011437832, 0.008399331, 0.009984243, 0.009856835]))
    assert all(len(gaps) == 4 for _, _, gaps in run.timings)
    assert run.errors == ["TimeoutError: TimeoutError()"] * 2
    assert run.duration_s == pytest.approx(0.141542656)
    # AIPerf's own medians, over the successful requests only.
    assert run.reported == {"output_throughput_tps": pytest.approx(136.85373696646064),
                            "ttft_p50_ms": pytest.approx(24.4770505), "tpot_p50_ms": pytest.approx(9.951299125),
                            "itl_p50_ms": pytest.approx(10.037863)}
    # Every successful request is found in the server's log of the same run, every gap beside the server's.
    log = json.loads((EXPORT / "server_log.json").read_text())
    assert len(ttft_errors(run, log)) == 4 and len(itl_errors(run, log)) == 16
    assert max(itl_errors(run, log)) < 0.005  # in seconds, as the log is: a ms-for-s slip would be 10 s off


def test_without_per_request_records_the_aggregate_counts_are_read(tmp_path):
    shutil.copy(EXPORT / peer.AGGREGATE, tmp_path / peer.AGGREGATE)  # as `--export-level summary` leaves it
    run = peer.read_aiperf_exports(tmp_path, cpu_s=1.0, wall_s=2.0)
    # request_count is the successful requests, not completed_request_count (6: both kinds).
    assert (run.ok, run.failed, run.chunks, run.timings) == (4, 2, 20, [])
    assert run.errors == ["TimeoutError: TimeoutError()"] and run.reported["ttft_p50_ms"] == pytest.approx(24.4770505)


def test_the_command_sends_the_workload_in_order_after_its_warm_up(tmp_path):
    work = Workload(base_url="http://127.0.0.1:9", model=MODEL, concurrency=3, requests=4, prompts=("a", "b", "c"),
                    max_tokens=7, extra={"ignore_eos": True}, tokenizer="/tok")
    argv = peer.aiperf_argv("aiperf", work, tmp_path / "d.jsonl", tmp_path / "art")
    opts = dict(zip(argv, argv[1:], strict=False))  # each option and the word after it
    assert opts["--concurrency"] == "3" and opts["--request-count"] == "4" and opts["--warmup-request-count"] == "1"
    assert json.loads(opts["--extra-inputs"]) == {"max_tokens": 7, "ignore_eos": True}
    assert opts["--connection-reuse-strategy"] == "pooled" and opts["--export-level"] == "records"
    assert "--export-outputs-json" in argv
    assert opts["--dataset-sampling-strategy"] == "sequential" and "--use-server-token-count" in argv
    other = peer.aiperf_argv("aiperf", Workload("u", "tiny", 1, 1, ("a",), 1, detail=False), tmp_path / "d", tmp_path)
    assert other[other.index("--connection-reuse-strategy") + 1] == "never"
    assert other[other.index("--export-level") + 1] == "summary"
    assert "HF_HUB_OFFLINE" not in peer.child_env()
    assert [p.name for p in peers()].count("aiperf") == 1



def _installed() -> None:
    if cached(peer.RECIPE) is None:
        pytest.skip("AIPerf is not in the framework cache (cellbench install aiperf)")


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_compare_gives_aiperf_a_row_with_every_chunk_counted(record_property):
    _installed()
    streams, tokens, requests, rate = 4, 10, 8, 400
    doc = perf_compare("--streams", str(streams), "--tokens", str(tokens), "--requests", str(requests),
                   "--rates", str(rate), "--requests-per-stream", "2", "--peers", "aiperf")
    (row,) = [r for r in doc["rows"] if r["client"] == "aiperf"]
    paced_streams = rate * 10 // 1000
    runs = [run for run in doc["runs"] if run["client"] == "aiperf"]
    assert sorted(run["kind"] for run in runs) == ["paced 400", "unpaced 3N", "unpaced N"]
    for run in runs:
        expected = {"unpaced N": requests, "unpaced 3N": 3 * requests, f"paced {rate}": 2 * paced_streams}[run["kind"]]
        assert (run["ok"], run["failed"]) == (expected, 0), run
        assert run["chunks"] == expected * tokens, run
    assert row["cpu_us_per_chunk"] is not None and row["chunks_per_s"]["median"] > 0 and row["failed"] == 0
    (timing,) = row["timing"]
    assert (timing["requests"], timing["gaps"]) == (2 * paced_streams, 2 * paced_streams * (tokens - 1))
    assert timing["unmatched"] == 0  # every request found in the server's log
    record_property("aiperf_cpu_us_per_chunk", row["cpu_us_per_chunk"]["median"])
    record_property("aiperf_itl_error_p99_ms", timing["itl_p99_ms"])


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_on_llama_server_aiperf_fails_no_request_with_a_connection_per_request(llama_server, record_property):
    _installed()
    doc = perf_compare("--llama-server", "--pairs", "1", "--llama-requests", "4", "--tokens", "8", "--peers", "aiperf")
    rows = {r["client"]: r for r in doc["rows"]}
    assert [r["client"] for r in doc["runs"]] == ["cellbench", "aiperf"]
    assert rows["aiperf"]["requests"] == 4 and rows["aiperf"]["failed"] == 0, rows["aiperf"]
    assert rows["aiperf"]["output_throughput_tps"]["median"] > 0 and rows["aiperf"]["ttft_p50_ms"]["median"] > 0
    # AIPerf's duration runs from its first request sent to its last response: its throughput is
    # at most the server's own (from the server's log), however much AIPerf slowed that server.
    assert rows["aiperf"]["vs_server"]["high"] <= 0.01, rows["aiperf"]
    record_property("aiperf_vs_server", rows["aiperf"]["vs_server"]["median"])
    record_property("aiperf_tpot_p50_ms", rows["aiperf"]["tpot_p50_ms"]["median"])
