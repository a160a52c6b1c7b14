"""One streaming chat request, from send to a complete or typed-failed record.

The response is parsed where its bytes arrive (`bench.load.http`: asyncio protocols, httptools'
C parser): each read goes into `bench.core.sse.ChatStream` from the transport's receive
callback, stamped with the moment it arrived, so a record's `t_first_token` and chunk times are
arrival times, not the times a parsing task was scheduled. This module adds `t_send`, HTTP
errors, connection errors, and the typed error of a request the level cancelled (its timeout,
the deadline, the hang watchdog, a server gone). `python -m bench.perf.client_overhead` measures
its cost per chunk and its timing error on a given machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from bench.core.level_run import ConnectionCounts
from bench.core.records import ErrorType, RequestRecord, error_body_text, quote_server
from bench.core.sse import ChatStream
from bench.load.http import Connector, Response
from bench.load.http.encoding import CorruptBody, Inflater, UnsupportedEncoding, decoder_for
from bench.load.interrupts import reraise_interrupt, uncancel

_perf = time.perf_counter
_BODY_HEAD = 300  # characters of an HTTP error body kept in the record
_BODY_WORDS = 120  # of a body that is no JSON error, the characters its message quotes
_ERROR_BODY_BYTES = 2**16  # an error body is read this far for its message, then the exchange ends
# A connection that failed on its own holds its request this long before the next one may go: an
# exiting server refuses connections a moment before its process can be seen gone, and a slot that
# sent on at once would record every remaining request as refused instead of the level stopping.
LOST_PAUSE_S = 0.02

# Why the level cancelled a request; each becomes its own error message.
TIMEOUT, DEADLINE, STALL, SERVER_GONE = "timeout", "deadline", "stall", "server gone"
SATURATED = "over-saturated"  # cut by the over-saturation stop (bench.core.figures.saturation): never a record


class Flight:
    """One request in flight: its record, its stream, and why we cancelled it (if we did)."""

    __slots__ = ("reason", "record", "released_at", "stream")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.stream = ChatStream(record)
        self.reason: str | None = None  # TIMEOUT, DEADLINE, STALL, SERVER_GONE or SATURATED
        self.released_at = 0.0  # when the response ended and its connection was let go: the slot is open again


class ChatClient:
    """Sends a level's requests to one server (`POST {base_url}/v1/chat/completions`).

    Construct it once per level; `await exchange(flight, body)` for every request, as many at
    once as the level likes; `close()` when the level is over (kept-alive connections). Every
    request opens its own connection unless `keep_alive` (see `bench.load.http.connector`);
    `connections` counts what they did. `on_output(n)` is told of every n new output events
    (progress and the hang watchdog), from the receive callback; `on_lost()` is called when a
    connection fails on its own, so the level asks whether the server is gone (at once, and again
    `LOST_PAUSE_S` later, before the request returns)."""

    def __init__(self, base_url: str, request_timeout_s: float, *, on_output: Callable[[int], None],
                 on_lost: Callable[[], None], keep_alive: bool = False,
                 headers: Mapping[str, str] | None = None) -> None:
        self.connector = Connector(base_url, keep_alive=keep_alive)
        self.url = base_url.rstrip("/") + "/v1/chat/completions"
        self.request_timeout_s = request_timeout_s
        self.on_output = on_output
        self.on_lost = on_lost
        head = (f"POST {self.connector.path}/v1/chat/completions HTTP/1.1\r\nHost: {self.connector.authority}\r\n"
                "User-Agent: cellbench\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"
                # an SSE stream is timed as its bytes arrive: a compressed one would arrive in bursts
                "Accept-Encoding: identity\r\n")
        if not keep_alive:
            head += "Connection: close\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())  # the API key
        self._head = (head + "Content-Length: ").encode("latin-1")

    @property
    def connections(self) -> ConnectionCounts:
        return self.connector.counts

    def close(self) -> None:
        self.connector.close()

    async def exchange(self, flight: Flight, body: bytes, headers: bytes = b"") -> None:
        """POST `body` and stream the answer into `flight`'s record; every failure ends as the
        record's typed error. A cancellation not asked for through `flight.reason` propagates.
        `headers`: this request's own header lines ("Name: value\\r\\n" each; a session's)."""
        rec = flight.record
        response = _ChatResponse(flight, self.on_output)
        head = self._head if not headers else self._head.replace(b"Content-Length: ", headers + b"Content-Length: ")
        try:
            rec.t_send = _perf()
            await self.connector.exchange(b"%s%d\r\n\r\n%s" % (head, len(body), body), response)
        except asyncio.CancelledError:
            if flight.reason is None:  # not ours: pytest's timeout, loop shutdown
                raise
            self._record_cancel(flight, response.head_done)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a typed record
            reraise_interrupt(exc)  # an interrupt that landed in a receive callback
            if flight.reason is not None:  # our cancellation, surfacing as a connection error
                self._record_cancel(flight, response.head_done)
                return
            now = response.now or _perf()  # when the connection ended, as its callback saw it
            if response.error_head is not None:  # an HTTP error whose body was cut: still that error
                response.http_error()
            else:
                kind = ErrorType.TRUNCATED if response.head_done else ErrorType.CONNECT
                where = (f"mid-stream after {rec.n_chunks} output chunks" if response.head_done
                         else "before a response")
                flight.stream.fail(kind, f"{type(exc).__name__} {where}: {exc}", now)
            self.on_lost()  # the level asks at once whether the server is gone,
            await asyncio.sleep(LOST_PAUSE_S)
            self.on_lost()  # and once more when a dying server has had a moment to be seen gone
        finally:
            ended = response.complete or response.stopped
            flight.released_at = response.now if ended else _perf()

    def _record_cancel(self, flight: Flight, headers_seen: bool) -> None:
        """Our own cancellation becomes the record's typed error."""
        uncancel()
        rec = flight.record
        now = _perf()
        waited = now - rec.t_send if rec.t_send is not None else 0.0
        stage = f"{rec.n_chunks} output chunks received" if headers_seen else "no response headers"
        if flight.reason == TIMEOUT:
            limit = f"request_timeout_s={self.request_timeout_s:g}"
            flight.stream.fail(ErrorType.TIMEOUT, f"timed out after {waited:.2f} s ({limit}); {stage}", now)
        elif flight.reason == SERVER_GONE:  # the server's failure, not ours: typed as what it did
            kind = ErrorType.TRUNCATED if headers_seen else ErrorType.CONNECT
            flight.stream.fail(kind, f"the server went away after {waited:.2f} s in flight; {stage}", now)
        else:
            why = {STALL: "by the hang watchdog", SATURATED: "by the over-saturation stop"}.get(
                flight.reason or "", "at the level deadline")
            flight.stream.fail(ErrorType.CANCELLED, f"cancelled {why} after {waited:.2f} s in flight; {stage}", now)


class _ChatResponse(Response):
    """A chat completion's response: a 200's body goes into the record's `ChatStream` read by
    read, at its arrival time; any other status keeps its body's first `_ERROR_BODY_BYTES` for
    the error's message. A body the server compressed anyway (gzip, deflate) is decoded first
    (`bench.load.http.encoding`), each decoded piece stamped with its compressed read's arrival;
    any other encoding fails a 200 at once."""

    KEPT_HEADERS = frozenset((b"content-encoding", b"retry-after"))

    __slots__ = ("diverted", "error_head", "inflater", "on_output", "record", "stream")

    def __init__(self, flight: Flight, on_output: Callable[[int], None]) -> None:
        super().__init__()
        self.record = flight.record
        self.stream = flight.stream
        self.on_output = on_output
        self.error_head: bytearray | None = None  # the body of a non-200 answer
        self.inflater: Inflater | None = None  # the decoder of a compressed body
        self.diverted = False  # not a plain 200 stream: an error body, or a compressed one

    def attempt(self, t_start: float, reused: bool, retry: str | None) -> None:
        rec = self.record
        rec.reused_connection = reused
        if retry is not None:  # the first attempt never reached the server: the request starts now
            rec.t_send = t_start
            rec.t_written = None
            rec.retried = retry

    def written(self, t: float) -> None:
        self.record.t_written = t

    def on_head(self) -> None:
        self.record.http_status = self.status
        try:
            self.inflater = decoder_for(self.headers.get(b"content-encoding"))
        except UnsupportedEncoding as exc:
            if self.status == 200:  # a stream cellbench cannot read: nothing more is
                self.stream.fail(ErrorType.INVALID_SSE, str(exc), self.now)
                self.stopped = True
                return
            # an error body in an encoding we do not decode: its status still says what happened
        if self.inflater is not None:
            self.record.content_encoding = self.inflater.encoding
        if self.status != 200:
            self.error_head = bytearray()
        self.diverted = self.error_head is not None or self.inflater is not None

    def on_body(self, body: bytes) -> None:
        if self.diverted:
            self._diverted(body)
            return
        chunk_times = self.record.chunk_times
        before = len(chunk_times)
        self.stream.feed(body, self.now)  # the hot path: one call per read
        if len(chunk_times) != before:
            self.on_output(len(chunk_times) - before)
        if self.stream.finished and self.record.error is not None:  # an error event, an overflow
            self.stopped = True

    def _diverted(self, body: bytes) -> None:
        """A compressed read (decoded, every piece at this read's arrival), or an error body's."""
        try:
            for piece in (self.inflater.feed(body) if self.inflater is not None else (body,)):
                self._decoded(piece)
                if self.stopped:
                    return
        except CorruptBody as exc:
            self._corrupt(exc)

    def _decoded(self, piece: bytes) -> None:
        if self.error_head is None:  # a decoded piece of the stream takes the stream's own path
            self.diverted = False
            self.on_body(piece)
            self.diverted = True
            return
        self.error_head += piece
        if len(self.error_head) >= _ERROR_BODY_BYTES:
            self.http_error()

    def _corrupt(self, exc: CorruptBody) -> None:
        if self.error_head is not None:
            self.http_error()  # what decoded before the corruption says what it can
        else:
            self.stream.fail(ErrorType.INVALID_SSE, f"the server's compressed stream is corrupt ({exc})", self.now)
            self.stopped = True

    def on_end(self) -> None:
        if self.stopped:  # the error is recorded; the rest of the read was parsed all the same
            return
        inflater = self.inflater
        if inflater is not None:
            try:
                for piece in inflater.finish():
                    self._decoded(piece)
            except CorruptBody as exc:
                self._corrupt(exc)
            if not inflater.ended and self.error_head is None and not self.stream.finished:
                rec = self.record  # what decoded is all there is: the stream was cut
                self.stream.fail(ErrorType.TRUNCATED, f"the body ended inside its {inflater.encoding} stream, "
                                 f"after {rec.n_chunks} output chunks", self.now)
                return
        if self.error_head is not None:
            self.http_error()
        else:
            self.stream.close(self.now)

    def http_error(self) -> None:
        """A non-200 answer: the record keeps its status, the server's words for the error (an
        OpenAI-style JSON error's message, else the body's first characters), the first
        `_BODY_HEAD` characters of its body and any Retry-After."""
        body = bytes(self.error_head or b"")
        text = body[:_BODY_HEAD].decode("utf-8", "replace")
        kind = ErrorType.HTTP_5XX if self.status >= 500 else ErrorType.HTTP_4XX
        words = error_body_text(body, http_status=self.status) or quote_server(text, _BODY_WORDS)
        message = f"HTTP {self.status} {self.reason}: {words}".strip()
        retry_after = self.headers.get(b"retry-after")
        self.stream.fail(kind, message, self.now or _perf(), http_status=self.status, body_head=text,
                         retry_after=None if retry_after is None else quote_server(retry_after.decode("latin-1"), 60))
        self.stopped = True
