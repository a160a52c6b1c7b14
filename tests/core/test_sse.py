"""SSE framing and chunk interpretation, one test per quirk seen from real servers.

Streams are scripted byte strings fed with scripted arrival times, so every stamp is exact.
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from bench.core.records import ErrorType, RequestRecord
from bench.core.sse import MAX_EVENT_BYTES, ChatStream, SSEDecoder, SSEEvent, SSEFormatError, SSEOverflow, parse_chunk


def event(obj: dict | str, *, eol: str = "\n", space: bool = True) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj)
    return f"data:{' ' if space else ''}{data}{eol}{eol}".encode()


def chunk(delta: dict | None = None, *, finish: str | None = None, usage: dict | None = None, model: str = "m") -> dict:
    obj: dict = {"id": "c1", "object": "chat.completion.chunk", "model": model}
    obj["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        obj["usage"] = usage
    return obj


ROLE = chunk({"role": "assistant", "content": ""})
DONE = event("[DONE]")


def content(text: str, **kw) -> dict:
    return chunk({"content": text}, **kw)


def drive(reads: list[tuple[float, bytes]], eof_at: float | None = None) -> RequestRecord:
    """Feed (arrival time, bytes) reads into a fresh record sent at t=0; EOF at `eof_at`."""
    rec = RequestRecord(index=0, prompt_name="p", t_sched=0.0, t_send=0.0)
    stream = ChatStream(rec)
    for t, data in reads:
        stream.feed(data, t)
    stream.close(eof_at if eof_at is not None else reads[-1][0])
    return rec


# ------------------------------------------------------------------ framing


def test_data_with_and_without_space_and_multiline_data():
    dec = SSEDecoder()
    events = dec.feed(b'data: {"a":1}\n\ndata:{"b":2}\n\ndata: line1\ndata: line2\n\n')
    assert events == [SSEEvent(b'{"a":1}'), SSEEvent(b'{"b":2}'), SSEEvent(b"line1\nline2")]


def test_comment_lines_are_counted_not_dispatched():
    dec = SSEDecoder()
    assert dec.feed(b": keepalive 10/11\n\n: keepalive 11/11\n\n") == []
    assert dec.comments == 2


def test_event_names_and_ignored_fields():
    dec = SSEDecoder()
    events = dec.feed(b'id: 7\nretry: 100\nevent: error\ndata: {"x":1}\n\ndata: {"y":2}\n\n')
    assert events == [SSEEvent(b'{"x":1}', "error"), SSEEvent(b'{"y":2}', None)]


def test_flush_keeps_a_complete_event_without_final_blank_line_but_not_a_cut_line():
    dec = SSEDecoder()
    assert dec.feed(b'data: {"a":1}\n') == []
    assert dec.flush() == [SSEEvent(b'{"a":1}')]
    dec = SSEDecoder()
    assert dec.feed(b'data: {"a":') == []
    assert dec.flush() == [] and dec.pending == len(b'data: {"a":')


REALISTIC = b"".join(
    [
        b": keepalive 1/2\r\n\r\n",
        event(ROLE, eol="\r\n"),
        event(content("h\u00e9llo \u4e16\u754c"), space=False),
        b'event: message\rdata: {"choices":[]}\r\r',
        event(content("x", finish="stop", usage={"completion_tokens": 2, "prompt_tokens": 3})),
        b"data: multi\ndata: line\n\n",
        DONE,
    ]
)


def test_split_at_every_byte_boundary_gives_identical_events():
    """Property: any split of the stream (1-byte pieces, or two pieces at every offset)
    yields exactly the events of the whole stream fed at once."""
    whole = SSEDecoder()
    expected = whole.feed(REALISTIC) + whole.flush()
    assert len(expected) == 6
    byte_wise = SSEDecoder()
    got = [e for i in range(len(REALISTIC)) for e in byte_wise.feed(REALISTIC[i : i + 1])] + byte_wise.flush()
    assert got == expected
    assert byte_wise.comments == whole.comments == 1
    for cut in range(1, len(REALISTIC)):
        dec = SSEDecoder()
        assert dec.feed(REALISTIC[:cut]) + dec.feed(REALISTIC[cut:]) + dec.flush() == expected, cut


def test_crlf_line_ends_split_between_cr_and_lf():
    dec = SSEDecoder()
    assert dec.feed(b'data: {"a":1}\r') == []
    assert dec.feed(b"\n\r") == []  # the \r\n ends the line; the lone \r waits for its \n
    assert dec.feed(b"\n") == [SSEEvent(b'{"a":1}')]


def test_a_long_line_in_many_pieces_is_one_event():
    line = b"data: " + b"x" * 300_000 + b"\r\n\r\n"
    dec = SSEDecoder()
    pieces = [line[i : i + 4096] for i in range(0, len(line) - 3, 4096)] + [line[-3:-1], line[-1:]]
    got = [e for piece in pieces for e in dec.feed(piece)]
    assert got == [SSEEvent(b"x" * 300_000)] and dec.pending == 0


def test_a_line_over_the_cap_raises_and_drops_what_it_held():
    dec = SSEDecoder(max_event_bytes=1000)
    assert dec.feed(b"data: " + b"x" * 600) == []
    with pytest.raises(SSEOverflow, match=r"SSE event over .* MiB: 1206 bytes read without the event ending"):
        dec.feed(b"x" * 600)
    assert dec.pending == 0
    assert dec.feed(b'data: {"a":1}\n\n') == [SSEEvent(b'{"a":1}')]  # the decoder still works


def test_an_event_of_many_lines_over_the_cap_raises():
    dec = SSEDecoder(max_event_bytes=1000)
    with pytest.raises(SSEOverflow):
        for _ in range(100):
            dec.feed(b"data: 0123456789\n")  # whole lines, but the event never ends


def test_many_small_events_in_misaligned_reads_never_reach_the_cap():
    stream = b"".join(event(content(f"t{i}")) for i in range(200))
    dec = SSEDecoder(max_event_bytes=len(event(content("t0"))) * 2)
    got = [e for i in range(0, len(stream), 37) for e in dec.feed(stream[i : i + 37])]
    assert len(got) == 200


def test_a_50_mb_event_fails_the_request_without_holding_it():
    """A server that sends one huge event: the request fails as invalid_sse once the decoder's cap
    is passed, and the stream holds no more than the cap, whatever the body's size."""
    big = event(content("x" * (50 * 2**20)))
    rec = RequestRecord(index=0, prompt_name="p", t_send=0.0)
    stream = ChatStream(rec)
    stream.feed(event(ROLE), 0.1)
    tracemalloc.start()
    try:
        for i in range(0, len(big), 2**16):
            stream.feed(big[i : i + 2**16], 0.2)
        stream.feed(DONE, 0.3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    stream.close(0.4)
    assert rec.error.type is ErrorType.INVALID_SSE
    assert rec.error.message.startswith(f"SSE event over {MAX_EVENT_BYTES // 2**20} MiB")
    assert rec.t_end == 0.2 and not rec.done_marker
    assert peak < MAX_EVENT_BYTES + 2**20


# ------------------------------------------------------------------ one chunk


def test_role_only_and_empty_deltas_are_not_output():
    for payload in (ROLE, chunk({"role": "assistant"}), chunk({}), chunk({"content": None}), chunk(None)):
        c = parse_chunk(json.dumps(payload).encode())
        assert not c.output and not c.answer


def test_reasoning_is_output_but_not_answer():
    for key in ("reasoning_content", "reasoning"):
        c = parse_chunk(json.dumps(chunk({key: "think"})).encode())
        assert c.output and not c.answer and c.text == "think"


def test_tool_call_deltas_are_output_and_answer():
    name = chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "t", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
            ]
        }
    )
    args = chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]})
    for payload, text in ((name, "get_weather"), (args, '{"city":')):
        c = parse_chunk(json.dumps(payload).encode())
        assert c.output and c.answer and c.text == text


def test_whitespace_around_the_json_is_allowed():
    c = parse_chunk(b'  {"choices": [{"delta": {"content": "x"}}]} \t')
    assert c.output and c.text == "x"


def test_usage_model_and_finish_reason():
    c = parse_chunk(json.dumps(content("a", finish="length", usage={"completion_tokens": 9}, model="tiny")).encode())
    assert (c.output, c.finish_reason, c.usage, c.model) == (True, "length", {"completion_tokens": 9}, "tiny")


@pytest.mark.parametrize(
    "payload, name, expected",
    [
        ({"error": {"message": "out of memory", "code": 500}}, None, "out of memory (code 500)"),
        ({"error": "boom"}, None, "boom"),
        ({"message": "overloaded"}, "error", "overloaded"),
    ],
)
def test_error_events(payload, name, expected):
    assert expected in parse_chunk(json.dumps(payload).encode(), name).error


@pytest.mark.parametrize(
    "data", [b"{not json", b"[1, 2]", b'"text"', b'{"choices": ["x"]}', b"\xff\xfe", b'{"a": 1} {"b": 2}', b""]
)
def test_invalid_payloads_raise(data):
    with pytest.raises(SSEFormatError):
        parse_chunk(data)


# ------------------------------------------------------------------ streams on a record


def test_vllm_style_stream_with_separate_usage_chunk():
    rec = drive(
        [
            (0.010, event(ROLE)),
            (0.050, event(content("a"))),
            (0.060, event(content("b"))),
            (0.070, event(content("c", finish="stop"))),
            (0.071, event(chunk(None, usage={"prompt_tokens": 11, "completion_tokens": 3}))),
            (0.072, DONE),
        ],
        eof_at=0.080,
    )
    assert rec.ok and rec.done_marker
    assert rec.t_first_byte == 0.010  # the role chunk is a byte, not a token
    assert rec.t_first_token == rec.t_first_answer == 0.050
    assert rec.chunk_times == [0.050, 0.060, 0.070]
    assert rec.t_end == 0.072  # [DONE], not EOF
    assert (rec.usage_completion_tokens, rec.usage_prompt_tokens, rec.finish_reason) == (3, 11, "stop")
    assert rec.served_model == "m" and rec.output_text_head == "abc"


def test_transformers_serve_no_done_usage_on_finish_chunk():
    rec = drive(
        [
            (0.01, event(ROLE)),
            (0.02, event(content("a"))),
            (0.03, event(chunk({}, finish="stop", usage={"prompt_tokens": 4, "completion_tokens": 2}))),
        ],
        eof_at=0.04,
    )
    assert rec.ok and not rec.done_marker
    assert rec.t_end == 0.04  # EOF after a finish_reason
    assert rec.usage_completion_tokens == 2


def test_mlx_keepalive_comments_and_role_in_every_delta():
    rec = drive(
        [
            (0.01, b": keepalive 10/11\n\n"),
            (0.02, b": keepalive 11/11\n\n"),
            (0.03, event(chunk({"role": "assistant", "content": "x"}))),
            (0.04, event(chunk({"role": "assistant", "content": "y"}, finish="stop"))),
            (0.05, event({"object": "chat.completion", "choices": [], "usage": {"completion_tokens": 2}}) + DONE),
        ]
    )
    assert rec.ok
    assert rec.t_first_byte == 0.01 and rec.t_first_token == 0.03  # comments are not tokens
    assert rec.chunk_times == [0.03, 0.04]


def test_reasoning_then_content_stamps_first_answer_later():
    rec = drive(
        [
            (0.1, event(chunk({"reasoning_content": "hmm"}))),
            (0.2, event(chunk({"reasoning_content": "..."}))),
            (0.3, event(content("answer", finish="stop"))),
            (0.4, DONE),
        ]
    )
    assert rec.ok
    assert rec.t_first_token == 0.1 and rec.t_first_answer == 0.3
    assert rec.n_chunks == 3


def test_tool_call_only_stream_succeeds():
    """mlx-lm parses <tool_call> into structured deltas: zero content chunks, still output."""
    name = chunk(
        {"tool_calls": [{"index": 0, "id": "t", "type": "function", "function": {"name": "f", "arguments": ""}}]}
    )
    frag = [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in ('{"x"', ": 1}")]
    rec = drive(
        [
            (0.1, event(name)),
            (0.2, event(frag[0])),
            (0.3, event(frag[1])),
            (0.4, event(chunk({}, finish="tool_calls"))),
            (0.5, DONE),
        ]
    )
    assert rec.ok and rec.finish_reason == "tool_calls"
    assert rec.chunk_times == [0.1, 0.2, 0.3] and rec.t_first_answer == 0.1
    assert rec.output_text_head == 'f{"x": 1}'


def test_several_events_in_one_read_share_its_arrival_time():
    rec = drive([(0.5, event(ROLE) + event(content("a")) + event(content("b", finish="stop")) + DONE)])
    assert rec.ok and rec.chunk_times == [0.5, 0.5] and rec.t_end == 0.5


def test_sse_error_event_fails_the_request():
    rec = drive(
        [
            (0.1, event(content("a"))),
            (0.2, event({"error": {"message": "engine died", "type": "internal"}})),
            (0.3, DONE),
        ]
    )
    assert rec.error.type is ErrorType.STREAM_ERROR_EVENT
    assert "engine died" in rec.error.message and rec.t_end == 0.2


# llama-server's error object (b11434's over-context answer; its older builds wrote errors met
# after a stream began as an `error:` line, not `data:`)
LLAMA_ERROR = (b'{"code":400,"message":"request (263 tokens) exceeds the available context size (256 tokens), '
               b'try increasing it","type":"exceed_context_size_error","n_prompt_tokens":263,"n_ctx":256}')
LLAMA_WORDS = ("request (263 tokens) exceeds the available context size (256 tokens), try increasing it "
               "(type exceed_context_size_error, code 400)")


@pytest.mark.parametrize("wire", [
    b"error: " + LLAMA_ERROR + b"\n\n",  # llama-server's own field line
    b'data: {"error": ' + LLAMA_ERROR + b"}\n\n",  # an error object on a data line
    b"event: error\ndata: " + LLAMA_ERROR + b"\n\n",  # a named error event
    b"error: " + LLAMA_ERROR + b"\n",  # the line, and the stream ends without its blank line
])
def test_an_error_inside_the_stream_keeps_the_servers_words(wire):
    rec = drive([(0.1, event(ROLE)), (0.2, wire)], eof_at=0.3)
    assert rec.error.type is ErrorType.STREAM_ERROR_EVENT
    assert rec.error.message == f"HTTP 200, then an error in the stream: {LLAMA_WORDS}"


def test_an_error_line_in_plain_words_and_with_control_characters_is_quoted_escaped():
    rec = drive([(0.1, b"error: the \x1b[1mengine\x1b[0m died\n\n")], eof_at=0.2)
    assert rec.error.type is ErrorType.STREAM_ERROR_EVENT
    assert rec.error.message == "HTTP 200, then an error in the stream: the \\x1b[1mengine\\x1b[0m died"


def test_a_long_error_message_is_bounded():
    rec = drive([(0.1, event({"error": {"message": "x" * 5000}}))])
    words = rec.error.message.removeprefix("HTTP 200, then an error in the stream: ")
    assert len(words) == 300 and words.endswith("x\u2026")


def test_invalid_json_is_invalid_sse():
    rec = drive([(0.1, event(content("a"))), (0.2, b"data: {oops\n\n"), (0.3, DONE)])
    assert rec.error.type is ErrorType.INVALID_SSE and "oops" in rec.error.message


def test_non_sse_body_is_invalid_sse():
    rec = drive([(0.1, b'{"object": "chat.completion", "choices": []}')])
    assert rec.error.type is ErrorType.INVALID_SSE and "not an SSE stream" in rec.error.message


def test_eof_without_done_or_finish_is_truncated():
    rec = drive([(0.1, event(ROLE)), (0.2, event(content("a"))), (0.3, b'data: {"choi')], eof_at=0.4)
    assert rec.error.type is ErrorType.TRUNCATED
    assert "1 output chunks" in rec.error.message and "unterminated" in rec.error.message
    assert rec.t_end == 0.4


def test_done_without_output_is_empty_output_naming_finish_reason():
    rec = drive([(0.1, event(ROLE)), (0.2, event(chunk({}, finish="length"))), (0.3, DONE)])
    assert rec.error.type is ErrorType.EMPTY_OUTPUT and "finish_reason=length" in rec.error.message


def test_finish_then_eof_without_output_is_empty_output():
    rec = drive([(0.1, event(chunk({"content": ""}, finish="stop")))], eof_at=0.2)
    assert rec.error.type is ErrorType.EMPTY_OUTPUT and "finish_reason=stop" in rec.error.message


def test_bytes_after_done_are_ignored_and_later_failures_do_not_undo_success():
    rec = RequestRecord(index=0, prompt_name="p", t_send=0.0)
    stream = ChatStream(rec)
    stream.feed(event(content("a", finish="stop")) + DONE, 0.1)
    stream.feed(b"data: {garbage\n\n", 0.2)
    stream.fail(ErrorType.TIMEOUT, "late timeout", 0.3)
    stream.close(0.4)
    assert rec.ok and rec.t_end == 0.1 and rec.n_chunks == 1


def test_last_usage_wins_continuous_usage_stats():
    rec = drive(
        [
            (0.1, event(content("a", usage={"completion_tokens": 1, "prompt_tokens": 5}))),
            (0.2, event(content("b", finish="stop", usage={"completion_tokens": 2, "prompt_tokens": 5}))),
            (0.3, DONE),
        ]
    )
    assert rec.usage_completion_tokens == 2


def test_byte_wise_stream_gives_the_same_record_as_whole_reads():
    body = (
        event(ROLE)
        + b": ping\r\n\r\n"
        + event(content("a"))
        + event(content("b", finish="stop", usage={"completion_tokens": 2}))
        + DONE
    )
    whole = drive([(1.0, body)])
    bytewise = drive([(1.0, body[i : i + 1]) for i in range(len(body))])
    assert whole == bytewise and whole.ok


def test_one_event_per_read_gives_the_same_record_as_the_decoder():
    """Reads that are exactly one `data: ` event skip the line splitting; the record is the same as
    when the decoder frames them (all in one read, or one byte at a time)."""
    events = [event(ROLE), event(content("a")), event(content("b")), event(chunk({}, finish="stop")),
              event(chunk(None, usage={"completion_tokens": 2, "prompt_tokens": 3})), DONE]
    one_per_read = drive([(1.0, e) for e in events])
    assert one_per_read == drive([(1.0, b"".join(events))]) and one_per_read.ok and one_per_read.n_chunks == 2
    # a read that only names the event: the next read's `data:` belongs to it, whichever path reads it
    named = drive([(0.1, event(content("a"))), (0.2, b"event: error\n"),
                   (0.3, event({"message": "gone"})), (0.4, DONE)])
    assert named.error.type is ErrorType.STREAM_ERROR_EVENT and named.t_end == 0.3 and "gone" in named.error.message
    # an event whose line ended in the last read is not taken whole from the next one
    held = drive([(0.1, event(content("a"))[:-1]), (0.2, b"\n"), (0.3, event(content("b"))), (0.4, DONE)])
    assert held.ok and held.chunk_times == [0.2, 0.3]
