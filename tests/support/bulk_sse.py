"""A zero-work SSE server that writes each whole response at once, so that it is never what
limits a client's chunk rate.

    python -m tests.support.bulk_sse [--core N]   # prints `PORT <n>`; serves until stdin closes

bench/perf/client_overhead.py's server writes one chunk per write, and on loopback the kernel's
TCP work for each write (the receiving side's included) is charged to the writer: on a 2-core
machine it delivers about 57,000 chunks a second from a whole core while the client reading them
uses 0.4 of one. To measure the client at saturation, this one answers every POST with its
entire body in one write: `max_tokens` content chunks of the same bytes as that server's, a
finish_reason, the usage and `[DONE]`, with a Content-Length, on a keep-alive connection.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import cast

MODEL = "perf-model"
ROOT = Path(__file__).resolve().parents[2]


def _event(choices: list, usage: dict | None = None) -> bytes:
    obj: dict = {"id": "chatcmpl-bulk", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                 "system_fingerprint": None, "choices": choices}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _choice(delta: dict, finish: str | None = None) -> list:
    return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]


@cache
def response(n: int) -> bytes:
    body = b"".join([
        _event(_choice({"role": "assistant", "content": ""})),
        _event(_choice({"content": " tok"})) * n,
        _event(_choice({}, "length")),
        _event([], {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}),
        b"data: [DONE]\n\n",
    ])
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n"
            b"Connection: keep-alive\r\n\r\n%s" % (len(body), body))


class _Bulk(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in self.buf[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4: end + 4 + length], self.buf[end + 4 + length:]
            self.transport.write(response(int(json.loads(body).get("max_tokens", 16))))


def serve(core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    loop: asyncio.AbstractEventLoop
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    server: asyncio.Server = loop.run_until_complete(loop.create_server(_Bulk, "127.0.0.1", 0, backlog=1024))
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
    loop.run_forever()


@contextlib.contextmanager
def bulk_server(core: int | None = None) -> Iterator[str]:
    """The server in a child process (on `core` when given); yields its base URL."""
    cmd = [sys.executable, "-m", "tests.support.bulk_sse"] + ([] if core is None else ["--core", str(core)])
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"bulk SSE server did not start: {line!r}")
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--core", type=int, default=None)
    serve(ap.parse_args().core)
