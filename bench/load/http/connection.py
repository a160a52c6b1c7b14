"""One HTTP/1.1 connection (`Connection`, an asyncio protocol) and one response on it (`Response`),
parsed by httptools in the transport's receive callback, stamped with the arrival time there."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, TypeGuard

import httptools

_perf = time.perf_counter


class Stream(Protocol):
    """The transport of a stream connection, as asyncio's and uvloop's both are (uvloop's is no
    `asyncio.Transport`): what a connection and the null server (bench.perf.null_server) call on it."""

    def write(self, data: bytes) -> None: ...
    def get_write_buffer_size(self) -> int: ...
    def is_closing(self) -> bool: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


_STREAM_METHODS = ("write", "get_write_buffer_size", "is_closing", "close", "abort")


def is_stream(transport: asyncio.BaseTransport) -> TypeGuard[Stream]:
    """Whether `transport` has Stream's methods (a TCP or TLS connection's does): checked by hand,
    as `isinstance` against a runtime-checkable Protocol costs ten times as much per connection."""
    return all(callable(getattr(transport, name, None)) for name in _STREAM_METHODS)


class ConnectionLost(ConnectionError):
    """The connection ended before the response was over: the peer closed or reset it."""


class BadResponse(ConnectionError):
    """Bytes from the server that are not an HTTP/1.1 response (llhttp says why)."""


class Response:
    """What one response does with its bytes, as they arrive.

    The object is the parser's protocol: llhttp calls its `on_*` methods from inside
    `feed_data`, in the transport's receive callback, so the body reaches `on_body` with no
    buffer, task or coroutine in between. `now` is the arrival time of the read being parsed
    (`time.perf_counter()`, taken first thing in `Connection.data_received`); a subclass stamps
    with `now`, never with a clock read of its own.

    A subclass overrides the hooks: `on_head()` once the status line and headers are in
    (`status`, `reason`, the `KEPT_HEADERS` in `headers`), `on_body(data)` for every piece of the
    body (chunked framing removed), `on_end()` when the body is complete. Any of them may call
    `stop()`: the exchange ends at once, the rest of the response is not read and the connection
    is not reused. Interim (1xx) responses are skipped. `attempt(t_start, reused, retry)` is told, before the request is
    written, when its attempt started and whether it goes on a kept-alive connection (a second
    call, with `retry` saying why, means the request is sent again: `bench.load.http.connector`);
    `written(t)` when the kernel took its last byte.
    """

    # Lower-case names of the response headers a subclass reads from `headers` (the others are
    # not kept: a streamed response's head costs one set look-up per header line).
    KEPT_HEADERS: frozenset[bytes] = frozenset()

    parser: httptools.HttpResponseParser  # its parser, set by Connection.expect before any byte is parsed

    __slots__ = ("now", "status", "reason", "headers", "received", "head_done", "complete", "stopped",
                 "keep_alive", "framed", "parser", "_interim")

    def __init__(self) -> None:
        self.now = 0.0
        self.status = 0
        self.reason = ""
        self.headers: dict[bytes, bytes] = {}  # the KEPT_HEADERS the response had, by lower-case name
        self.received = 0  # bytes of the response received, its head included
        self.head_done = False  # status line and headers parsed (of the final response, not a 1xx)
        self.complete = False  # the whole body arrived
        self.stopped = False  # the subclass had what it needed: the exchange ends now
        self.keep_alive = False  # the server keeps the connection open for another request
        self.framed = False  # Content-Length or chunked: an EOF before the end is a cut, not the end
        self._interim = False

    # ---------------------------------------------------------------- hooks for a subclass

    def attempt(self, t_start: float, reused: bool, retry: str | None) -> None:
        """The request is about to be written, on a kept-alive connection when `reused`; this
        attempt started at `t_start`. `retry` says why the request goes out a second time."""

    def written(self, t: float) -> None:
        """The whole request was handed to the kernel at `t` (not told when the socket could not
        take it at once and the transport buffered the rest)."""

    def on_head(self) -> None:
        """`status`, `reason` and `keep_alive` are known; the body follows."""

    def on_body(self, body: bytes) -> None:
        """A piece of the body, arrived at `now`."""

    def on_end(self) -> None:
        """The body is complete (its last bytes arrived at `now`)."""

    def stop(self) -> None:
        """End the exchange after this callback: nothing more is read, the connection is closed."""
        self.stopped = True

    # ---------------------------------------------------------------- llhttp's callbacks

    def on_status(self, reason: bytes) -> None:
        self.reason = reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding" and b"chunked" in value.lower()):
            self.framed = True
        if name in self.KEPT_HEADERS:
            self.headers[name] = value

    def on_headers_complete(self) -> None:
        parser = self.parser
        status = parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue, 103 Early Hints: the final response follows
            self._interim = True
            self.framed = False
            self.headers = {}
            return
        self.status = status
        self.head_done = True
        self.keep_alive = parser.should_keep_alive()
        self.on_head()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True
        self.on_end()

    def eof(self) -> None:
        """The connection closed after the head of a body that runs until EOF (no length, not
        chunked): that was the end of the body."""
        self.keep_alive = False
        self.complete = True
        self.on_end()


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection to the server, one request at a time.

    `send(request, response)` writes the request and returns a future that resolves when the
    response is over (complete, or stopped by its handler) and fails with why it could not be
    (`ConnectionLost`, `BadResponse`, whatever a hook of the response raised). A connection
    whose response was complete and that both sides keep alive may carry the next request;
    any other is closed at the end of its response.
    """

    def __init__(self) -> None:
        self.transport: Stream | None = None
        self.closed = False  # EOF, reset, or closed by us: never reused
        self.requests = 0  # requests sent on it
        self._response: Response | None = None
        self._done: asyncio.Future[None] | None = None

    @property
    def reusable(self) -> bool:
        """Idle, open, and its last response said keep-alive."""
        return not self.closed and self._response is None and self.transport is not None

    def send(self, request: bytes, response: Response) -> asyncio.Future[None]:
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            raise ConnectionLost("the connection was closed before the request was sent")
        done = self.expect(response)
        transport.write(request)
        if not transport.get_write_buffer_size():  # the kernel took all of it
            response.written(_perf())
        return done

    def expect(self, response: Response) -> asyncio.Future[None]:
        """Make `response` the one the next bytes belong to (its request is being written, by
        `send` or by the connector before this protocol has its transport); the future `send`
        returns."""
        if self._response is not None:
            raise RuntimeError("one request at a time on a connection")
        done = asyncio.get_running_loop().create_future()
        response.parser = httptools.HttpResponseParser(response)
        self._response, self._done = response, done
        self.requests += 1
        return done

    def close(self) -> None:
        """Close gracefully (what was written still goes out)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection now: a response we no longer read."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # ---------------------------------------------------------------- the protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not is_stream(transport):
            raise TypeError(f"not a stream connection's transport: {type(transport).__name__}")
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        response = self._response
        if response is None:  # bytes nobody asked for: this connection is out of step, drop it
            self.abort()
            return
        response.now = _perf()  # the arrival time: every stamp this read yields is this one
        response.received += len(data)
        try:
            response.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # a handler raised: that is the request's error
            self._end(exc.__context__ or exc)
            return
        except httptools.HttpParserError as exc:
            self._end(BadResponse(f"not an HTTP/1.1 response after {response.received} bytes: {exc}"))
            return
        except BaseException as exc:  # noqa: BLE001 - an interrupt landing here: the request's, not the loop's
            self._end(exc)
            return
        if response.complete or response.stopped:
            self._end(None)

    def eof_received(self) -> bool:
        self.closed = True
        return False  # the transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self._response
        if response is None:
            return
        response.now = _perf()
        if response.head_done and not response.framed and not response.stopped:
            try:
                response.eof()  # a body delimited by the connection's end
            except BaseException as error:  # noqa: BLE001 - handed to the request
                self._end(error)
                return
            self._end(None)
            return
        if response.received == 0:
            what = "before any byte of a response"
        elif not response.head_done:
            what = f"after {response.received} bytes, inside the response's head"
        else:
            what = f"after {response.received} response bytes, before the body was complete"
        how = f"reset ({exc})" if exc is not None else "closed by the server"
        lost = ConnectionLost(f"connection {how} {what}")
        lost.__cause__ = exc
        self._end(lost)

    def _end(self, error: BaseException | None) -> None:
        """The response is over: detach it, close the connection unless it may carry another
        request, and resolve the request's future."""
        response, done = self._response, self._done
        self._response = self._done = None
        if error is not None or response is None or not (response.complete and response.keep_alive):
            if error is None and response is not None and response.complete:
                self.close()
            else:
                self.abort()
        if done is not None and not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)
