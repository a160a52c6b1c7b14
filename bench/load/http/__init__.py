"""A purpose-built HTTP/1.1 client for streamed responses: asyncio protocols and httptools' C
parser (llhttp), on uvloop or the standard loop.

Why not a general HTTP library: a benchmark client's job on the hot path is to stamp every
streamed chunk with the moment its bytes arrived and to spend as little CPU per chunk as it can.
Here the response is parsed inside the transport's receive callback (`Connection.data_received`),
the arrival time is taken there before anything else runs, and the body goes straight from the
C parser into the response's `on_body` with that time: no stream reader, no coroutine woken per
read, no timestamp taken after the loop got round to a parsing task. A request's coroutine wakes
twice: when its connection is ready and when its response is over.

- `connection`: `Connection` (one TCP or TLS connection, one request at a time) and `Response`
  (what one response does with its bytes; a subclass overrides `on_head`, `on_body`, `on_end`);
- `connector`: `Connector`, a level's connections to one server, one per request or kept alive
  and reused (`keep_alive`), with the one retry that keep-alive makes safe: a reused connection
  that the server had closed before any byte of the response came back.

Failures surface as exceptions from `Connector.exchange`: `OSError` (refused, unreachable),
`ConnectionLost` (the peer closed or reset the connection before the response was over),
`BadResponse` (bytes that are not HTTP), or whatever a `Response` hook raised.
"""

from bench.load.http.connection import BadResponse, Connection, ConnectionLost, Response
from bench.load.http.connector import Connector

__all__ = ["BadResponse", "Connection", "ConnectionLost", "Connector", "Response"]
