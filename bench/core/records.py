"""What one request leaves behind: its timestamps, token counts and, if it failed, a typed error.

Times are `time.perf_counter()` seconds. Field names follow docs/metrics.md (`t_sched`,
`t_admitted`, `t_send`, `t_written`, `t_first_byte`, `t_first_token`, `t_first_answer`, chunk times, `t_end`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


class ErrorType(str, Enum):
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    CONNECT = "connect"
    TIMEOUT = "timeout"
    STREAM_ERROR_EVENT = "stream_error_event"
    TRUNCATED = "truncated"
    EMPTY_OUTPUT = "empty_output"
    INVALID_SSE = "invalid_sse"
    CANCELLED = "cancelled"  # stopped by the cell's deadline or watchdog, not by the server


@dataclass
class RequestError:
    type: ErrorType
    message: str  # never empty: a timeout names its limit
    http_status: int | None = None
    body_head: str | None = None  # first 300 bytes of an HTTP error body


@dataclass
class RequestRecord:
    index: int
    prompt_name: str
    warmup: bool = False
    t_sched: float | None = None
    # open loop: when the request got its place under --max-concurrency (t_sched when the cap did
    # not make it wait); None in a closed loop, where t_sched is already when its slot opened
    t_admitted: float | None = None
    t_send: float | None = None
    # the request's last byte handed to the kernel (t_send + the connect, on a fresh connection, +
    # the client's own delay); None when the socket could not take it whole at once
    t_written: float | None = None
    t_first_byte: float | None = None
    t_first_token: float | None = None
    t_first_answer: float | None = None
    t_end: float | None = None
    chunk_times: list[float] = field(default_factory=list)  # arrival of every output-bearing event
    usage_completion_tokens: int | None = None
    usage_prompt_tokens: int | None = None
    finish_reason: str | None = None
    served_model: str | None = None  # the `model` field of the response chunks
    http_status: int | None = None
    done_marker: bool = False  # `data: [DONE]` arrived
    output_text_head: str = ""  # first characters of content/reasoning/tool-call text, for the sidecar
    error: RequestError | None = None
    reused_connection: bool = False  # sent on a kept-alive connection (--keep-alive)
    # Why the request was sent a second time, or None: a reused keep-alive connection the server
    # had closed ended before any response byte, and the request went again on a fresh one
    # (t_send is the second attempt's start).
    retried: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_times)

    @property
    def output_tokens(self) -> int:
        """Server usage when reported, else the count of output-bearing chunks."""
        if self.usage_completion_tokens is not None:
            return self.usage_completion_tokens
        return self.n_chunks

    @property
    def tokens_source(self) -> str:
        return "usage" if self.usage_completion_tokens is not None else "chunks"

    def to_json(self) -> dict:
        data = asdict(self)
        if self.t_admitted is None:  # a closed-loop record: its line is as it always was
            del data["t_admitted"]
        if not self.reused_connection and self.retried is None:  # a request on a connection of its own
            del data["reused_connection"], data["retried"]
        if self.error is not None:
            data["error"]["type"] = self.error.type.value
        data["output_tokens"] = self.output_tokens
        data["tokens_source"] = self.tokens_source
        return data
