"""Server-sent events over raw bytes, and what one OpenAI `chat.completion.chunk` says.

Three layers, each usable alone:

* `SSEDecoder`  - incremental event framing (WHATWG "event stream" rules): events split across
  reads or several per read, `\\n`, `\\r\\n` and bare `\\r` line ends, `data:` with or without the
  space, multi-line `data`, `event:` names, `error:` lines (llama-server's errors), comment lines (`: keepalive 10/11`,
  mlx-lm); an
  event still unfinished after `MAX_EVENT_BYTES` is an error, not a buffer that grows without end.
* `parse_chunk` - one event's payload as a `Chunk`: output-bearing or not, answer-bearing or not,
  `finish_reason`, usage, `model`, or an SSE error event.
* `ChatStream`  - applies timed reads to a `RequestRecord`: the stamps and the end-of-stream
  verdict (`t_first_token`, `t_first_answer`, chunk times, `t_end`, `truncated` /
  `empty_output` / `invalid_sse` / `stream_error_event`).

The per-event path is measured (tests/core/test_sse_benchmark.py); keep it to a few byte checks, one
JSON parse and a few dict look-ups. A read that is exactly one `data: ` event (the common case: a
server flushes each token) skips the decoder's line splitting (`ChatStream.feed`), the payload is
read into a tuple, not a `Chunk` (`_read`), and the JSON parser is orjson when installed
(`bench.base.fastjson`). Nothing here touches the network or reads a clock: the caller passes the
arrival time of each read, so every rule is testable with a scripted clock.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from bench.base.fastjson import fast_loads as _fast_loads
from bench.base.fastjson import stdlib_loads as _stdlib_loads
from bench.core.records import ErrorType, RequestError, RequestRecord, error_object_text, quote_server

DONE = b"[DONE]"
# The largest event (or line) the decoder holds before giving up on the stream. A streamed chunk
# is under a kilobyte; a whole answer in one event, with logprobs, a few megabytes.
MAX_EVENT_BYTES = 16 * 2**20
HEAD_CHARS = 200  # how much output text a record keeps (RequestRecord.output_text_head)
_MESSAGE_CHARS = 300  # how much of a body that is not SSE its error quotes

class SSEEvent(NamedTuple):
    """One dispatched event: its `data` lines joined by `\\n`, and its `event:` name if any."""

    data: bytes
    event: str | None = None


class SSEFormatError(ValueError):
    """The payload of a `data:` event is not a chat completion chunk (bad JSON, wrong shape)."""


class SSEOverflow(ValueError):
    """An event, or a single line, grew past the decoder's cap before it ended."""


class SSEDecoder:
    """Incremental SSE framing: `feed(bytes)` returns the events completed by those bytes.

    Feeding a stream in any split (1-byte pieces or one piece) yields the same events. Lines end
    with `\\n`, `\\r\\n` or `\\r`; a trailing `\\r` is held back until the next byte says whether a
    `\\n` follows. `comments` counts comment lines (keep-alives), which never form an event.
    Memory is bounded: once more than `max_event_bytes` were fed while an event or line stayed
    unfinished, `feed` raises `SSEOverflow` and drops what it held. A long line costs linear
    time: its pieces are joined once, when its end arrives.
    """

    __slots__ = ("_buf", "_parts", "_data", "_event", "_spill", "comments", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""  # an unterminated line (its first piece)
        self._parts: list[bytes] = []  # the later pieces of a long unterminated line
        self._data: list[bytes] = []  # `data` lines of the event being built
        self._event: str | None = None
        self._spill = 0  # bytes of the unfinished event (an upper bound: its reads' sizes)
        self.comments = 0
        self.max_event_bytes = max_event_bytes

    @property
    def pending(self) -> int:
        """Bytes of an unterminated last line (a stream cut mid-line leaves them)."""
        return len(self._buf) + sum(map(len, self._parts))

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._buf:  # rare: the last read ended mid-line
            buf = self._continue_line(chunk)
            if buf is None:
                return []
        else:
            buf = chunk
        held_cr = b""
        if b"\r" in buf:  # rare (\r\n servers): normalise, keeping a final \r for the next read
            if buf[-1:] == b"\r":
                buf, held_cr = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop() + held_cr
        events: list[SSEEvent] = []
        for line in lines:
            if not line:  # blank line: dispatch
                if self._data:
                    events.append(self._dispatch())
                self._event = None
            elif line[:5] == b"data:":
                self._data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[:1] == b":":
                self.comments += 1
            else:
                self._field(line)
        if self._buf or self._data:  # rare: an event goes on in the next read
            self._grow(self._held() if events else self._spill + len(chunk))
        elif self._spill:
            self._spill = 0
        return events

    def _continue_line(self, chunk: bytes) -> bytes | None:
        """The line left unterminated, with `chunk` after it; None while no line end has come (the
        piece is kept, not joined: joining on every read would make a long line quadratic)."""
        if self._buf[-1:] != b"\r" and b"\n" not in chunk and b"\r" not in chunk:
            self._parts.append(chunk)
            self._grow(self._spill + len(chunk))
            return None
        if not self._parts:
            return self._buf + chunk
        buf = b"".join((self._buf, *self._parts, chunk))
        self._parts = []
        return buf

    def _held(self) -> int:
        return len(self._buf) + sum(map(len, self._data))

    def _grow(self, spill: int) -> None:
        self._spill = spill
        if spill > self.max_event_bytes:
            self._buf, self._parts, self._data, self._spill = b"", [], [], 0
            raise SSEOverflow(f"SSE event over {self.max_event_bytes / 2**20:g} MiB: {spill} bytes read "
                              "without the event ending")

    def flush(self) -> list[SSEEvent]:
        """At EOF: the last event if its `data` lines were complete but the blank line never came.

        The spec drops such an event; a benchmark keeps it (a server that omits the final blank
        line still sent its finish chunk). An unterminated last line is not parsed: a stream cut
        mid-JSON is truncated, not invalid. `pending` tells how many bytes were left.
        """
        if self._buf == b"\r":  # a held line end
            self._buf = b""
        if not self._data:
            return []
        return [self._dispatch()]

    def _dispatch(self) -> SSEEvent:
        data = self._data
        self._data = []
        return SSEEvent(data[0] if len(data) == 1 else b"\n".join(data), self._event)

    def _field(self, line: bytes) -> None:
        name, sep, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"data" and not sep:  # a bare `data` line appends an empty line
            self._data.append(b"")
        elif name == b"error":  # llama-server's own error line (`error: {json}`): an error event
            self._data.append(value)
            self._event = "error"
        # `id`, `retry` and unknown fields change nothing a benchmark reads


class Chunk(NamedTuple):
    """What one `data:` payload says (see `parse_chunk`)."""

    output: bool  # carries output: content, reasoning or a tool-call delta
    answer: bool  # carries output that is not reasoning: content or a tool call
    text: str  # the output text, for the record's head
    finish_reason: str | None
    usage: dict[str, Any] | None
    model: str | None
    error: str | None  # message of an SSE error event


def parse_chunk(data: bytes, event: str | None = None) -> Chunk:
    """Interpret one chunk payload (not `[DONE]`).

    output  = any choice's delta has non-empty `content`, `reasoning_content`/`reasoning`, or a
              non-empty `tool_calls` list (a structured tool call is output);
    answer  = content or tool call (reasoning is output but not answer);
    usage   = the top-level `usage` object, whether on the finish chunk (transformers serve) or in
              a separate `choices: []` chunk (llama-server, vLLM, mlx-lm);
    error   = an `{"error": ...}` payload, an `event: error` event or an `error:` line, in the
              server's words (`bench.core.records.error_object_text`).
    A role-only or empty delta is neither output nor answer. Raises `SSEFormatError` when the
    payload is not a JSON object or its `choices` are malformed.
    """
    return Chunk._make(_read(data, event))


def _read(data: bytes, event: str | None) -> tuple[bool, bool, str, Any, Any, Any, str | None]:
    """A `Chunk`'s fields as a plain tuple (cheaper to build): `parse_chunk` on the per-event path."""
    try:
        try:
            obj = _fast_loads(data)
        except ValueError:  # what orjson refuses (NaN, a lone surrogate, bad JSON): the stdlib decides
            obj = _stdlib_loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        if event == "error":  # an error event in plain words
            words = quote_server(data.decode("utf-8", "replace")) or "empty error event"
            return False, False, "", None, None, None, words
        raise SSEFormatError(f"invalid JSON in SSE data ({exc}): {data[:120]!r}") from None
    if type(obj) is not dict:
        raise SSEFormatError(f"SSE data is not a JSON object: {data[:120]!r}")
    err = obj.get("error")
    if err or event == "error":
        return False, False, "", None, None, None, error_object_text(err if err else obj) or "empty error event"
    output = answer = False
    out = ""
    finish = None
    choices = obj.get("choices")
    if choices:
        try:
            for choice in choices:
                delta = choice.get("delta")
                if delta:
                    content = delta.get("content")
                    if content:
                        output = answer = True
                        out += content if type(content) is str else str(content)
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning:
                        output = True
                        out += reasoning if type(reasoning) is str else str(reasoning)
                    tool_calls = delta.get("tool_calls")
                    if tool_calls:
                        output = answer = True
                        for call in tool_calls:
                            function = call.get("function") or {}
                            out += (function.get("name") or "") + (function.get("arguments") or "")
                reason = choice.get("finish_reason")
                if reason:
                    finish = reason
        except (AttributeError, TypeError) as exc:  # a choice, delta or call that is not an object
            raise SSEFormatError(f"malformed chunk ({exc}): {data[:120]!r}") from None
    return output, answer, out, finish, obj.get("usage") or None, obj.get("model"), None


class ChatStream:
    """One streamed chat completion applied to its record, read by read.

    `feed(data, now)` for every body read (`now` = its arrival time), then `close(now)` at EOF.
    Stamps: `t_first_byte` (first read), `t_first_token` (first output event), `t_first_answer`
    (first content/tool-call event), one chunk time per output event, `t_end` (`[DONE]`, or EOF
    after a `finish_reason`). Verdicts (`record.error`): `stream_error_event`, `invalid_sse` (a
    payload that is not a chunk, or an event over `MAX_EVENT_BYTES`), `empty_output` (no output
    event; the message names the finish_reason), `truncated` (EOF without `[DONE]` and without a
    finish_reason). Once `finished`, later bytes are ignored.
    """

    __slots__ = ("record", "finished", "events", "_decoder", "_head", "_bytes")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.finished = False  # [DONE] seen, or the stream failed
        self.events = 0  # data events parsed
        self._decoder = SSEDecoder()
        self._head = b""  # the first bytes, quoted when the body is not SSE at all
        self._bytes = 0

    def feed(self, data: bytes, now: float) -> None:
        if not self._bytes:
            self.record.t_first_byte = now
            self._head = data[:_MESSAGE_CHARS]
        self._bytes += len(data)
        if self.finished:
            return
        dec = self._decoder
        # The hot path: the read is exactly one `data: ` event ended by a blank line, and the
        # decoder holds nothing from earlier reads; its payload is what `dec.feed` would return,
        # taken without splitting lines.
        if (data[:6] == b"data: " and data.find(b"\n") == len(data) - 2 and data[-1:] == b"\n" and not dec._buf
                and not dec._data and dec._event is None and b"\r" not in data):
            dec._spill = 0
            self._on_event(data[6:-2], None, now)
            return
        try:
            events = self._decoder.feed(data)
        except SSEOverflow as exc:
            self.fail(ErrorType.INVALID_SSE, str(exc), now)
            return
        for event in events:
            self._on_event(event.data, event.event, now)
            if self.finished:
                return

    def close(self, now: float) -> None:
        """EOF: flush the decoder and decide how the stream ended."""
        if self.finished:
            return
        for event in self._decoder.flush():
            self._on_event(event.data, event.event, now)
            if self.finished:
                return
        rec = self.record
        if rec.finish_reason is not None:  # no [DONE] is fine after a finish_reason
            self._end(now)
        elif not self.events and not self._decoder.comments and self._bytes:
            self.fail(ErrorType.INVALID_SSE, f"response is not an SSE stream: {self._head!r}", now)
        else:
            cut = f", {self._decoder.pending} bytes of an unterminated line" if self._decoder.pending else ""
            self.fail(
                ErrorType.TRUNCATED,
                f"stream ended without [DONE] or finish_reason after {self._bytes} bytes, "
                f"{self.events} events, {rec.n_chunks} output chunks{cut}",
                now,
            )

    def fail(self, kind: ErrorType, message: str, now: float, **details: Any) -> None:
        """Record a failure and stop reading; no-op once the stream has finished (a connection
        reset or timeout after `[DONE]` does not undo a complete response)."""
        if self.finished:
            return
        self.finished = True
        self.record.t_end = now
        self.record.error = RequestError(kind, message, **details)

    def _on_event(self, data: bytes, name: str | None, now: float) -> None:
        if data[:1] != b"{" and data.strip() == DONE:
            self.record.done_marker = True
            self._end(now)
            return
        self.events += 1
        try:
            output, answer, text, finish, usage, model, error = _read(data, name)
        except SSEFormatError as exc:
            self.fail(ErrorType.INVALID_SSE, str(exc), now)
            return
        if error is not None:
            self.fail(ErrorType.STREAM_ERROR_EVENT, f"HTTP 200, then an error in the stream: {error}", now)
            return
        rec = self.record
        if output:
            rec.chunk_times.append(now)
            if rec.t_first_token is None:
                rec.t_first_token = now
            if answer and rec.t_first_answer is None:
                rec.t_first_answer = now
            if len(rec.output_text_head) < HEAD_CHARS:
                rec.output_text_head = (rec.output_text_head + text)[:HEAD_CHARS]
        if model and rec.served_model is None:
            rec.served_model = model
        if finish is not None:
            rec.finish_reason = finish
        if usage is not None:
            _apply_usage(usage, rec)

    def _end(self, now: float) -> None:
        rec = self.record
        if not rec.chunk_times:
            self.fail(
                ErrorType.EMPTY_OUTPUT,
                f"HTTP 200 but no output-bearing event (finish_reason={rec.finish_reason}, "
                f"{self.events} events, [DONE]={'yes' if rec.done_marker else 'no'})",
                now,
            )
            return
        self.finished = True
        rec.t_end = now


def _apply_usage(usage: Any, rec: RequestRecord) -> None:
    """Keep the last usage seen (vLLM's continuous usage repeats a growing count)."""
    if not isinstance(usage, dict):
        return
    completion = usage.get("completion_tokens")
    if type(completion) is int:
        rec.usage_completion_tokens = completion
    prompt = usage.get("prompt_tokens")
    if type(prompt) is int:
        rec.usage_prompt_tokens = prompt
    details = usage.get("completion_tokens_details")  # reasoning models: how many of the tokens were thinking
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if type(reasoning) is int:
        rec.usage_reasoning_tokens = reasoning
