"""Benchmark of the client's receive path per chunk, without sockets: one real response of the
unpaced null server (bench/perf/client_overhead.py, 100 content chunks, read here once over a
socket) replayed into `Connection.data_received` four HTTP chunks a read, as the unpaced server's
reads arrive at the client (docs/measurements.md has the measured reads a chunk), through httptools, the
response's hooks, the SSE stream and the record. No event loop wake-up, no `recv`: what is left is
the Python work each chunk costs, which is what the repeated-chunk shortcut (bench.core.sse.repeat)
changed. Timed by this process's CPU; figures only, no floor:

    .venv/bin/python -m pytest tests/load/test_receive_benchmark.py -p no:cacheprovider
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from bench.core.records import RequestRecord
from bench.load.http.connection import Connection
from bench.load.request import Flight, _ChatResponse
from bench.perf.null_server.server import MODEL, paced_server

RESPONSES, CHUNKS_PER_READ = 200, 4


def null_server_response() -> bytes:
    """One whole streamed response of the unpaced null server, as its bytes came."""
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "go"}], "max_tokens": 100,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    with paced_server(0.0, first_ms=0.0) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(body), body))
            data = b""
            while not data.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's last chunk
                data += sock.recv(65536)
    return data


def as_reads(data: bytes) -> list[bytes]:
    """The response as reads of CHUNKS_PER_READ HTTP chunks each, the head with the first."""
    at = data.index(b"\r\n\r\n") + 4
    head, pieces = data[:at], []
    while at < len(data):
        eol = data.index(b"\r\n", at)
        end = eol + 2 + int(data[at:eol], 16) + 2
        pieces.append(data[at:end])
        at = end
    reads = [b"".join(pieces[k:k + CHUNKS_PER_READ]) for k in range(0, len(pieces), CHUNKS_PER_READ)]
    return [head + reads[0], *reads[1:]]


class _Transport:
    """What Connection asks of a transport: it takes every byte at once."""

    def write(self, data: bytes) -> None: ...
    def get_write_buffer_size(self) -> int: return 0
    def is_closing(self) -> bool: return False
    def close(self) -> None: ...
    def abort(self) -> None: ...


def replay(reads: list[bytes]) -> list[RequestRecord]:
    async def run() -> list[RequestRecord]:
        records = []
        for k in range(RESPONSES):
            conn = Connection()
            conn.connection_made(_Transport())  # type: ignore[arg-type]
            rec = RequestRecord(index=k, prompt_name="p")
            done = conn.send(b"", _ChatResponse(Flight(rec), lambda n: None))
            for data in reads:
                conn.data_received(data)
            assert done.done()
            records.append(rec)
        return records

    return asyncio.run(run())


@pytest.mark.benchmark(group="client", timer=time.process_time)
def test_receive_path_cpu_per_chunk(benchmark, record_property):
    reads = as_reads(null_server_response())
    records = benchmark.pedantic(replay, args=(reads,), rounds=5, warmup_rounds=1)
    assert all(r.ok and r.n_chunks == 100 for r in records), [r.error for r in records if not r.ok][:3]
    assert all(r.usage_completion_tokens == 100 for r in records)
    if benchmark.stats is None:  # --benchmark-disable, or under xdist: ran once, not timed
        return
    chunks = RESPONSES * 100
    benchmark.extra_info["us_per_chunk_median"] = round(benchmark.stats.stats.median / chunks * 1e6, 3)
    benchmark.extra_info["us_per_chunk_min"] = round(benchmark.stats.stats.min / chunks * 1e6, 3)
    record_property("receive_cpu_us_per_chunk_median", benchmark.extra_info["us_per_chunk_median"])
