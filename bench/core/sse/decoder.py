"""Incremental SSE framing (WHATWG "event stream" rules) over raw bytes: `SSEDecoder`."""

from __future__ import annotations

from typing import NamedTuple

# The largest event (or line) the decoder holds before giving up on the stream. A streamed chunk
# is under a kilobyte; a whole answer in one event, with logprobs, a few megabytes.
MAX_EVENT_BYTES = 16 * 2**20


class SSEEvent(NamedTuple):
    """One dispatched event: its `data` lines joined by `\\n`, and its `event:` name if any."""

    data: bytes
    event: str | None = None


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


