"""The load generator's HTTP/1.1 client (bench.load.http, bench.load.request.ChatClient) against
real bytes over a real 127.0.0.1 socket.

`RawServer` runs a script per accepted connection in a thread with a blocking socket and
TCP_NODELAY, so every byte on the wire, and where the client's reads split, is the test's: a
write followed by a pause arrives as a read of its own. Each test runs on the standard loop and
on uvloop when it is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from bench.core.level_run import ConnectionCounts
from bench.core.records import ErrorType, RequestRecord
from bench.load.http import connection as http_connection
from bench.load.request import ChatClient, Flight

pytestmark = pytest.mark.timeout(60)

PAUSE = 0.03  # between two writes that must arrive as two reads
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()

try:
    import uvloop
except ImportError:  # optional
    uvloop = None  # type: ignore[assignment]

LOOPS = [pytest.param(asyncio.new_event_loop, id="asyncio")]
if uvloop is not None:
    LOOPS.append(pytest.param(uvloop.new_event_loop, id="uvloop"))


def sse(obj: dict | str) -> bytes:
    return b"data: " + (obj if isinstance(obj, str) else json.dumps(obj)).encode() + b"\n\n"


def delta(d: dict, finish: str | None = None) -> bytes:
    return sse({"object": "chat.completion.chunk", "model": "served-m",
                "choices": [{"index": 0, "delta": d, "finish_reason": finish}]})


EVENTS = [delta({"role": "assistant", "content": ""}), delta({"content": "Hello"}), delta({"content": " world"}),
          delta({}, "stop"), sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}), sse("[DONE]")]


def frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def head(status: str = "200 OK", *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers, "", ""])).encode()


CHUNKED = head("200 OK", "Content-Type: text/event-stream", "Transfer-Encoding: chunked")
WIRE = CHUNKED + b"".join(frame(e) for e in EVENTS) + b"0\r\n\r\n"  # one whole chunked SSE response


# ------------------------------------------------------------------ the scripted server

Script = Callable[[socket.socket, "RawServer"], None]


class RawServer:
    """A listening socket on 127.0.0.1; each accepted connection runs `script(conn, server)` in a
    thread of its own and is closed when the script returns."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self.requests: list[bytes] = []  # every request's head and body, in arrival order
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.script(conn, self)
            except OSError:
                pass  # the client went away: its business
            except BaseException as exc:  # noqa: BLE001 - a broken script fails the test
                self.errors.append(exc)

    def read_request(self, conn: socket.socket) -> bytes | None:
        """One request (head and Content-Length body), or None at EOF."""
        data = b""
        while b"\r\n\r\n" not in data:
            part = conn.recv(65536)
            if not part:
                return None
            data += part
        head_, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head_.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            part = conn.recv(65536)
            if not part:
                return None
            body += part
        self.requests.append(head_ + b"\r\n\r\n" + body)
        return head_

    def close(self) -> None:
        self.listener.close()
        for thread in self._threads:
            thread.join(5)
        assert not self.errors, self.errors


@contextlib.contextmanager
def serving(script: Script) -> Iterator[RawServer]:
    server = RawServer(script)
    try:
        yield server
    finally:
        server.close()


def send_pieces(conn: socket.socket, pieces: list[bytes], reads: list[float] | None = None,
                pause: float = PAUSE) -> None:
    """Each piece, then `pause`. Given the client's arrival stamps (`stamp_arrivals`), each piece is
    sent only once the client has read the one before, `pause` after that read: every piece is then
    a read of its own, and two reads are at least `pause` apart, however late a loaded host runs
    the client's loop (a pause alone lets pieces that wait unread coalesce into one read). A test
    that needs separate reads but no time between them gives `reads` and `pause=0`."""
    for piece in pieces:
        seen = len(reads) if reads is not None else 0
        conn.sendall(piece)
        if reads is not None:
            limit = time.monotonic() + 30
            while len(reads) == seen and time.monotonic() < limit:
                time.sleep(0.001)
        time.sleep(pause)


def reset(conn: socket.socket) -> None:
    """Close with an RST instead of a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


# ------------------------------------------------------------------ driving the client


@dataclass
class Run:
    records: list[RequestRecord]
    counts: ConnectionCounts
    outputs: list[int]  # what on_output was told, call by call
    lost: int  # times on_lost was called (twice per connection that failed on its own)


def exchange(loop_factory: Callable[[], asyncio.AbstractEventLoop], base_url: str, n: int = 1, *,
             keep_alive: bool = False, gap_s: float = 0.0) -> Run:
    """`n` requests one after the other on one ChatClient, as a level sends them."""
    outputs: list[int] = []
    lost: list[bool] = []

    async def main() -> tuple[list[RequestRecord], ConnectionCounts]:
        client = ChatClient(base_url, 30.0, keep_alive=keep_alive, on_output=outputs.append,
                            on_lost=lambda: lost.append(True))
        records = []
        try:
            for i in range(n):
                if i and gap_s:
                    await asyncio.sleep(gap_s)
                flight = Flight(RequestRecord(index=i, prompt_name="p", t_sched=time.perf_counter()))
                await client.exchange(flight, BODY)
                assert flight.released_at >= (flight.record.t_end or 0.0)
                records.append(flight.record)
        finally:
            client.close()
        await asyncio.sleep(0.05)  # let the closed transports finish closing
        return records, client.connections

    records, counts = run_on(loop_factory, main())
    return Run(records, counts, outputs, len(lost))


T = TypeVar("T")


def run_on(loop_factory: Callable[[], asyncio.AbstractEventLoop], coro: Coroutine[Any, Any, T]) -> T:
    """`coro` to its end on a fresh loop of `loop_factory`, closed afterwards."""
    loop = loop_factory()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def assert_whole(rec: Any) -> None:
    """The record of EVENTS: ok, two output chunks, usage, finish_reason, [DONE], stamps in order."""
    assert rec.ok, rec.error
    assert rec.http_status == 200 and rec.n_chunks == 2 and rec.output_text_head == "Hello world"
    assert rec.usage_completion_tokens == 2 and rec.finish_reason == "stop" and rec.done_marker
    assert rec.t_send <= rec.t_first_byte <= rec.t_first_token == rec.chunk_times[0] <= rec.chunk_times[1] <= rec.t_end


def stamp_arrivals(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every clock read of the transport's receive callback, in order: the arrival stamps."""
    arrivals: list[float] = []
    clock = time.perf_counter

    def stamped() -> float:
        arrivals.append(clock())
        return arrivals[-1]

    monkeypatch.setattr(http_connection, "_perf", stamped)
    return arrivals


# ------------------------------------------------------------------ framing and stamps

AWKWARD = [
    3,  # inside the status line
    len(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-"),  # inside a header name
    len(CHUNKED) - 1,  # between the head's last \r and \n
    len(CHUNKED) + 1,  # inside the first chunk-size line
    len(CHUNKED) + len(frame(EVENTS[0])) - 1,  # between a chunk's data and its closing \r\n
    len(CHUNKED) + len(frame(EVENTS[0])) + 4,  # inside "data:" of the first content event
    len(CHUNKED) + len(frame(EVENTS[0])) + 30,  # inside its JSON
    len(WIRE) - 3,  # inside the last-chunk marker
]


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_chunked_frames_split_at_awkward_boundaries_give_the_whole_stream(loop_factory, monkeypatch):
    arrivals = stamp_arrivals(monkeypatch)

    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        cuts = [0, *AWKWARD, len(WIRE)]
        send_pieces(conn, [WIRE[a:b] for a, b in zip(cuts, cuts[1:], strict=False)], arrivals)

    with serving(script) as server:
        run = exchange(loop_factory, server.base_url)
    (rec,) = run.records
    assert_whole(rec)
    assert sum(run.outputs) == 2 and run.counts == ConnectionCounts(opened=1) and run.lost == 0
    # the split content event is stamped when its last piece arrived, a pause after its first
    assert rec.chunk_times[0] - rec.t_first_byte >= 2 * PAUSE * 0.9


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_an_sse_event_split_across_reads_is_stamped_when_it_completes(loop_factory, monkeypatch):
    """Every stamp is the arrival time taken in the transport's receive callback: the clock read
    there is the only source of chunk times."""
    arrivals = stamp_arrivals(monkeypatch)
    event = EVENTS[1]
    first, second = frame(event)[:20], frame(event)[20:]

    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        send_pieces(conn, [CHUNKED + frame(EVENTS[0]) + first, second,
                           b"".join(frame(e) for e in EVENTS[2:]) + b"0\r\n\r\n"], arrivals)

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert_whole(rec)
    assert len(arrivals) == 3  # one per read
    assert rec.t_first_byte == arrivals[0] and rec.chunk_times == [arrivals[1], arrivals[2]]
    assert rec.t_end == arrivals[2] and arrivals[1] - arrivals[0] >= PAUSE * 0.9


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("framing", ["content-length", "until-eof"])
def test_a_body_with_a_length_or_until_the_connection_closes(loop_factory, framing):
    body = b"".join(EVENTS)
    header = f"Content-Length: {len(body)}" if framing == "content-length" else "Connection: close"

    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        send_pieces(conn, [head("200 OK", "Content-Type: text/event-stream", header), body[:50], body[50:]])

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert_whole(rec)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_an_interim_100_response_is_skipped(loop_factory):
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        send_pieces(conn, [b"HTTP/1.1 100 Continue\r\n\r\n", WIRE])

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert_whole(rec)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_500_with_a_json_body_keeps_status_and_body_head(loop_factory):
    error = json.dumps({"error": {"message": "the engine crashed", "type": "server_error", "code": 500}}).encode()

    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        conn.sendall(head("500 Internal Server Error", "Content-Type: application/json",
                          f"Content-Length: {len(error)}") + error)

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert rec.error.type is ErrorType.HTTP_5XX and rec.http_status == rec.error.http_status == 500
    assert rec.error.body_head == error.decode()
    assert rec.error.message == "HTTP 500 Internal Server Error: the engine crashed (type server_error)"


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("how", ["closed", "reset"])
def test_a_connection_ended_mid_stream_is_truncated(loop_factory, how):
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        send_pieces(conn, [CHUNKED + b"".join(frame(e) for e in EVENTS[:3])])
        if how == "reset":
            reset(conn)

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert rec.error.type is ErrorType.TRUNCATED and rec.n_chunks == 2, rec.error
    assert rec.error.message.startswith("ConnectionLost mid-stream after 2 output chunks")
    assert rec.t_end >= rec.chunk_times[-1]


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_connection_closed_before_any_response_is_connect(loop_factory):
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)

    with serving(script) as server:
        run = exchange(loop_factory, server.base_url)
    (rec,) = run.records
    assert rec.error.type is ErrorType.CONNECT and "before a response" in rec.error.message
    assert run.counts.retried == 0 and run.lost == 2  # a fresh connection: the server may have taken it up


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_bytes_that_are_not_http_are_connect(loop_factory):
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert rec.error.type is ErrorType.CONNECT and rec.error.message.startswith("BadResponse before a response")


# ------------------------------------------------------------------ connections and keep-alive


def keep_alive_responses(after: Callable[[socket.socket, int], bool] | None = None) -> Script:
    """Answers every request on the connection with WIRE; `after(conn, n)` after the n-th (1-based)
    may end the connection by returning False."""

    def script(conn: socket.socket, server: RawServer) -> None:
        n = 0
        while server.read_request(conn) is not None:
            n += 1
            conn.sendall(WIRE)
            if after is not None and not after(conn, n):
                return

    return script


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_one_connection_per_request_by_default(loop_factory):
    with serving(keep_alive_responses()) as server:
        run = exchange(loop_factory, server.base_url, 3)
    records, counts = run.records, run.counts
    for rec in records:
        assert_whole(rec)
        assert not rec.reused_connection and rec.retried is None
    assert server.connections == 3 and counts == ConnectionCounts(opened=3)
    assert all(b"\r\nConnection: close\r\n" in request for request in server.requests)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_keep_alive_reuses_one_connection(loop_factory):
    with serving(keep_alive_responses()) as server:
        run = exchange(loop_factory, server.base_url, 3, keep_alive=True)
    records, counts = run.records, run.counts
    for rec in records:
        assert_whole(rec)
    assert [r.reused_connection for r in records] == [False, True, True]
    assert server.connections == 1 and counts == ConnectionCounts(opened=1, reused=2)
    assert not any(b"Connection: close" in request for request in server.requests)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_connection_the_server_said_to_close_is_not_reused(loop_factory):
    """As llama-server's HTTP library answers the last request it allows on a connection."""
    closing = WIRE.replace(b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: chunked\r\nConnection: close\r\n")

    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        conn.sendall(closing)
        time.sleep(0.5)  # and keeps it open a while: the client must not wait for that

    with serving(script) as server:
        run = exchange(loop_factory, server.base_url, 2, keep_alive=True)
    records, counts = run.records, run.counts
    for rec in records:
        assert_whole(rec)
        assert rec.t_end - rec.t_send < 0.4
    assert counts == ConnectionCounts(opened=2)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_an_idle_connection_the_server_closed_is_dropped_before_use(loop_factory):
    with serving(keep_alive_responses(lambda conn, n: False)) as server:  # closed right after each response
        run = exchange(loop_factory, server.base_url, 2, keep_alive=True, gap_s=0.1)
    records, counts = run.records, run.counts
    for rec in records:
        assert_whole(rec)
        assert not rec.reused_connection and rec.retried is None
    assert counts == ConnectionCounts(opened=2, stale=1)


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("how", ["closed", "reset"])
def test_a_reused_connection_closed_as_the_request_went_out_is_retried_on_a_fresh_one(loop_factory, how):
    """The race keep-alive brings: the server closes an idle connection just as a request goes
    out on it. Nothing of a response came back, so the request goes once more on a fresh
    connection and succeeds; the record says what happened, and no server failure is counted."""
    def script(conn: socket.socket, server: RawServer) -> None:
        if server.connections == 1:
            server.read_request(conn)
            conn.sendall(WIRE)
            if server.read_request(conn) is None:  # the second request arrives: close without a word
                return
            if how == "reset":
                reset(conn)
            return
        keep_alive_responses()(conn, server)

    with serving(script) as server:
        run = exchange(loop_factory, server.base_url, 2, keep_alive=True)
    first, second = run.records
    assert_whole(first)
    assert_whole(second)
    assert second.retried is not None and "sent again on a fresh connection" in second.retried
    assert not second.reused_connection  # its answer came on the fresh connection
    assert run.counts == ConnectionCounts(opened=2, reused=1, retried=1) and run.lost == 0
    assert len(server.requests) == 3  # the request reached the server twice, the first time unanswered
    assert second.t_send > first.t_end


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_reused_connection_that_ended_after_response_bytes_is_not_retried(loop_factory):
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        conn.sendall(WIRE)
        server.read_request(conn)
        send_pieces(conn, [b"HTTP/1.1 200 OK\r\n"])  # part of a head, then the connection ends

    with serving(script) as server:
        run = exchange(loop_factory, server.base_url, 2, keep_alive=True)
    records, counts = run.records, run.counts
    assert_whole(records[0])
    assert records[1].error.type is ErrorType.CONNECT and records[1].retried is None
    assert "inside the response's head" in records[1].error.message
    assert counts == ConnectionCounts(opened=1, reused=1)


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_connection_refused_is_connect(loop_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    run = exchange(loop_factory, f"http://127.0.0.1:{port}", keep_alive=True)
    (rec,) = run.records
    assert rec.error.type is ErrorType.CONNECT and "before a response" in rec.error.message
    assert run.counts == ConnectionCounts() and run.lost == 2


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_fresh_loopback_connection_carries_the_request_before_the_loop_turns(loop_factory):
    """Each loop turn between a request's t_send and its write is TTFT the server never saw: on
    loopback the connect completes inside the call, and the request goes out in the same step."""
    with serving(keep_alive_responses()) as server:

        async def main() -> tuple[bool, RequestRecord]:
            client = ChatClient(server.base_url, 30.0, on_output=lambda n: None, on_lost=lambda: None)
            flight = Flight(RequestRecord(index=0, prompt_name="p"))
            task = asyncio.ensure_future(client.exchange(flight, BODY))
            await asyncio.sleep(0)  # the task's first step, and no other turn of the loop
            deadline = time.monotonic() + 2.0
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)  # blocking on purpose: the loop must not turn
            arrived = bool(server.requests)
            await task
            client.close()
            await asyncio.sleep(0.05)
            return arrived, flight.record

        arrived, rec = run_on(loop_factory, main())
    assert arrived, "the request waited for the event loop to turn"
    assert_whole(rec)
    assert rec.t_send is not None and rec.t_written is not None and rec.t_first_byte is not None
    assert rec.t_send <= rec.t_written <= rec.t_first_byte


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_host_name_is_resolved_by_the_loop_and_stamps_the_write_too(loop_factory):
    with serving(keep_alive_responses()) as server:
        run = exchange(loop_factory, server.base_url.replace("127.0.0.1", "localhost"), 2)
    for rec in run.records:
        assert_whole(rec)
        assert rec.t_send <= rec.t_written <= rec.t_first_byte
    assert server.connections == 2 and run.counts == ConnectionCounts(opened=2)


# ------------------------------------------------------------------ what a misbehaving server says

# llama-server b11434's answer to a prompt over its context (--ctx-size 256), byte for byte, for
# stream=true as for stream=false: a 400 with an OpenAI error body, before any stream begins
LLAMA_OVER_CONTEXT = (b"HTTP/1.1 400 Bad Request\r\nServer: llama.cpp\r\nAccess-Control-Allow-Origin: \r\n"
                      b"Content-Type: application/json; charset=utf-8\r\nContent-Length: 191\r\n"
                      b"Connection: close\r\n\r\n"
                      b'{"error":{"code":400,"message":"request (263 tokens) exceeds the available context size '
                      b'(256 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":263,'
                      b'"n_ctx":256}}')
def answer(loop_factory: Callable[[], asyncio.AbstractEventLoop], wire: bytes) -> RequestRecord:
    """The record of one request that the server answers with `wire`, all at once."""
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        conn.sendall(wire)

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    return rec


WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw deflate": -zlib.MAX_WBITS}


def compressed(pieces: list[bytes], how: str) -> list[bytes]:
    """`pieces` compressed as one stream, each flushed so that it decodes as soon as it arrives."""
    z = zlib.compressobj(wbits=WBITS[how])
    out = [z.compress(p) + z.flush(zlib.Z_SYNC_FLUSH) for p in pieces]
    out[-1] += z.flush()
    return out


def encoded_head(encoding: str, *, status: str = "200 OK", kind: str = "text/event-stream") -> bytes:
    return head(status, f"Content-Type: {kind}", f"Content-Encoding: {encoding}", "Transfer-Encoding: chunked")


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("how", ["gzip", "deflate", "raw deflate"])
def test_a_compressed_stream_is_decoded_and_stamped_when_its_compressed_bytes_arrive(loop_factory, how,
                                                                                    monkeypatch):
    arrivals = stamp_arrivals(monkeypatch)
    pieces = compressed(EVENTS, how)
    encoding = "gzip" if how == "gzip" else "deflate"

    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        # chunked frames that cut the compressed pieces anywhere: two bytes, then the rest of each
        wire = b"".join(frame(p[:2]) + frame(p[2:]) for p in pieces) + b"0\r\n\r\n"
        sent.extend([encoded_head(encoding), *(wire[i:i + 7] for i in range(0, len(wire), 7))])
        send_pieces(conn, sent, arrivals, pause=0)  # each piece a read of its own: waited for, not paused for

    sent: list[bytes] = []
    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert_whole(rec)
    assert len(arrivals) == len(sent), "one read per piece"
    assert rec.content_encoding == encoding and rec.to_json()["content_encoding"] == encoding
    # every stamp is the arrival of a read of compressed bytes, never a moment after it
    assert rec.t_first_byte in arrivals and set(rec.chunk_times) <= set(arrivals) and rec.t_end in arrivals


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_an_identity_stream_records_no_encoding(loop_factory):
    def script(conn: socket.socket, server: RawServer) -> None:
        server.read_request(conn)
        conn.sendall(WIRE)

    with serving(script) as server:
        (rec,) = exchange(loop_factory, server.base_url).records
    assert b"\r\nAccept-Encoding: identity\r\n" in server.requests[0]
    assert_whole(rec)
    assert rec.content_encoding is None and "content_encoding" not in rec.to_json()


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_an_encoding_cellbench_does_not_decode_fails_the_request_naming_it(loop_factory, encoding):
    rec = answer(loop_factory, encoded_head(encoding) + frame(b"\x0b\x8f\x80binary") + b"0\r\n\r\n")
    assert rec.error.type is ErrorType.INVALID_SSE and rec.http_status == 200
    assert rec.error.message == (f"the server compressed the stream (Content-Encoding: {encoding}), "
                                 "which cellbench does not decode")


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("where", ["connection closed", "body ended"])
def test_a_gzip_stream_cut_midway_is_truncated(loop_factory, where):
    """Half the compressed bytes: the events they decode to are kept, and the request is
    truncated, not garbage, whether the connection broke or the body's framing ended there."""
    pieces = compressed(EVENTS, "gzip")
    half = b"".join(pieces[:2]) + pieces[2][:len(pieces[2]) // 2]  # inside the " world" event

    rec = answer(loop_factory, encoded_head("gzip") + frame(half) + (b"0\r\n\r\n" if where == "body ended" else b""))
    assert rec.error.type is ErrorType.TRUNCATED, rec.error
    assert rec.n_chunks == 1 and rec.output_text_head == "Hello" and rec.content_encoding == "gzip"
    if where == "body ended":
        assert rec.error.message == "the body ended inside its gzip stream, after 1 output chunks"


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_corrupt_gzip_is_invalid_sse_saying_so(loop_factory):
    rec = answer(loop_factory, encoded_head("gzip") + frame(b"\x1f\x8b\x08\x00" + b"\xff" * 40) + b"0\r\n\r\n")
    assert rec.error.type is ErrorType.INVALID_SSE
    assert rec.error.message.startswith("the server's compressed stream is corrupt (gzip body: ")


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_llama_servers_over_context_answer_keeps_its_words(loop_factory):
    rec = answer(loop_factory, LLAMA_OVER_CONTEXT)
    assert rec.error.type is ErrorType.HTTP_4XX and rec.error.http_status == 400
    assert rec.error.message == ("HTTP 400 Bad Request: request (263 tokens) exceeds the available context size "
                                 "(256 tokens), try increasing it (type exceed_context_size_error)")
    assert rec.error.body_head.startswith('{"error":{"code":400,')


@pytest.mark.parametrize("loop_factory", LOOPS)
@pytest.mark.parametrize("body, words", [
    (b'{"detail": "Model is overloaded"}', "Model is overloaded"),
    (b'{"detail": [{"loc": ["body", "messages"], "msg": "field required", "type": "missing"}]}',
     "field required (type missing)"),
    (b'{"message": "rate limit\\nexceeded", "code": "quota"}', "rate limit\\nexceeded (code quota)"),
    (b'{"error": "upstream\\u001b[31m down"}', "upstream\\x1b[31m down"),
    (b"<html>" + b"x" * 400 + b"</html>", "<html>" + "x" * 113 + "\u2026"),
])
def test_an_error_body_is_quoted_in_the_servers_words_escaped_and_bounded(loop_factory, body, words):
    rec = answer(loop_factory, head("422 Unprocessable Entity", f"Content-Length: {len(body)}") + body)
    assert rec.error.message == f"HTTP 422 Unprocessable Entity: {words}"


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_compressed_error_body_is_decoded_for_its_words(loop_factory):
    body = json.dumps({"error": {"message": "the engine is overloaded", "type": "overloaded", "code": 503}})

    rec = answer(loop_factory, encoded_head("gzip", status="503 Service Unavailable", kind="application/json")
                            + b"".join(frame(p) for p in compressed([body.encode()], "gzip")) + b"0\r\n\r\n")
    assert rec.error.type is ErrorType.HTTP_5XX
    assert rec.error.message == "HTTP 503 Service Unavailable: the engine is overloaded (type overloaded)"
    assert rec.error.body_head == body


@pytest.mark.parametrize("loop_factory", LOOPS)
def test_a_429_keeps_its_retry_after(loop_factory):
    body = json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit_exceeded"}}).encode()

    rec = answer(loop_factory, head("429 Too Many Requests", "Retry-After: 2", "Content-Type: application/json",
                            f"Content-Length: {len(body)}") + body)
    assert rec.error.type is ErrorType.HTTP_4XX and rec.error.http_status == 429
    assert rec.error.retry_after == "2" and rec.to_json()["error"]["retry_after"] == "2"
    assert rec.error.message == "HTTP 429 Too Many Requests: Rate limit reached (type rate_limit_exceeded)"
