"""guidellm 0.8.1 as a `cellbench perf compare` peer: its real JSON output read back (captured
from the real tool against the paced null server, tests/data/peers/guidellm), and end to end its
row out of the real command. How fast or how exact guidellm is, the command reports; no test
asserts it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bench.perf.client_figures import stream_of, timing_error, ttft_errors
from bench.perf.clients import Workload
from bench.perf.peers.guidellm import RECIPE, read_guidellm_result, scenario
from bench.setup.installs.cache import cached
from tests.support.busy import TEST_TIMEOUT_S
from tests.support.perf_compare import perf_compare

DATA = Path(__file__).resolve().parents[1] / "data" / "peers" / "guidellm"


def _output(name: str) -> dict:
    with gzip.open(DATA / name) as f:
        found: dict = json.load(f)
    return found


def test_a_real_paced_output_is_read_per_request_in_the_order_sent():
    data = _output("paced.json.gz")
    log = json.loads((DATA / "paced-server-log.json").read_text())
    run = read_guidellm_result(data, cpu_s=3.0, wall_s=20.0)
    assert (run.ok, run.failed, run.chunks, run.errors) == (6, 0, 30, [])  # 6 requests of 5 token chunks
    assert [stream_of(text) for text, _, _ in run.timings] == ["1", "2", "3", "4", "5", "6"]  # as sent
    raw = {r["output"][:32]: r["info"]["timings"] for r in data["benchmarks"][0]["requests"]["successful"]}
    for text, ttft, gaps in run.timings:
        t = raw[text]
        assert ttft == pytest.approx(t["first_token_iteration"] - t["request_start"], abs=1e-9)
        assert gaps == []  # guidellm keeps no time per chunk
    # Against the server's own log of the same run: each TTFT a little longer than the server's.
    assert all(0 < e < 0.005 for e in ttft_errors(run, log)), ttft_errors(run, log)
    t = timing_error([(run, log)], 300, opening=3)
    assert (t.requests, t.gaps, t.unmatched) == (6, 0, 0)
    assert t.itl_p50_ms is None and t.itl_p99_ms is None  # its ITL-error cell is "-"
    assert run.reported["itl_p50_ms"] is None
    assert run.reported["tpot_p50_ms"] == pytest.approx(10.0, abs=0.5)  # the server wrote a chunk per 10 ms
    ttfts = sorted(ttft * 1e3 for _, ttft, _ in run.timings)
    assert run.reported["ttft_p50_ms"] == pytest.approx((ttfts[2] + ttfts[3]) / 2)
    assert run.reported["output_throughput_tps"] == pytest.approx(30 / run.duration_s, rel=1e-6)


def test_failed_requests_of_a_real_output_are_counted_and_named():
    run = read_guidellm_result(_output("killed.json.gz"), cpu_s=3.0, wall_s=20.0)
    assert (run.ok, run.failed, run.chunks) == (2, 4, 100)  # the first round's two streams of 50 chunks
    assert [stream_of(text) for text, _, _ in run.timings] == ["1", "2"]
    assert run.errors[0].startswith("RemoteProtocolError(") and run.errors[-1].startswith("ConnectError(")
    assert len(run.errors) == 3  # a few, not all


def test_an_incomplete_request_counts_as_failed():
    data = _output("killed.json.gz")
    requests = data["benchmarks"][0]["requests"]
    requests["incomplete"] = requests["errored"][:1]  # cancelled before it finished
    requests["errored"] = requests["errored"][1:]
    assert read_guidellm_result(data, 0.0, 0.0).failed == 4


def test_the_scenario_sends_exactly_the_workload(tmp_path):
    work = Workload("http://127.0.0.1:9", "m", concurrency=7, requests=21, prompts=("a b c d",), max_tokens=33,
                    extra={"ignore_eos": True, "temperature": 0.0}, tokenizer="/tok")
    spec = scenario(work, tmp_path / "d.jsonl", tmp_path / "out.json")["spec"]
    assert spec["profile"] == {"kind": "concurrent", "streams": 7}
    assert spec["constraints"] == [{"kind": "max_requests", "count": 21}]
    backend = spec["backend"]
    assert (backend["validate_backend"], backend["stream"], backend["max_tokens"]) == (False, True, 33)
    assert backend["extras"]["body"] == {"ignore_eos": True, "temperature": 0.0, "max_tokens": 33}
    assert spec["metrics"]["sample_size"] is None and spec["data_loader"]["shuffle"] is False
    assert spec["tokenizer"]["model"] == "/tok"
    with pytest.raises(ValueError, match="tokenizer"):
        scenario(Workload("u", "m", 1, 1, ("p",), 1), tmp_path / "d", tmp_path / "o")



def _installed() -> None:
    if cached(RECIPE) is None:
        pytest.skip("guidellm is not installed in the framework cache (cellbench install guidellm)")


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_compare_gives_guidellm_a_row_with_every_chunk_counted(record_property):
    _installed()
    streams, tokens, requests, rate = 4, 10, 8, 400
    doc = perf_compare("--streams", str(streams), "--tokens", str(tokens), "--requests", str(requests),
                   "--rates", str(rate), "--requests-per-stream", "2", "--peers", "guidellm")
    paced_streams = rate * 10 // 1000
    runs = [r for r in doc["runs"] if r["client"] == "guidellm"]
    assert [r["kind"] for r in runs] == ["unpaced N", "unpaced 3N", f"paced {rate}"]
    for run in runs:
        expected = {"unpaced N": requests, "unpaced 3N": 3 * requests, f"paced {rate}": 2 * paced_streams}[run["kind"]]
        assert (run["ok"], run["failed"], run["chunks"]) == (expected, 0, expected * tokens), run
    (row,) = [r for r in doc["rows"] if r["client"] == "guidellm"]
    assert row["version"] == "0.8.1" and row["failed"] == 0 and row["missing"] is None
    assert row["cpu_us_per_chunk"] is not None and row["chunks_per_s"]["median"] > 0
    (timing,) = row["timing"]
    assert (timing["requests"], timing["unmatched"], timing["gaps"]) == (2 * paced_streams, 0, 0)
    assert timing["ttft_p50_ms"] is not None and timing["ttft_opening_p50_ms"] is not None
    assert timing["itl_p99_ms"] is None  # no per-chunk times: the cell says "-"
    record_property("guidellm_cpu_us_per_chunk", row["cpu_us_per_chunk"]["median"])


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_llama_server_mode_runs_guidellm_beside_cellbench(llama_server, record_property):
    _installed()
    doc = perf_compare("--llama-server", "--pairs", "1", "--llama-requests", "4", "--tokens", "8",
                       "--peers", "guidellm")
    assert [r["client"] for r in doc["runs"]] == ["cellbench", "guidellm"]
    rows = {r["client"]: r for r in doc["rows"]}
    assert (rows["guidellm"]["requests"], rows["guidellm"]["failed"]) == (4, 0), rows["guidellm"]["errors"]
    g = rows["guidellm"]
    assert g["output_throughput_tps"]["median"] > 0 and g["ttft_p50_ms"]["median"] > 0
    assert g["tpot_p50_ms"]["median"] > 0 and g["itl_p50_ms"] is None
    record_property("guidellm_tpot_p50_ms", g["tpot_p50_ms"]["median"])
