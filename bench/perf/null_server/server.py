"""The null server: a zero-work SSE server in a child process, whose chunks cost nothing to make,
so that what a client measures against it is the client's own cost and timing error.

`paced_server` starts it (`python -m bench.perf.client_overhead --serve`, its child entry point
`serve`), pinned to a core when given. Every response streams its content chunks, one per
interval on an absolute schedule per stream.

`cellbench perf compare` (bench.perf.compare) runs the same server in two more modes: with a known
first-token delay (`first_ms`: the first chunk, which also names the role, goes out at request
receipt + first_ms, chunk k at + first_ms + (k-1) x interval, the last one carries the
finish_reason), and `precise`, written on that schedule by bench.perf.null_server.pacer, each of the opening
round's streams (`spread`, the streams a client opens at once) starting a further fraction of its
length late, so that streams neither tick nor end together; a later stream starts at receipt +
first_ms, keeping the phase its slot was given, and the offered rate stays streams / interval
chunks/s after the opening round (staggering every stream would idle each slot half a stream's
length between requests and offer about two thirds of that); `GET /stats` then
answers how late the server itself wrote, `GET /log` when it wrote each stream's chunks. Interval 0
is unpaced: one write per chunk, as fast as the loop turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import psutil

from bench.load.http.connection import Stream, is_stream
from bench.perf.null_server.pacer import Pacer
from bench.perf.null_server.pacer import loop as pacer_loop

MODEL = "perf-model"

# ------------------------------------------------------------------ the server (child process)

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
)


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunked-encoding frame; one frame per token, like a server flushing each."""
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(choices: list, usage: dict | None = None) -> bytes:
    obj = {
        "id": "chatcmpl-perf",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "system_fingerprint": None,
        "choices": choices,
    }
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _choice(delta: dict, finish: str | None = None) -> list:
    return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]


_ROLE = _frame(_event(_choice({"role": "assistant", "content": ""})))
_TOKEN = _frame(_event(_choice({"content": " tok"})))  # ~190 bytes, like a vLLM chunk


def _usage(n: int) -> bytes:
    return _event([], {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1})


def _tail(n: int) -> bytes:
    return _frame(_event(_choice({}, "length")) + _usage(n) + b"data: [DONE]\n\n") + b"0\r\n\r\n"


def _scheduled_chunk(k: int, n: int, sid: int | None = None) -> bytes:
    """Chunk k of n with a first-token delay: the role rides on the first token, the finish_reason
    on the last, as vLLM's server sends them, so every client counts exactly n token chunks; the
    last is followed by the usage event, [DONE] and the end of the body. A logged stream's first
    chunk says its id (" #<sid>"): both clients keep the start of the text, which ties their
    record to the server's log."""
    if 1 < k < n:
        return _TOKEN
    text = f" #{sid}" if k == 1 and sid is not None else " tok"
    delta = {"role": "assistant", "content": text} if k == 1 else {"content": text}
    chunk = _frame(_event(_choice(delta, "length" if k == n else None)))
    return chunk + _frame(_usage(n) + b"data: [DONE]\n\n") + b"0\r\n\r\n" if k == n else chunk


# An opening-round stream's first token comes first_ms + a fraction of the stream's length after
# its request: the fractional parts of sid x GOLDEN spread any number of streams evenly, so that
# their chunks and, after the first round, their requests arrive spread in time rather than in
# bursts that a one-process server (and client) would serve late.
GOLDEN = 0.6180339887498949

_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"


def _json_response(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: keep-alive\r\n\r\n%s" % (len(body), body))


class _PacedSSE(asyncio.Protocol):
    """HTTP/1.1 keep-alive; each POST streams max_tokens (or max_completion_tokens) chunks, token k
    at t0 + k * interval, or with `first` (a first-token delay) at receipt + first + (k-1) *
    interval, through `pacer` when given. `GET /stats` answers the pacer's lateness, `GET /log` its
    streams' write times; any other GET 404."""

    def __init__(self, interval: float, first: float | None = None, pacer: Pacer | None = None,
                 spread: int | None = None) -> None:
        self.interval = interval
        self.first = first
        self.pacer = pacer
        self.spread = spread  # the streams started spread (None: every one)
        self.buf = b""
        self.transport: Stream  # set by connection_made, before any data arrives
        self.task: asyncio.Future | None = None  # the response being streamed (a reference keeps it alive)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.pacer is not None:
            self.pacer.flush()
        if not is_stream(transport):
            raise TypeError(f"not a stream connection's transport: {type(transport).__name__}")
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        received = time.monotonic()  # the pacer's clock
        if self.pacer is not None:
            self.pacer.flush()
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
            if lines[0].startswith((b"GET /stats ", b"GET /log ")):
                stats = lines[0].startswith(b"GET /stats ")
                answer = {"n": 0} if self.pacer is None else self.pacer.stats() if stats else self.pacer.log()
                self.transport.write(_json_response(answer))
                continue
            if not lines[0].startswith(b"POST "):
                self.transport.write(_NOT_FOUND)
                continue
            asked = json.loads(body)
            n = int(asked.get("max_tokens") or asked.get("max_completion_tokens") or 16)
            if self.pacer is not None and self.first is not None:
                self.transport.write(_HEAD)
                sid, times = self.pacer.open_stream(received)
                stagger = (sid * GOLDEN) % 1.0 if self.spread is None or sid <= self.spread else 0.0
                first_due = received + self.first + n * self.interval * stagger
                self.pacer.add(first_due, self._steps(n, first_due, sid, times))
            else:
                self.task = asyncio.ensure_future(self._stream(n, received))

    def _steps(self, n: int, first_due: float, sid: int, times: list[float]) -> Callable[[], float | None]:
        """The pacer's step for one response: writes the next chunk (its moment into `times`),
        returns when the one after is due."""
        k, write, transport, interval, clock = 0, self.transport.write, self.transport, self.interval, time.monotonic

        def step() -> float | None:
            nonlocal k
            if transport.is_closing():
                return None
            k += 1
            chunk = _scheduled_chunk(k, n, sid)
            times.append(clock())
            write(chunk)
            return first_due + k * interval if k < n else None

        return step

    async def _stream(self, n: int, received: float) -> None:
        loop = asyncio.get_running_loop()
        write = self.transport.write
        if self.first is None:
            write(_HEAD + _ROLE)
            t0 = loop.time()
            due = [t0 + k * self.interval for k in range(1, n + 1)]
        else:  # the same schedule as the pacer's, on the loop's timers
            write(_HEAD)
            t0 = loop.time() - (time.monotonic() - received) + self.first
            due = [t0 + k * self.interval for k in range(n)]
        for k in range(1, n + 1):
            delay = due[k - 1] - loop.time()
            await asyncio.sleep(delay if delay > 0 else 0)  # unpaced: still one write per turn
            if self.transport.is_closing():
                return
            write(_TOKEN if self.first is None else _scheduled_chunk(k, n))
        if self.first is None:
            write(_tail(n))


def serve(interval: float, core: int | None, first: float | None = None, precise: bool = False,
          spread: int | None = None) -> None:
    """Child entry point: print `PORT <n>`, serve until stdin closes (the parent is gone)."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    loop: asyncio.AbstractEventLoop
    try:
        import uvloop

        loop = pacer_loop() if precise else uvloop.new_event_loop()  # uvloop's timers count milliseconds
    except ImportError:
        loop = pacer_loop() if precise else asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pacer = Pacer() if precise else None
    server: asyncio.Server = loop.run_until_complete(
        loop.create_server(lambda: _PacedSSE(interval, first, pacer, spread), "127.0.0.1", 0, backlog=1024))
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
    loop.run_forever()


@contextlib.contextmanager
def paced_server(interval_ms: float, core: int | None = None, first_ms: float | None = None,
                 precise: bool = False, spread: int | None = None) -> Iterator[tuple[str, psutil.Process]]:
    """The zero-work SSE server in a child process (pinned to `core` when given; with a first-token
    delay `first_ms`, paced by bench.perf.null_server.pacer when `precise`, the first `spread` streams started
    spread over a stream's length): yields its base URL and its process; the child exits when this
    context closes its stdin."""
    cmd = [sys.executable, "-m", "bench.perf.client_overhead", "--serve", "--interval-ms", str(interval_ms)]
    if core is not None:
        cmd += ["--core", str(core)]
    if first_ms is not None:
        cmd += ["--first-ms", str(first_ms)]
    if precise:
        cmd.append("--precise")
    if spread is not None:
        cmd += ["--spread", str(spread)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None  # both piped
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"perf server did not start: {line!r}")
        yield f"http://127.0.0.1:{line.split()[1]}", psutil.Process(proc.pid)
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
