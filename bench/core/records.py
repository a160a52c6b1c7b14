"""What one request leaves behind: its timestamps, token counts and, if it failed, a typed error.

Times are `time.perf_counter()` seconds. Field names follow docs/metrics.md (`t_sched`,
`t_admitted`, `t_send`, `t_written`, `t_first_byte`, `t_first_token`, `t_first_answer`, chunk times, `t_end`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Annotated, Any, TypedDict

from bench.base.doc import Doc

SERVER_WORDS_CHARS = 300  # a server's error message is quoted up to this many characters


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


class _ErrorSampleRequired(TypedDict):
    message: Annotated[str, Doc("The error, one line.", minLength=1)]


class ErrorSample(_ErrorSampleRequired, total=False):
    """One failed request, as evidence: its error message and what the server answered."""

    http_status: Annotated[int | None, Doc("The HTTP status, when the server answered one.")]
    body_head: Annotated[str | None, Doc("The first bytes of the response body, when there was one.")]
    prompt_name: Annotated[str | None, Doc("The prompt the request sent.")]
    retry_after: Annotated[str, Doc("The response's Retry-After header as the server wrote it (a 429's, a 503's), when"
                                    " it sent one.")]


class ContentEncodings(TypedDict, total=False):
    content_encodings: Annotated[dict[str, Annotated[int, Doc(minimum=1)]], Doc(
        "Requests per Content-Encoding, present only when the server compressed streams though asked for identity: "
        "they were decoded, each piece timed at the arrival of its compressed bytes (docs/metrics.md); the cell is "
        "annotated compressed.")]


@dataclass
class RequestError:
    type: ErrorType
    message: str  # never empty: a timeout names its limit
    http_status: int | None = None
    body_head: str | None = None  # first 300 bytes of an HTTP error body
    retry_after: str | None = None  # a 429's (or 503's) Retry-After header, as the server wrote it

    def sample(self, prompt_name: str) -> ErrorSample:
        """The error as a level's error sample (`retry_after` only when the server sent one)."""
        out: ErrorSample = {"message": self.message, "http_status": self.http_status, "body_head": self.body_head,
                               "prompt_name": prompt_name}
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        return out


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
    # usage.prompt_tokens_details.cached_tokens: prompt tokens its server took from its prefix cache;
    # None when the server did not say
    usage_cached_tokens: int | None = None
    # usage.completion_tokens_details.reasoning_tokens (vLLM, SGLang, OpenAI); None when not reported
    usage_reasoning_tokens: int | None = None
    finish_reason: str | None = None
    max_tokens: int | None = None  # the max_tokens its body asked for; None where not recorded
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
    # The response's Content-Encoding when the server compressed the stream though asked not to
    # (gzip, deflate: decoded, each piece stamped when its compressed bytes arrived); None: identity
    content_encoding: str | None = None
    # A session level's turn (bench.load.sessions): its session, its turn (0-based), the answer's whole
    # text (the next turn's history holds it), and the SHA-256 of the messages it sent
    session: int | None = None
    turn: int | None = None
    answer_text: str | None = None
    history_sha256: str | None = None

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
        if self.usage_reasoning_tokens is None:  # no reasoning count in the usage: its line is as it always was
            del data["usage_reasoning_tokens"]
        if self.usage_cached_tokens is None:  # no cached count in the usage: likewise
            del data["usage_cached_tokens"]
        if self.t_admitted is None:  # a closed-loop record: its line is as it always was
            del data["t_admitted"]
        if not self.reused_connection and self.retried is None:  # a request on a connection of its own
            del data["reused_connection"], data["retried"]
        if self.max_tokens is None:  # a record that never knew its max_tokens: its line is as it always was
            del data["max_tokens"]
        if self.content_encoding is None:  # an uncompressed stream: its line is as it always was
            del data["content_encoding"]
        if self.session is None:  # not a session's turn: likewise
            del data["session"], data["turn"], data["answer_text"], data["history_sha256"]
        if self.error is not None:
            data["error"]["type"] = self.error.type.value
            if self.error.retry_after is None:
                del data["error"]["retry_after"]
        data["output_tokens"] = self.output_tokens
        data["tokens_source"] = self.tokens_source
        return data


def content_encodings(records: Iterable[RequestRecord]) -> ContentEncodings:
    """`{"content_encodings": {encoding: requests}}` when a server compressed a stream though asked
    not to (a level's summary carries it only then; the cell is annotated `compressed`), else {}."""
    counts = Counter(r.content_encoding for r in records if r.content_encoding is not None)
    return {"content_encodings": dict(counts)} if counts else {}


# ---------------------------------------------------------------- a server's own words for an error

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def quote_server(text: str, limit: int = SERVER_WORDS_CHARS) -> str:
    """`text` as one printable line of at most `limit` characters: control characters escaped
    (`\\n`, `\\x1b`), and an ellipsis where it was cut."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def error_object_text(err: Any, *, http_status: int | None = None) -> str:
    """An error object's own words: its `message` (or `msg`, `detail`), then its `type` and `code`
    (the code left out when it repeats the HTTP status), e.g. "the request exceeds the available
    context size (type exceed_context_size_error)". A string is its own message; a list (FastAPI's
    validation `detail`) is its items' words joined by "; "."""
    if isinstance(err, list):
        return quote_server("; ".join(error_object_text(item) for item in err[:5]))
    if not isinstance(err, dict):
        return quote_server(str(err) if err is not None else "")
    words = next((err[key] for key in ("message", "msg", "detail") if err.get(key)), None)
    text = error_object_text(words) if words is not None else json.dumps(err)[:SERVER_WORDS_CHARS]
    tags = [f"type {err['type']}"] if isinstance(err.get("type"), str) and err["type"] else []
    code = err.get("code")
    if code not in (None, "", http_status) and str(code) != str(http_status):
        tags.append(f"code {code}")
    return quote_server(f"{text} ({', '.join(tags)})" if tags else text)


def error_body_text(body: bytes, *, http_status: int | None = None) -> str | None:
    """The words of an error body: OpenAI's `{"error": {"message", "type", "code"}}` (or a bare
    `{"error": "..."}`), FastAPI's `{"detail": ...}`, a plain `{"message": ...}`; None when the
    body is not JSON or says none of these."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in ("error", "detail"):
        if obj.get(key):
            return error_object_text(obj[key], http_status=http_status)
    if obj.get("message"):
        return error_object_text(obj, http_status=http_status)
    return None
