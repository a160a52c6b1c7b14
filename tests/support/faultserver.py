"""An OpenAI-compatible chat server that misbehaves on purpose, one way per mode.

    python -m tests.support.faultserver --port 8012 --mode cut_before_finish [--served-id tiny]

The fault matrix (tests/run/test_faults.py) runs real cells against it, started by a model profile's
`openai.command` or named by `--endpoint`. Standard library only, on asyncio streams, so every
byte on the wire is this module's choice: a stream cut between two events, headers sent one byte
at a time, a 50 MB event. Each connection carries one request (`Connection: close`); streamed
bodies use chunked transfer encoding, as real servers do, so a cut stream is visibly incomplete.

Endpoints: GET /v1/models, GET /health, GET /version, and POST /v1/chat/completions, which streams
`chat.completion.chunk` events (a role chunk, one chunk per token, a finish_reason chunk, a usage
chunk when `stream_options.include_usage`, then `data: [DONE]`) of min(max_tokens, --tokens)
tokens, or answers one `chat.completion` when `stream` is false. Every request is logged on
stdout (a cell's server log then shows what the server saw), and the first line names the pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

OTHER_ID = "not-the-model"  # the id a wrong-model mode names instead of the served one
EXIT_CODE = 3  # exit_mid_level's exit status
DEFAULT_TOKENS = 8  # tokens per answer, unless max_tokens asks for fewer
BIG_EVENT_BYTES = 50 * 2**20
TRICKLE_S = 0.005  # between two bytes of trickle_headers' status line and headers
SHORT_TOKENS = 2  # short_output's early answers
REASONING_TOKENS = 5  # the reasoning mode's thinking: reasoning deltas (a token each) before the answer
_WRITE_PIECE = 2**20  # a big event goes out in pieces, so the server never buffers all of it twice

MODES: dict[str, str] = {
    "ok": "a well-behaved server (the control)",
    "http404": "every chat request answers 404: the model does not exist",
    "http409": "every chat request answers 409: the model is not loaded",
    "models_wrong": f"/v1/models lists {OTHER_ID} instead of the served id",
    "responses_wrong": f"every chunk names the model {OTHER_ID}",
    "http500_html": "every chat request answers 500 with an HTML page",
    "sse_not_json": "a role chunk, then a `data:` line that is not JSON",
    "sse_error_event": 'one token, then an `event: error` event with an {"error": {...}} payload',
    "cut_before_finish": "three tokens, then the connection closes: no finish_reason, no [DONE]",
    "tool_calls_only": "only tool-call deltas, finish_reason tool_calls",
    "multi_token_chunks": "four tokens per chunk, with usage counting every token",
    "no_done": "a finish_reason and usage, then the stream ends without [DONE]",
    "keepalive_comments": "a `: keep-alive` comment line before every event",
    "slow_ready": "503 on every path for the first --ready-after seconds",
    "fail_share": "every --fail-every-th chat request answers 500",
    "exit_mid_level": f"the process exits with code {EXIT_CODE} once it has answered --after chat requests",
    "silence_warmup": "response headers, then nothing, from the first chat request on",
    "silence_level": "response headers, then nothing, once --after chat requests were answered",
    "big_body": "a 200 whose first content event is one 50 MB data line",
    "trickle_headers": "the status line and headers one byte at a time, then a normal stream",
    "gzip_stream": "the stream gzip-compressed (Content-Encoding: gzip) though the request asked for identity",
    "br_stream": "the stream labelled Content-Encoding: br (an encoding cellbench does not decode)",
    "error_in_stream": "a role chunk, then llama-server's over-context error as an `error:` line, then the end",
    "http400_openai_error": "every chat request answers llama-server b11434's over-context 400, byte for byte",
    "http429_retry_after": "every chat request answers 429 with Retry-After: 2 and an OpenAI error body",
    "short_output": "answers of max_tokens tokens (up to --tokens), except every --fail-every-th chat request, "
                    f"which stops after {SHORT_TOKENS} tokens with finish_reason stop: ignore_eos not honoured",
    "reasoning": f"a thinking model: {REASONING_TOKENS} reasoning_content deltas, then the answer's content deltas; "
                 "usage.completion_tokens_details.reasoning_tokens counts the reasoning",
}

# Modes the fault matrix (tests/run/test_faults.py) does not run: tests/run/test_api_keys.py asserts them,
# with the key and without it.
KEY_MODES: dict[str, str] = {
    "ready_401": "401 on every path unless the request has `Authorization: Bearer <--api-key>` (no --api-key: "
                 "always 401)",
}


@dataclass(frozen=True)
class Options:
    mode: str = "ok"
    served_id: str = "tiny"
    host: str = "127.0.0.1"
    port: int = 8012
    tokens: int = DEFAULT_TOKENS  # the most tokens an answer has (max_tokens can ask for fewer)
    after: int = 14  # exit_mid_level / silence_level: requests answered first (14: the second level
    #                  of a server shared by `--concurrency 1,2 --requests 9 --warmup 1`)
    fail_every: int = 3  # fail_share: chat requests number N, 2N, 3N, ... answer 500 (short_output: stop early)
    ready_after_s: float = 3.0  # slow_ready: 503 until then
    api_key: str | None = None  # ready_401: the key a request must carry
    log_bodies: bool = False  # log every chat request's body too (what the client sent)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes
    authorization: str = ""  # the Authorization header's value


def log(line: str) -> None:
    print(line, flush=True)


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
# llama-server b11434's error object for a prompt over its context (--ctx-size 256), as it sent it
# in a 400 (stream or not); error_in_stream puts the same object in an `error:` line, the form older
# llama-server builds used for an error met after the stream had begun
LLAMA_OVER_CONTEXT = (b'{"error":{"code":400,"message":"request (263 tokens) exceeds the available context size '
                      b'(256 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":263,'
                      b'"n_ctx":256}}')
LLAMA_400_HEAD = (b"HTTP/1.1 400 Bad Request\r\nServer: llama.cpp\r\nAccess-Control-Allow-Origin: \r\n"
                  b"Content-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n")
RETRY_AFTER_S = 2  # http429_retry_after's Retry-After
STREAM_ENCODINGS = {"gzip_stream": "gzip", "br_stream": "br"}  # the Content-Encoding a mode's streams say
KEEPALIVE = b": keep-alive\n\n"
ERROR_PAGE = b"<html><head><title>500 Internal Server Error</title></head><body><h1>Oops</h1></body></html>"


def response_head(status: int, headers: dict[str, Any]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """One HTTP/1.1 request (head and a Content-Length body), or None when the peer sent none."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ", 2)
    length, authorization = 0, ""
    for line in header_lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        if name.strip().lower() == "authorization":
            authorization = value.strip()
    body = await reader.readexactly(length) if length else b""
    return Request(method, target.split("?", 1)[0], body, authorization)


async def send_body(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str) -> None:
    head = response_head(status, {"Content-Type": content_type, "Content-Length": len(body), "Connection": "close"})
    writer.write(head + body)
    await writer.drain()


async def send_json(writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
    await send_body(writer, status, json.dumps(obj).encode(), "application/json")


def error_body(message: str, kind: str, code: int) -> dict:
    return {"error": {"message": message, "type": kind, "code": code}}


class EventStream:
    """A chunked `text/event-stream` response: one HTTP chunk per SSE event."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer

    async def open(self, *, trickle: bool = False, encoding: str | None = None) -> None:
        head = response_head(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                   **({"Content-Encoding": encoding} if encoding else {}),
                                   "Transfer-Encoding": "chunked", "Connection": "close"})
        if not trickle:
            self.writer.write(head)
            await self.writer.drain()
            return
        for i in range(len(head)):
            self.writer.write(head[i:i + 1])
            await self.writer.drain()
            await asyncio.sleep(TRICKLE_S)

    async def send(self, event: bytes) -> None:
        self.writer.write(b"%x\r\n" % len(event))
        view = memoryview(event)
        for start in range(0, len(event), _WRITE_PIECE):
            self.writer.write(view[start:start + _WRITE_PIECE])
            await self.writer.drain()
        self.writer.write(b"\r\n")
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()


class Completion:
    """The chunks of one answer: ids, the model named, token and usage counts."""

    def __init__(self, model: str, n_tokens: int, prompt_tokens: int, include_usage: bool, finish: str):
        self.id = f"chatcmpl-fault-{time.monotonic_ns()}"
        self.created = int(time.time())
        self.model = model
        self.n_tokens = n_tokens
        self.prompt_tokens = prompt_tokens
        self.include_usage = include_usage
        self.finish = finish

    def chunk(self, delta: dict | None = None, *, finish: str | None = None, usage: dict | None = None) -> dict:
        obj: dict = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                     "choices": [] if delta is None else
                     [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if usage is not None:
            obj["usage"] = usage
        return obj

    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.n_tokens,
                "total_tokens": self.prompt_tokens + self.n_tokens}

    def tokens(self) -> list[str]:
        return [f" tok{i}" for i in range(self.n_tokens)]

    def tool_call_deltas(self) -> list[dict]:
        """One tool call in n_tokens deltas (one per token): the name, then the arguments in pieces."""
        arguments = json.dumps({"city": "Paris", "unit": "celsius", "days": 3})
        first = {"index": 0, "id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        pieces = min(self.n_tokens - 1, len(arguments))
        if pieces < 1:
            return [{"tool_calls": [{**first, "function": {"name": "get_weather", "arguments": arguments}}]}]
        cuts = [round(i * len(arguments) / pieces) for i in range(pieces + 1)]
        parts = [arguments[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
        return [{"tool_calls": [first]}, *({"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in parts)]


class FaultServer:
    """Routes requests and misbehaves as `opts.mode` says; counts chat requests in arrival order."""

    def __init__(self, opts: Options):
        if opts.mode not in MODES and opts.mode not in KEY_MODES:
            raise ValueError(f"unknown mode {opts.mode!r}; modes: {', '.join(MODES)}")
        self.opts = opts
        self.started = time.monotonic()
        self.started_at = int(time.time())
        self.chat_requests = 0
        self._big_event: bytes | None = None

    def ready(self) -> bool:
        return self.opts.mode != "slow_ready" or time.monotonic() - self.started >= self.opts.ready_after_s

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await read_request(reader)
            if request is not None:
                await self.route(request, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: its business
        finally:
            with contextlib.suppress(ConnectionError):
                writer.close()

    async def route(self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chat = request.method == "POST" and request.path == "/v1/chat/completions"
        if chat:
            self.chat_requests += 1
        number = f" #{self.chat_requests}" if chat else ""
        log(f"{request.method} {request.path}{number}")
        if chat and self.opts.log_bodies:
            log(f"body {request.body.decode('utf-8', 'replace')}")
        if self.opts.mode == "ready_401" and (not self.opts.api_key or
                                              request.authorization != f"Bearer {self.opts.api_key}"):
            await send_json(writer, 401, error_body("Invalid API Key", "authentication_error", 401))
        elif not self.ready():
            await send_json(writer, 503, error_body("loading the model", "unavailable", 503))
        elif chat:
            await self.chat(self.chat_requests, request, reader, writer)
        elif request.method == "GET" and request.path == "/v1/models":
            listed = OTHER_ID if self.opts.mode == "models_wrong" else self.opts.served_id
            await send_json(writer, 200, {"object": "list", "data": [
                {"id": listed, "object": "model", "created": self.started_at, "owned_by": "faultserver"}]})
        elif request.method == "GET" and request.path == "/health":
            await send_json(writer, 200, {"status": "ok"})
        elif request.method == "GET" and request.path == "/version":
            await send_json(writer, 200, {"version": "faultserver"})
        else:
            await send_json(writer, 404, error_body(f"no route {request.method} {request.path}", "not_found", 404))

    async def chat(self, number: int, request: Request, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter) -> None:
        mode = self.opts.mode
        if mode == "http404":
            await send_json(writer, 404, error_body(f"The model `{self.opts.served_id}` does not exist.",
                                                    "NotFoundError", 404))
            return
        if mode == "http409":
            await send_json(writer, 409, error_body("the model is not loaded on this server", "conflict", 409))
            return
        if mode == "http500_html":
            await send_body(writer, 500, ERROR_PAGE, "text/html")
            return
        if mode == "http400_openai_error":
            writer.write(LLAMA_400_HEAD % len(LLAMA_OVER_CONTEXT) + LLAMA_OVER_CONTEXT)
            await writer.drain()
            return
        if mode == "http429_retry_after":
            body = json.dumps(error_body("Rate limit reached for requests", "rate_limit_exceeded", 429)).encode()
            writer.write(response_head(429, {"Content-Type": "application/json", "Content-Length": len(body),
                                             "Retry-After": RETRY_AFTER_S, "Connection": "close"}) + body)
            await writer.drain()
            return
        if mode == "fail_share" and number % self.opts.fail_every == 0:
            await send_json(writer, 500, error_body(f"request {number} failed on purpose", "server_error", 500))
            return
        try:
            body = json.loads(request.body)
            messages = body["messages"]
        except (ValueError, KeyError, TypeError) as exc:
            await send_json(writer, 400, error_body(f"bad request body: {exc}", "invalid_request_error", 400))
            return
        completion = self.completion(body, messages, number)
        silent = mode == "silence_warmup" or (mode == "silence_level" and number > self.opts.after)
        if not body.get("stream"):
            await send_json(writer, 200, self.whole(completion))
        elif silent:
            await EventStream(writer).open()
            await reader.read()  # until the client gives up and closes
            return
        else:
            await self.stream(completion, writer)
        if mode == "exit_mid_level" and number >= self.opts.after:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            log(f"exiting with code {EXIT_CODE} after chat request #{number}")
            os._exit(EXIT_CODE)

    def completion(self, body: dict, messages: Sequence[Any], number: int = 0) -> Completion:
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or self.opts.tokens
        n_tokens = max(1, min(int(max_tokens), self.opts.tokens))
        if self.opts.mode == "short_output" and number % self.opts.fail_every == 0:
            n_tokens = min(n_tokens, SHORT_TOKENS)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        model = OTHER_ID if self.opts.mode == "responses_wrong" else str(body.get("model") or self.opts.served_id)
        finish = "tool_calls" if self.opts.mode == "tool_calls_only" else (
            "length" if n_tokens == int(max_tokens) else "stop")
        return Completion(model, n_tokens, _count_words(messages), include_usage, finish)

    def whole(self, c: Completion) -> dict:
        return {"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model, "usage": c.usage(),
                "choices": [{"index": 0, "finish_reason": c.finish,
                             "message": {"role": "assistant", "content": "".join(c.tokens())}}]}

    async def stream(self, c: Completion, writer: asyncio.StreamWriter) -> None:
        stream = EventStream(writer)
        encoding = STREAM_ENCODINGS.get(self.opts.mode)
        await stream.open(trickle=self.opts.mode == "trickle_headers", encoding=encoding)
        events = self.events(c)
        for event in gzipped(events) if encoding == "gzip" else events:
            await stream.send(event)
        if self.opts.mode != "cut_before_finish":  # a cut stream never sends chunked encoding's last chunk
            await stream.end()

    def events(self, c: Completion) -> list[bytes]:
        """The SSE events of one streamed answer, as this mode shapes them."""
        mode = self.opts.mode
        role = sse(c.chunk({"role": "assistant", "content": ""}))
        if mode == "reasoning":
            return [role, *self.reasoning_events(c)]
        if mode == "error_in_stream":
            return [role, b"error: " + LLAMA_OVER_CONTEXT[len(b'{"error":'):-1] + b"\n\n"]
        if mode == "sse_not_json":
            return [role, b"data: tok0 tok1 tok2 is not JSON\n\n", DONE]
        if mode == "tool_calls_only":
            output = [sse(c.chunk(delta)) for delta in c.tool_call_deltas()]
        elif mode == "multi_token_chunks":
            tokens = c.tokens()
            output = [sse(c.chunk({"content": "".join(tokens[i:i + 4])})) for i in range(0, len(tokens), 4)]
        else:
            output = [sse(c.chunk({"content": token})) for token in c.tokens()]
        if mode == "big_body":
            output[0] = self.big_event(c)
        if mode == "sse_error_event":
            error = error_body("the engine failed while generating", "server_error", 500)
            return [role, output[0], b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"]
        if mode == "cut_before_finish":
            return [role, *output[:3]]
        events = [role, *output, sse(c.chunk({}, finish=c.finish))]
        if c.include_usage:
            events.append(sse(c.chunk(usage=c.usage())))
        if mode != "no_done":
            events.append(DONE)
        if mode == "keepalive_comments":
            events = [piece for event in events for piece in (KEEPALIVE, event)]
        return events

    def reasoning_events(self, c: Completion) -> list[bytes]:
        """Reasoning deltas, then content deltas (each event its own write), the finish, usage with the
        reasoning tokens (the answer keeps at least one token) and [DONE]."""
        thinking = min(REASONING_TOKENS, c.n_tokens - 1)
        events = [sse(c.chunk({"reasoning_content": token} if i < thinking else {"content": token}))
                  for i, token in enumerate(c.tokens())]
        events.append(sse(c.chunk({}, finish=c.finish)))
        if c.include_usage:
            usage = {**c.usage(), "completion_tokens_details": {"reasoning_tokens": thinking}}
            events.append(sse(c.chunk(usage=usage)))
        return [*events, DONE]

    def big_event(self, c: Completion) -> bytes:
        """One content event of BIG_EVENT_BYTES, built once per process."""
        if self._big_event is None:
            head = sse(c.chunk({"content": ""}))
            filler = BIG_EVENT_BYTES - len(head)
            self._big_event = sse(c.chunk({"content": "x" * filler}))
        return self._big_event


def gzipped(events: list[bytes]) -> list[bytes]:
    """The events as one gzip stream, each flushed (Z_SYNC_FLUSH) so it decodes on arrival, as a
    compressing proxy that flushes per write sends them. br_stream's bytes stay as they are: the
    standard library has no brotli, and a client that does not decode br must refuse by the header."""
    z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    out = [z.compress(event) + z.flush(zlib.Z_SYNC_FLUSH) for event in events]
    out[-1] += z.flush()
    return out


def _count_words(messages: Sequence[Any]) -> int:
    """A stand-in for prompt tokens: the words of every message's text."""
    words = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        words += len(str(content or "").split())
    return max(1, words)


async def serve(opts: Options) -> None:
    """Listen on opts.host:opts.port (0: any free port) and serve until cancelled."""
    server = FaultServer(opts)
    listener = await asyncio.start_server(server.handle, opts.host, opts.port, reuse_address=True)
    port = listener.sockets[0].getsockname()[1]
    log(f"faultserver pid {os.getpid()}: mode {opts.mode}, serving {opts.served_id} on http://{opts.host}:{port}")
    async with listener:
        await listener.serve_forever()


def parse_args(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m tests.support.faultserver", description=__doc__.splitlines()[0],
                                     epilog="modes: " + "; ".join(f"{m}: {why}"
                                                                  for m, why in {**MODES, **KEY_MODES}.items()))
    parser.add_argument("--mode", default="ok", choices=[*MODES, *KEY_MODES], metavar="MODE",
                        help="one of the modes below [ok]")
    parser.add_argument("--port", type=int, default=Options.port,
                        help="0: any free port, named on the first line [8012]")
    parser.add_argument("--host", default=Options.host, help="[127.0.0.1]")
    parser.add_argument("--served-id", default=Options.served_id, help="the model id served [tiny]")
    parser.add_argument("--tokens", type=int, default=Options.tokens, help="tokens per answer at most [8]")
    parser.add_argument("--after", "--exit-after", type=int, default=Options.after,
                        help="exit_mid_level, silence_level: chat requests answered normally first [14]")
    parser.add_argument("--fail-every", type=int, default=Options.fail_every,
                        help="fail_share's and short_output's period [3]")
    parser.add_argument("--ready-after", type=float, default=Options.ready_after_s, help="slow_ready's seconds [3]")
    parser.add_argument("--tag", default=None, help="ignored: lets a test find this process by its command line")
    parser.add_argument("--api-key", default=None, help="ready_401: the key requests must carry [none]")
    parser.add_argument("--log-bodies", action="store_true", help="log every chat request's body on stdout")
    args = parser.parse_args(argv)
    return Options(args.mode, args.served_id, args.host, args.port, args.tokens, args.after, args.fail_every,
                   args.ready_after, api_key=args.api_key, log_bodies=args.log_bodies)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    try:
        asyncio.run(serve(opts))
    except OSError as exc:  # the port is taken
        print(f"faultserver: cannot listen on {opts.host}:{opts.port}: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
