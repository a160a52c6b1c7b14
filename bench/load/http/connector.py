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

A fresh connection to an IP address is opened and written without waiting on the event loop
when the kernel completes the connect at once (loopback, where a non-blocking connect is done
before the call returns): the request goes out in the same callback that began it, and only
then is the socket handed to the loop for the response. Each turn of a busy loop that a
connect waits for (asyncio's `create_connection` takes four or five) is time stamped into the
request's TTFT that the server never saw. A connect that needs a round trip, a host name to
resolve, or TLS takes the loop's way.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import select
import socket
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
        self._address = _numeric_address(self.host, self.port)  # None: a name, resolved by the loop
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
            response.attempt(t_start, reused, retry)
            done = None
            if conn is None:
                conn, done = await self._open(request, response)
            try:
                await (done if done is not None else conn.send(request, response))
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

    async def _open(self, request: bytes, response: Response) -> tuple[Connection, asyncio.Future[None]]:
        """A fresh connection with `request` written on it, and the future of `response`."""
        loop = asyncio.get_running_loop()
        if self.ssl is not None or self._address is None:
            _, conn = await loop.create_connection(Connection, self.host, self.port, ssl=self.ssl)
            self.counts.opened += 1
            return conn, conn.send(request, response)
        family, address = self._address
        sock = socket.socket(family, socket.SOCK_STREAM)
        conn = Connection()
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not _connected_now(sock, address):
                await loop.sock_connect(sock, address)
            done = conn.expect(response)
            sent = _send_now(sock, request)
            if sent == len(request):
                response.written(_perf())
            transport, _ = await loop.create_connection(lambda: conn, sock=sock)
        except BaseException:
            sock.close()
            raise
        self.counts.opened += 1
        if sent < len(request):  # the rest goes out as the socket takes it
            transport.write(request[sent:])
        return conn, done


def _numeric_address(host: str, port: int) -> tuple[socket.AddressFamily, tuple[str, int]] | None:
    """(family, sockaddr) of an IPv4 or IPv6 address literal; None for a name (the loop resolves it)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return (socket.AF_INET6, (host, port)) if ip.version == 6 else (socket.AF_INET, (host, port))


def _connected_now(sock: socket.socket, address: tuple[str, int]) -> bool:
    """Begin a non-blocking connect; whether it is already complete. Raises what refused it."""
    err = sock.connect_ex(address)
    if err == errno.EINPROGRESS:
        _, writable, _ = select.select([], [sock], [], 0)
        if not writable:
            return False  # a round trip away: the loop waits for it
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, f"Connect call failed {address}: {os.strerror(err)}")
    return True


def _send_now(sock: socket.socket, data: bytes) -> int:
    """Bytes of `data` the kernel took at once (0 when the socket buffer was full)."""
    try:
        return sock.send(data)
    except (BlockingIOError, InterruptedError):
        return 0
