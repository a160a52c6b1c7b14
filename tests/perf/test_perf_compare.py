"""`cellbench perf compare`: cellbench's client beside vLLM's own, on the null server and on a real
llama-server.

What is checked holds however busy the host is: the null server's bytes in its scheduled mode
(every client counts exactly max_tokens token chunks), the figures' formulas on scripted runs,
vLLM's detailed result read back, and end to end that both clients' rows come out of the real
command with every request answered and every chunk counted. How fast or how exact the clients
were is what the command reports; no test asserts it.
"""

from __future__ import annotations

import gc
import json
import math
import re
import socket
import subprocess
import sys

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.perf.client_figures import (
    Spread,
    chunk_rate,
    cpu_per_chunk,
    cpu_share,
    itl_errors,
    steady_write_rate,
    stream_of,
    timing_error,
    ttft_errors,
)
from bench.perf.clients import ClientRun, collector_pauses
from bench.perf.llama.compare import paired, paired_difference
from bench.perf.null_server.server import paced_server
from bench.perf.peers.vllm import read_vllm_result, vllm_install
from tests.support.busy import TEST_TIMEOUT_S
from tests.support.perf_compare import perf_compare


def _post(sock: socket.socket, body: dict) -> None:
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))


def _get(sock: socket.socket, path: str) -> None:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


def _read_until(sock: socket.socket, end: bytes) -> bytes:
    got = b""
    while not got.endswith(end):
        more = sock.recv(65536)
        assert more, f"connection closed after {got!r}"
        got += more
    return got


def _events(response: bytes) -> list[str]:
    """The data payloads of a chunked SSE response, in order."""
    body = response.split(b"\r\n\r\n", 1)[1]
    payloads, rest = [], body
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        payloads.append(rest[:n])
        rest = rest[n + 2:]
    text = b"".join(payloads).decode()
    return [e.removeprefix("data: ") for e in text.split("\n\n") if e]


@pytest.mark.parametrize("precise", [False, True])
def test_scheduled_mode_frames_exactly_n_token_chunks_keeps_alive_and_logs_what_it_did(precise):
    with paced_server(1.0, first_ms=2.0, precise=precise) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            _post(sock, {"model": "m", "messages": [], "max_completion_tokens": 3, "stream": True})
            first = _events(_read_until(sock, b"0\r\n\r\n"))
            _post(sock, {"model": "m", "messages": [], "max_tokens": 1, "stream": True})  # same connection
            second = _events(_read_until(sock, b"0\r\n\r\n"))
            _get(sock, "/metrics")
            assert _read_until(sock, b"\r\n\r\n").startswith(b"HTTP/1.1 404 ")
            _get(sock, "/stats")
            stats = json.loads(_read_until(sock, b"}").split(b"\r\n\r\n", 1)[1])
            _get(sock, "/log")
            log = json.loads(_read_until(sock, b"}").split(b"\r\n\r\n", 1)[1]) if precise else {}
    chunks = [json.loads(e) for e in first[:-1]]
    assert first[-1] == "[DONE]" and len(chunks) == 4  # three token chunks, then usage
    deltas = [c["choices"][0]["delta"] for c in chunks[:3]]
    named = " #1" if precise else " tok"  # a logged stream's first chunk names it
    assert deltas == [{"role": "assistant", "content": named}, {"content": " tok"}, {"content": " tok"}]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:3]] == [None, None, "length"]
    assert chunks[3]["choices"] == [] and chunks[3]["usage"]["completion_tokens"] == 3
    only = json.loads(second[0])["choices"][0]
    assert only["delta"]["role"] == "assistant" and only["finish_reason"] == "length"
    assert json.loads(second[1])["usage"]["completion_tokens"] == 1 and second[-1] == "[DONE]"
    assert stats["n"] == (4 if precise else 0)  # the pacer timed every token chunk it wrote
    if precise:
        assert 0 <= stats["p50_us"] <= stats["p99_us"] <= stats["max_us"]
        assert sorted(log) == ["1", "2"] and [len(log["1"]), len(log["2"])] == [4, 2]  # read, then each write
        read, *writes = log["1"]
        assert read < writes[0] < writes[1] < writes[2]  # 2 ms, then 1 ms apart as scheduled, give or take


def _run(chunks: int, cpu_s: float, duration_s: float = 1.0, timings=()) -> ClientRun:
    return ClientRun(client="x", ok=len(timings) or 1, failed=0, chunks=chunks, duration_s=duration_s, cpu_s=cpu_s,
                     wall_s=duration_s + 1, timings=list(timings), reported={})


def test_figures_follow_their_formulas():
    small, large = _run(1_000, 2.0), _run(3_000, 2.05, duration_s=0.5)
    assert cpu_per_chunk(small, large) == pytest.approx(0.05 / 2_000)  # start-up (2 s) cancels out
    assert cpu_per_chunk(large, large) is None
    assert chunk_rate(large) == 6_000
    assert cpu_share(_run(1_000, 2.0, duration_s=0.2), large) == pytest.approx(0.05 / 0.3)
    # The server read request 7 at 100.0, wrote its chunks at 100.020, .030, .041; request 8's
    # stream is not in this log. The client saw TTFT 21 ms and gaps of 10 and 12 ms.
    log = {"7": [100.0, 100.020, 100.030, 100.041]}
    run = _run(3, 0.0, timings=[(" #7 tok tok", 0.021, [0.010, 0.012]), (" #8 tok", 0.02, [0.01])])
    assert stream_of(" #7 tok tok") == "7" and stream_of(" tok") is None
    assert ttft_errors(run, log) == pytest.approx([0.001])  # signed: this client reads long
    assert itl_errors(run, log) == pytest.approx([0.0, 0.001])
    t = timing_error([(run, log), (run, log)], 5000, opening=0)
    assert (t.requests, t.gaps, t.unmatched, t.offered_chunks_per_s) == (2, 4, 2, 5000)
    assert t.ttft_p50_ms == pytest.approx(1.0) and t.ttft_bias_ms == pytest.approx(1.0)
    assert t.ttft_opening_p50_ms is None
    assert t.itl_p50_ms == pytest.approx(0.5) and t.itl_p99_ms == pytest.approx(1.0, abs=0.01)
    # The opening round (here each run's first request) is kept apart from the TTFT percentiles.
    opened = timing_error([(run, log)], 5000, opening=1)
    assert opened.ttft_opening_p50_ms == pytest.approx(1.0) and opened.ttft_p50_ms is None
    assert (opened.requests, opened.gaps) == (1, 2)
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0, 3) and Spread.of([]) is None


def test_the_offered_rate_is_what_the_server_wrote_once_every_slot_streamed():
    # Two slots: streams 1 and 2 open the run (first chunks at 1.0 and 1.5); stream 3, the last
    # request, was read at 3.0. From 1.5 to 3.0 the server wrote 2 + 3 chunks: 5 in 1.5 s.
    log = {"1": [0.0, 1.0, 1.6, 2.0], "2": [0.0, 1.5, 2.5, 2.9], "3": [3.0, 3.1, 3.2]}
    assert steady_write_rate(log, opening=2) == pytest.approx(5 / 1.5)
    assert steady_write_rate(log, opening=0) is None  # no opening round named: no window
    assert steady_write_rate({"1": [0.0, 1.0]}, opening=2) is None  # stream 2 never wrote
    assert steady_write_rate({"1": [2.0, 3.0]}, opening=1) is None  # the last read came before the first write


def test_vllm_detailed_result_is_read_per_request():
    data = {"duration": 2.5, "errors": ["", "Traceback ...\nClientConnectorError: reset\n", ""],
            "ttfts": [0.02, 0.0, 0.03], "itls": [[0.01, 0.01], [], [0.01]],
            "generated_texts": [" #3 tok tok", "", " #5 tok"],
            "output_throughput": 100.0, "median_ttft_ms": 25.0, "median_tpot_ms": 10.0, "median_itl_ms": 10.0}
    run = read_vllm_result(data, cpu_s=12.0, wall_s=15.0)
    assert (run.ok, run.failed, run.chunks) == (2, 1, 5)
    assert run.timings == [(" #3 tok tok", 0.02, [0.01, 0.01]), (" #5 tok", 0.03, [0.01])]
    assert run.errors == ["ClientConnectorError: reset"] and run.reported["ttft_p50_ms"] == 25.0
    # Without --save-detailed (the CPU runs): vLLM's counts, one output token a chunk.
    plain = read_vllm_result({"duration": 2.5, "completed": 9, "failed": 1, "total_output_tokens": 900}, 1.0, 3.0)
    assert (plain.ok, plain.failed, plain.chunks, plain.timings) == (9, 1, 900, [])



@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_compare_prints_a_row_per_client_with_every_chunk_counted(record_property):
    streams, tokens, requests, rate = 4, 10, 8, 400
    with_vllm = vllm_install() is not None
    doc = perf_compare("--streams", str(streams), "--tokens", str(tokens), "--requests", str(requests),
                   "--rates", str(rate), "--requests-per-stream", "2", "--peers", "vllm" if with_vllm else "none")
    rows = {r["client"]: r for r in doc["rows"]}
    assert set(rows) == {"cellbench", "cellbench --keep-alive", *(["vllm"] if with_vllm else [])}
    paced_streams = rate * 10 // 1000
    for run in doc["runs"]:
        expected = {"unpaced N": requests, "unpaced 3N": 3 * requests, f"paced {rate}": 2 * paced_streams}[run["kind"]]
        assert (run["ok"], run["failed"]) == (expected, 0), run
        assert run["chunks"] == expected * tokens, run  # the same count from both clients
        if run["kind"].startswith("paced"):  # each paced run's own errors, beside the pooled ones of its row
            assert run["timing"]["requests"] == expected and run["timing"]["itl_p99_ms"] is not None, run
            # and what the host did meanwhile: the server's preemptions for every client, and for
            # cellbench's own the loop thread's waits for a CPU and the collector's pauses
            assert run["host"]["server_preempted"] >= 0, run
            if run["client"].startswith("cellbench"):
                evidence = run["host"]
                assert evidence["run_queue_wait_ms"] >= 0 and evidence["gc_collections"] >= 0, run
                assert evidence["gc_pause_total_ms"] >= evidence["gc_pause_max_ms"] >= 0, run
    for name, r in rows.items():
        assert r["cpu_us_per_chunk"] is not None and r["chunks_per_s"]["median"] > 0
        (timing,) = r["timing"]
        assert (timing["requests"], timing["gaps"]) == (2 * paced_streams, 2 * paced_streams * (tokens - 1))
        assert timing["ttft_p50_ms"] is not None and timing["ttft_opening_p50_ms"] is not None
        assert timing["unmatched"] == 0  # every request found in the server's log
        assert timing["itl_p99_ms"] is not None and r["failed"] == 0
        record_property(f"{name}_cpu_us_per_chunk", r["cpu_us_per_chunk"]["median"])
        record_property(f"{name}_itl_error_p99_ms", timing["itl_p99_ms"])
    if not with_vllm:
        pytest.skip("vLLM's client: no vLLM install in the framework cache (cellbench install vllm); "
                    "cellbench's row checked alone")


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_llama_server_mode_alternates_both_clients_on_the_same_prompts(llama_server, record_property):
    if vllm_install() is None:
        pytest.skip("needs vLLM's client: no vLLM install in the framework cache (cellbench install vllm)")
    doc = perf_compare("--llama-server", "--pairs", "1", "--llama-requests", "4", "--tokens", "8", "--peers", "vllm")
    assert [r["client"] for r in doc["runs"]] == ["cellbench", "vllm"]  # A B
    rows = {r["client"]: r for r in doc["rows"]}
    assert rows["cellbench"]["failed"] == 0 and rows["cellbench"]["requests"] == 4
    assert rows["vllm"]["requests"] == 4  # its failures (reused keep-alive connections) are reported
    for name, r in rows.items():
        assert r["output_throughput_tps"]["median"] > 0 and r["ttft_p50_ms"]["median"] > 0, r
        # The server's own figure from its log: a client times from before the server starts the
        # first request to after it released the last, so it cannot report more tokens a second.
        assert r["server_tps"]["median"] > 0 and r["vs_server"]["high"] <= 0.01, r
        record_property(f"{name}_failed", r["failed"])
        record_property(f"{name}_vs_server", r["vs_server"]["median"])


def test_a_paired_difference_is_the_median_ratio_with_its_order_statistic_interval():
    # 20 pairs: the 95% interval of the median is [d(6), d(15)], coverage 1 - 2 P(Bin(20, 1/2) <= 5).
    b = [100.0] * 20
    a = [100.0 + x for x in range(-9, 11)]  # differences -9% .. +10%
    p = paired_difference(a, b)
    assert p is not None and p.n == 20
    assert p.median == pytest.approx(0.005) and (p.low, p.high) == (pytest.approx(-0.04), pytest.approx(0.05))
    assert p.coverage == pytest.approx(1 - 2 * sum(math.comb(20, i) for i in range(6)) / 2**20)  # 0.9586
    # A drift that moves both clients of a pair alike cancels: 10% apart throughout, the host's speed doubling.
    slow_then_fast = [1.0 + k / 10 for k in range(10)]
    assert paired_difference([1.1 * x for x in slow_then_fast], slow_then_fast).median == pytest.approx(0.1)
    five = paired_difference([2.0, 3.0, 4.0, 5.0, 6.0], [2.0] * 5)  # too few pairs for 95%: the whole range
    assert (five.low, five.high, five.coverage) == (0.0, 2.0, pytest.approx(1 - 2 / 32))
    assert paired_difference([], []) is None


def test_pairs_are_the_kth_runs_of_each_client_and_clean_pairs_leave_out_failed_requests():
    def run(tps: float, failed: int = 0) -> ClientRun:
        figures: dict[str, float | None] = {"output_throughput_tps": tps, "tpot_p50_ms": 1.0, "itl_p50_ms": 1.0,
                                           "ttft_p50_ms": 50.0}
        return ClientRun(client="x", ok=40 - failed, failed=failed, chunks=0, duration_s=1.0, cpu_s=0.0, wall_s=1.0,
                         timings=[], reported=figures)

    # A B, B A, A B: the host doubles its speed between pairs, and B loses 4 of 40 requests in pair 2.
    runs = [("a", run(100)), ("b", run(100)), ("b", run(180, failed=4)), ("a", run(200)), ("a", run(400)),
            ("b", run(400))]
    every = paired(runs, "a", "b")
    assert every["output_throughput_tps"]["n"] == 3 and every["output_throughput_tps"]["median"] == pytest.approx(0.0)
    assert every["output_throughput_tps"]["high"] == pytest.approx(200 / 180 - 1)
    clean = paired(runs, "a", "b", clean=True)
    assert clean["clean"] and clean["output_throughput_tps"]["n"] == 2
    assert clean["output_throughput_tps"]["median"] == pytest.approx(0.0) and clean["ttft_p50_ms"]["median"] == 0.0


@pytest.mark.parametrize("tool, args, option", [
    ("bench.perf.client_overhead", ["--interval-ms", "0"], "--interval-ms"),
    ("bench.perf.client_overhead", ["--interval-ms", "-5"], "--interval-ms"),
    ("bench.perf.client_overhead", ["--requests-per-stream", "0"], "--requests-per-stream"),
    ("bench.perf.compare", ["--interval-ms", "0"], "--interval-ms"),
    ("bench.perf.compare", ["--rates", "5000,,10000"], "--rates"),
    ("bench.perf.compare", ["--rates", "0"], "--rates"),
    ("bench.perf.compare", ["--repeat", "0"], "--repeat"),
    ("bench.perf.compare", ["--first-ms", "-1"], "--first-ms"),
])
@pytest.mark.session
def test_a_value_that_cannot_describe_a_run_is_a_usage_error_naming_the_option(tool, args, option):
    """Before anything starts: exit 2 and one line naming the option, not a ZeroDivisionError
    mid-run or a list silently run short."""
    proc = subprocess.run([sys.executable, "-m", tool, *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"error: argument {option}: takes " in proc.stderr and "Traceback" not in proc.stderr
    assert re.search(rf"got '?{re.escape(args[-1])}'?$", proc.stderr.strip()), proc.stderr



def test_the_collectors_pauses_are_timed_while_the_block_runs_and_only_then():
    with collector_pauses() as pauses:
        junk = [[i] for i in range(1000)]  # something for it to traverse
        gc.collect()
        gc.collect(0)
    assert len(pauses) >= 2 and all(d > 0 for _, d in pauses)
    assert pauses == sorted(pauses)  # (start, duration) in the order they ran
    seen, callbacks = len(pauses), len(gc.callbacks)
    gc.collect()
    assert len(pauses) == seen and junk  # its callback went with the block
    assert callbacks == len(gc.callbacks)
