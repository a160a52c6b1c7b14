"""The repeated-chunk shortcut (bench.core.sse.repeat): a read that is the stream's last content
chunk with another text is read without a JSON parse, and gives exactly the record the full parse
gives. Every case compares one event per read (the shortcut's path) with the same bytes fed one
byte at a time (the decoder's path, which never takes it), and checks which path was taken, so a
shortcut that silently stopped applying fails too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.core.records import ErrorType, RequestRecord
from bench.core.sse import ChatStream
from bench.core.sse import stream as stream_module

DATA = Path(__file__).resolve().parents[1] / "data" / "sse"
# Bodies captured from real servers on the built-in tiny model (tests/data/sse/README.md says how).
CAPTURED = sorted(DATA.glob("*.sse"))


def events_of(body: bytes) -> list[bytes]:
    """A body's events, each with its blank line: what a server flushing every token sends per read."""
    return [part + b"\n\n" for part in body.split(b"\n\n") if part]


def drive(reads: list[bytes]) -> tuple[RequestRecord, int]:
    """The record of `reads` (read k arriving at time k+1) and how many payloads were parsed in full."""
    parsed = 0
    real = stream_module.read_payload

    def counting(data: bytes, event: str | None) -> tuple[bool, bool, str, Any, Any, Any, str | None]:
        nonlocal parsed
        parsed += 1
        return real(data, event)

    rec = RequestRecord(index=0, prompt_name="p", t_send=0.0)
    stream = ChatStream(rec)
    stream_module.read_payload = counting
    try:
        for k, data in enumerate(reads):
            stream.feed(data, float(k + 1))
        stream.close(float(len(reads) + 1))
    finally:
        stream_module.read_payload = real
    return rec, parsed


def bytewise(events: list[bytes]) -> RequestRecord:
    """The same stream through the decoder alone: one byte a read, each event's bytes at its own time."""
    rec = RequestRecord(index=0, prompt_name="p", t_send=0.0)
    stream = ChatStream(rec)
    for k, data in enumerate(events):
        for i in range(len(data)):
            stream.feed(data[i:i + 1], float(k + 1))
    stream.close(float(len(events) + 1))
    return rec


@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_a_real_servers_stream_gives_the_same_record_with_most_chunks_unparsed(path):
    events = events_of(path.read_bytes())
    rec, parsed = drive(events)
    assert rec == bytewise(events) and rec.ok
    assert rec.n_chunks >= 10
    # the role chunk, the first content chunk (learned), the finish and usage chunks: parsed; the rest repeat
    assert parsed <= 5, f"{parsed} of {len(events)} events parsed in full"


def base(text: str, **extra: object) -> dict:
    """llama-server b11434's chunk shape (tests/data/sse), the content's text and fields changed."""
    delta = {"content": text, **extra}
    return {"choices": [{"finish_reason": None, "index": 0, "delta": delta}], "created": 1796235151,
            "id": "chatcmpl-x", "model": "tiny", "object": "chat.completion.chunk"}


def wire(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


ROLE = wire({**base(""), "choices": [{"finish_reason": None, "index": 0, "delta": {"role": "assistant"}}]})
PLAIN = wire(base("a"))
PREFIX = PLAIN[:PLAIN.index(b'"a"') + 1]  # up to and including the content's opening quote
SUFFIX = PLAIN[PLAIN.index(b'"a"') + 2:]  # from its closing quote on
FINISH = wire({**base(""), "choices": [{"finish_reason": "stop", "index": 0, "delta": {}}]})
DONE = b"data: [DONE]\n\n"

# The read in the middle of the stream: the learned chunk's bytes around a text that the shortcut
# must not read as plain text (each then takes the full parse), or may.
VARIANTS = {
    "escaped quote": PREFIX + b'say \\"hi\\"' + SUFFIX,
    "escaped newline": PREFIX + b"line\\nnext" + SUFFIX,
    "unicode escape": PREFIX + b"caf\\u00e9" + SUFFIX,
    "raw UTF-8": PREFIX + "café 海".encode() + SUFFIX,
    "invalid UTF-8": PREFIX + b"caf\xe9" + SUFFIX,
    "raw control character": PREFIX + b"tab\there" + SUFFIX,
    "empty text": PREFIX + SUFFIX,
    "a second content key wins": PREFIX + b'x","content":"y' + SUFFIX,
    "text that closes the string": PREFIX + b'x"},"finish_reason":"stop' + SUFFIX,
    "reasoning beside the content": wire(base("a", reasoning_content="think")),
    "another model": wire({**base("a"), "model": "other"}),
    "finish reason": wire({**base("a"), "choices": [{"finish_reason": "length", "index": 0,
                                                      "delta": {"content": "a"}}]}),
    "usage on the chunk": wire({**base("a"), "usage": {"completion_tokens": 3, "prompt_tokens": 2}}),
    "\\r line end": PLAIN[:-2] + b"\r\n\r\n",
    "not JSON after the prefix": PREFIX + b"a" + SUFFIX[:-4] + b"\n\n",
}


@pytest.mark.parametrize("middle", list(VARIANTS.values()), ids=list(VARIANTS))
def test_a_read_that_only_looks_repeated_gives_what_the_full_parse_gives(middle):
    events = [ROLE, PLAIN, wire(base("b")), middle, wire(base("c")), FINISH, DONE]
    rec, _ = drive(events)
    assert rec == bytewise(events)


def test_the_shortcut_reads_the_text_and_stamps_each_chunk_when_it_arrived():
    events = [ROLE, PLAIN, *(wire(base(t)) for t in ("b", "c", "d é")), FINISH, DONE]
    rec, parsed = drive(events)
    assert rec.ok and rec.output_text_head == "abcd é"
    assert rec.chunk_times == [2.0, 3.0, 4.0, 5.0] and rec.t_first_token == 2.0 and rec.finish_reason == "stop"
    assert parsed == 3  # role, the first content chunk and finish are parsed ([DONE] is no JSON); b, c, "d é" not


def test_json_written_with_blanks_after_its_colons_is_read_the_same_way():
    """Python's json.dumps writes `"content": " tok"` (transformers serve, mlx-lm's server)."""
    spaced = [b"data: " + json.dumps(json.loads(e[6:])).encode() + b"\n\n" for e in (ROLE, PLAIN, wire(base("b")),
                                                                                   wire(base("c")), FINISH)]
    rec, parsed = drive([*spaced, DONE])
    assert rec == bytewise([*spaced, DONE]) and rec.output_text_head == "abc"
    assert parsed == 3


def test_a_server_whose_chunks_never_repeat_stops_being_learned_from():
    events = [ROLE, *(wire({**base(str(k)), "created": k}) for k in range(8)), FINISH, DONE]
    rec, parsed = drive(events)
    assert rec == bytewise(events) and rec.n_chunks == 8
    assert parsed == len(events) - 1  # every chunk differs outside its text: each parsed in full ([DONE] is no JSON)


def test_an_error_event_after_repeated_chunks_is_still_the_streams_error():
    error = b'data: {"error":{"message":"engine died","type":"server_error"}}\n\n'
    events = [ROLE, PLAIN, wire(base("b")), error]
    rec, _ = drive(events)
    assert rec == bytewise(events) and rec.error is not None and rec.error.type is ErrorType.STREAM_ERROR_EVENT
