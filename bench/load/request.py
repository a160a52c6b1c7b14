"""One streaming chat request over aiohttp, from send to a complete or typed-failed record.

The response body goes read by read into `bench.core.sse.ChatStream`, which stamps the record;
this module adds `t_send`, HTTP errors, connection errors, and the typed error of a request the
level cancelled (its timeout, the deadline, the hang watchdog, a server gone). aiohttp because
its cost per SSE chunk is low enough that one core keeps thousands of chunks a second on time
(`python -m bench.perf.client_overhead` measures it on a given machine).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp

from bench.core.records import ErrorType, RequestRecord
from bench.core.sse import ChatStream
from bench.load.interrupts import reraise_interrupt, uncancel

_perf = time.perf_counter
_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
_BODY_HEAD = 300  # bytes of an HTTP error body kept in the record

# Why the level cancelled a request; each becomes its own error message.
TIMEOUT, DEADLINE, STALL, SERVER_GONE = "timeout", "deadline", "stall", "server gone"


class Flight:
    """One request in flight: its record, its stream, and why we cancelled it (if we did)."""

    __slots__ = ("reason", "record", "released_at", "stream")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.stream = ChatStream(record)
        self.reason: str | None = None  # TIMEOUT, DEADLINE, STALL or SERVER_GONE
        self.released_at = 0.0  # when the connection was given back: the slot is open again


class ChatClient:
    """Sends a level's requests on its session.

    `on_output(n)` is told of every n new output events (progress and the hang watchdog);
    `on_lost()` is called when a connection fails on its own, so the level asks at once whether
    the server is gone."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, request_timeout_s: float, *,
                 on_output: Callable[[int], None], on_lost: Callable[[], None]) -> None:
        self.session = session
        self.url = base_url.rstrip("/") + "/v1/chat/completions"
        self.request_timeout_s = request_timeout_s
        self.on_output = on_output
        self.on_lost = on_lost

    async def exchange(self, flight: Flight, body: bytes) -> None:
        """POST `body` and stream the answer into `flight`'s record; every failure ends as the
        record's typed error. A cancellation not asked for through `flight.reason` propagates."""
        rec, stream = flight.record, flight.stream
        headers_seen = False
        try:
            rec.t_send = _perf()
            async with self.session.post(self.url, data=body, headers=_HEADERS) as resp:
                headers_seen = True
                rec.http_status = resp.status
                if resp.status != 200:
                    await _http_error(resp, stream)
                    return
                before = 0
                async for data in resp.content.iter_any():
                    stream.feed(data, _perf())
                    if len(rec.chunk_times) != before:  # progress counter, off the per-event path
                        self.on_output(len(rec.chunk_times) - before)
                        before = len(rec.chunk_times)
                    if rec.error is not None:  # failed (an error event, an overflow): nothing more to learn
                        return
                stream.close(_perf())
        except asyncio.CancelledError:
            if flight.reason is None:  # not ours: pytest's timeout, loop shutdown
                raise
            self._record_cancel(flight, headers_seen)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a typed record
            reraise_interrupt(exc)
            if flight.reason is not None:  # our cancellation, surfacing as a library error
                self._record_cancel(flight, headers_seen)
                return
            kind = ErrorType.TRUNCATED if headers_seen else ErrorType.CONNECT
            where = f"mid-stream after {rec.n_chunks} output chunks" if headers_seen else "before a response"
            stream.fail(kind, f"{type(exc).__name__} {where}: {exc}", _perf())
            self.on_lost()
        finally:
            flight.released_at = _perf()

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
            why = "by the hang watchdog" if flight.reason == STALL else "at the level deadline"
            flight.stream.fail(ErrorType.CANCELLED, f"cancelled {why} after {waited:.2f} s in flight; {stage}", now)


async def _http_error(resp: aiohttp.ClientResponse, stream: ChatStream) -> None:
    """A non-200 answer: the record keeps its status and the first bytes of its body."""
    head = bytearray()
    while len(head) < _BODY_HEAD:
        part = await resp.content.readany()
        if not part:
            break
        head += part
    text = bytes(head[:_BODY_HEAD]).decode("utf-8", "replace")
    kind = ErrorType.HTTP_5XX if resp.status >= 500 else ErrorType.HTTP_4XX
    message = f"HTTP {resp.status} {resp.reason or ''}: {text[:120]}".strip()
    stream.fail(kind, message, _perf(), http_status=resp.status, body_head=text)
