"""A level's connections to one server: one per request, or kept alive and reused.

With `keep_alive=False` (the load generator's default) every request opens its own connection,
says `Connection: close`, and the connection is closed when its response is over: every request
measures the same path, connect included, and no server's keep-alive policy (how many requests a
connection may carry, how long it may idle) can touch a request.

With `keep_alive=True` a connection whose response was complete and that the server keeps open
goes back to an idle pool (last in, first out) for the next request. A server may close an idle
connection at any moment (llama-server closes one right after a streamed response, though the
response said `Keep-Alive`), so:

- an idle connection already closed when a request wants it is dropped, and the next one (or a
  fresh connection) is taken: nothing was sent on it (`ConnectionCounts.stale`);
- a request sent on a reused connection that ends before any byte of a response came back (the
  server closed it as the request went out) is sent once more on a fresh connection
  (`ConnectionCounts.retried`, and the response's `attempt` is told again). The server answered
  nothing on that connection, so it did not take the request up; a failure on the fresh
  connection is the request's failure as usual.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from urllib.parse import urlsplit

from bench.core.level_run import ConnectionCounts
from bench.load.http.connection import Connection, ConnectionLost, Response

_perf = time.perf_counter


class Connector:
    """Connections to the server at `base_url` (http or https), for one event loop."""

    def __init__(self, base_url: str, *, keep_alive: bool = False) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.authority = parts.netloc.rpartition("@")[2]  # the Host header
        self.path = parts.path.rstrip("/")  # a prefix for the request paths
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.keep_alive = keep_alive
        self.counts = ConnectionCounts()
        self._idle: list[Connection] = []

    async def exchange(self, request: bytes, response: Response) -> None:
        """Write `request` (a whole HTTP/1.1 request, head and body) and return when `response`
        is over: complete, or stopped by its handler. Raises `OSError` when no connection could be
        made, `ConnectionLost` when the connection ended first, `BadResponse` for bytes that are
        not HTTP, or what a hook of `response` raised. Cancelling drops the connection."""
        retry: str | None = None
        while True:
            t_start = _perf()
            conn = None if retry else self._take_idle()
            reused = conn is not None
            if conn is None:
                conn = await self._open()
            response.attempt(t_start, reused, retry)
            try:
                await conn.send(request, response)
            except ConnectionLost as exc:
                if reused and response.received == 0:  # the server had closed it: nothing was taken up
                    self.counts.retried += 1
                    retry = f"a reused keep-alive connection ended first ({exc}); sent again on a fresh connection"
                    continue
                raise
            except BaseException:
                conn.abort()
                raise
            if self.keep_alive and conn.reusable:
                self._idle.append(conn)
            else:
                conn.close()
            return

    def close(self) -> None:
        """Close the idle connections (the level is over)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take_idle(self) -> Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable:
                self.counts.reused += 1
                return conn
            self.counts.stale += 1
        return None

    async def _open(self) -> Connection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(Connection, self.host, self.port, ssl=self.ssl)
        self.counts.opened += 1
        return protocol
