"""One streamed chat completion applied to its record, read by read: `ChatStream`."""

from __future__ import annotations

from typing import Any

from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.core.sse.chunk import SSEFormatError, apply_usage, read_payload
from bench.core.sse.decoder import SSEDecoder, SSEOverflow
from bench.core.sse.repeat import RepeatedChunk

DONE = b"[DONE]"
HEAD_CHARS = 200  # how much output text a record keeps (RequestRecord.output_text_head)
_MESSAGE_CHARS = 300  # how much of a body that is not SSE its error quotes
# How often one stream learns its repeated chunk: the role chunk, then the first plain one, is the
# usual two; a server that changes a field in every chunk would pay for learning at every chunk.
_LEARN_TIMES = 3


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

    __slots__ = ("record", "finished", "events", "_decoder", "_head", "_bytes", "_repeat", "_learned")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.finished = False  # [DONE] seen, or the stream failed
        self.events = 0  # data events parsed
        self._decoder = SSEDecoder()
        self._head = b""  # the first bytes, quoted when the body is not SSE at all
        self._bytes = 0
        self._repeat: RepeatedChunk | None = None  # the last content chunk, for reads that repeat it
        self._learned = 0  # times it was learned: a server whose chunks never repeat stops being asked

    def feed(self, data: bytes, now: float) -> None:
        if not self._bytes:
            self.record.t_first_byte = now
            self._head = data[:_MESSAGE_CHARS]
        self._bytes += len(data)
        if self.finished:
            return
        dec = self._decoder
        if not dec._buf and not dec._data and dec._event is None:  # the decoder holds nothing from earlier reads
            repeat = self._repeat
            if repeat is not None:  # the hot path: the stream's last content chunk, another text
                text = repeat.text_of(data)
                if text is not None:
                    self.events += 1
                    rec = self.record
                    rec.chunk_times.append(now)  # its first token and answer were stamped when it was learned
                    if len(rec.output_text_head) < HEAD_CHARS:
                        rec.output_text_head = (rec.output_text_head + text)[:HEAD_CHARS]
                    if rec.answer_text is not None:  # a session's turn keeps its whole answer
                        rec.answer_text += text
                    return
            # The read is exactly one `data: ` event ended by a blank line: its payload is what
            # `dec.feed` would return, taken without splitting lines.
            if data[:6] == b"data: " and data.find(b"\n") == len(data) - 2 and data[-1:] == b"\n" and b"\r" not in data:
                dec._spill = 0
                self._on_event(data[6:-2], None, now, data)
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

    def _on_event(self, data: bytes, name: str | None, now: float, read: bytes | None = None) -> None:
        """One event's payload; `read` is the whole read when it was exactly this one event."""
        if data[:1] != b"{" and data.strip() == DONE:
            self.record.done_marker = True
            self._end(now)
            return
        self.events += 1
        try:
            output, answer, text, finish, usage, model, error = read_payload(data, name)
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
            if answer and rec.answer_text is not None:
                rec.answer_text += text
            if read is not None and answer and finish is None and usage is None and self._learned < _LEARN_TIMES:
                self._repeat = RepeatedChunk.learn(read, text)
                self._learned += 1
        if model and rec.served_model is None:
            rec.served_model = model
        if finish is not None:
            rec.finish_reason = finish
        if usage is not None:
            apply_usage(usage, rec)

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
