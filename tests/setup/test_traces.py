"""Request traces read from files in mooncake's and BurstGPT's exact formats (tests/data/traces/),
bad files named by their line, and prompts made to a trace's lengths with the built-in tiny
model's own tokenizer: exact token counts, shared prefixes exactly where hash_ids are shared,
the same prompts on every run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.setup.traces import (
    BURSTGPT,
    MOONCAKE,
    Synthesiser,
    TokenizerMissing,
    TraceEntry,
    TraceError,
    check_tokenizer,
    load_trace,
    looks_like_trace,
    tokenizer_path,
    trace_prompts,
)
from bench.setup.traces.parse import BURSTGPT_HEADER, HASH_BLOCK_TOKENS

DATA = PROJECT_ROOT / "tests" / "data" / "traces"
MOONCAKE_FILE, BURSTGPT_FILE = DATA / "mooncake-small.jsonl", DATA / "burstgpt-small.csv"


def test_a_mooncake_file_reads_as_milliseconds_from_its_first_entry():
    trace = load_trace(MOONCAKE_FILE)
    lines = [json.loads(line) for line in MOONCAKE_FILE.read_text().splitlines()]
    assert trace.format == MOONCAKE and trace.name == "mooncake-small.jsonl" and trace.skipped == 0
    assert trace.sha256 == hashlib.sha256(MOONCAKE_FILE.read_bytes()).hexdigest()
    assert [e.offset_s for e in trace.entries] == [(o["timestamp"] - lines[0]["timestamp"]) / 1000 for o in lines]
    assert [(e.input_tokens, e.output_tokens, list(e.hash_ids)) for e in trace.entries] == [
        (o["input_length"], o["output_length"], o.get("hash_ids", [])) for o in lines]
    assert [e.line for e in trace.entries] == list(range(1, len(lines) + 1))


def test_a_burstgpt_file_reads_as_seconds_and_skips_the_failed_rows():
    trace = load_trace(BURSTGPT_FILE)
    assert trace.format == BURSTGPT and trace.skipped == 2, "two rows with 0 response tokens"
    assert [(e.offset_s, e.input_tokens, e.output_tokens, e.line) for e in trace.entries] == [
        (0.0, 472, 18, 2), (0.5, 88, 42, 4), (1.125, 300, 7, 5), (1.125, 19, 120, 6), (3.0, 64, 33, 8)]
    assert all(e.hash_ids == () for e in trace.entries)


def _bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert str(path) in str(caught.value)
    return str(caught.value)


MOONCAKE_LINE = '{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
HEADER = ",".join(BURSTGPT_HEADER) + "\n"


@pytest.mark.parametrize("name, text, says", [
    ("e.jsonl", "", "empty"),
    ("e.jsonl", "\n \n", "empty"),
    ("m.jsonl", MOONCAKE_LINE + '{"timestamp": 5, "input_length": 5}\n', "line 2: missing output_length"),
    ("m.jsonl", MOONCAKE_LINE + '{"timestamp": -1, "input_length": 5, "output_length": 2}\n',
     "line 2: timestamp (milliseconds) is a number of 0 or more, got -1"),
    ("m.jsonl", '{"timestamp": 9, "input_length": 5, "output_length": 2}\n' + MOONCAKE_LINE,
     "line 2: timestamp goes back in time (before line 1's)"),
    ("m.jsonl", MOONCAKE_LINE + '{"timestamp": "soon", "input_length": 5, "output_length": 2}\n',
     "line 2: timestamp (milliseconds) is a number"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5.5, "output_length": 2}\n',
     "line 1: input_length is a whole number"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 0}\n',
     "line 1: output_length is a whole number of 1"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": true}\n', "output_length is a whole number"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": [1, 2]}\n',
     "line 1: 2 hash_ids of 512 tokens each are more blocks than input_length 5 fills"),
    ("m.jsonl", MOONCAKE_LINE + "{not json\n", "line 2: not JSON"),
    ("m.jsonl", MOONCAKE_LINE + "[1, 2]\n", "line 2: a mooncake line is a JSON object"),
    ("b.csv", HEADER, "no request to replay"),
    ("b.csv", HEADER + "1.0,ChatGPT,10,0,10,API log\n", "no request to replay (1 rows with 0 response tokens skipped)"),
    ("b.csv", HEADER + "1.0,ChatGPT,ten,3,13,API log\n", "line 2: Request tokens is a whole number"),
    ("b.csv", HEADER + "2.0,ChatGPT,10,3,13,API log\n1.0,ChatGPT,10,3,13,API log\n", "line 3: Timestamp goes back"),
    ("b.csv", HEADER + "nan,ChatGPT,10,3,13,API log\n", "line 2: Timestamp (seconds) is a number of 0 or more"),
    ("b.csv", HEADER + "1.0,ChatGPT,10,3\n", "line 2: 4 columns, BurstGPT has 6"),
    ("x.csv", "time,in,out\n1,2,3\n", "neither a mooncake JSON object nor BurstGPT's CSV header"),
])
def test_a_bad_trace_is_named_by_its_line(tmp_path, name, text, says):
    assert says in _bad(tmp_path, name, text)


def test_only_a_file_that_parses_as_a_trace_looks_like_one(tmp_path):
    assert looks_like_trace(MOONCAKE_FILE) and looks_like_trace(BURSTGPT_FILE)
    (tmp_path / "test_x.py").write_text("def test_x(): pass\n")
    (tmp_path / "notes.jsonl").write_text('{"a": 1}\n')
    assert not looks_like_trace(tmp_path / "test_x.py") and not looks_like_trace(tmp_path / "notes.jsonl")
    assert not looks_like_trace(tmp_path / "missing.jsonl")


# ---------------------------------------------------------------- prompts, with the tiny model's tokenizer


@pytest.fixture(scope="module")
def synth() -> Synthesiser:
    return Synthesiser(tokenizer_path("tiny", "tiny"), seed=0)


def test_every_prompt_is_exactly_its_entrys_input_length_and_asks_for_its_output(synth):
    trace = load_trace(MOONCAKE_FILE)
    made = trace_prompts(trace, synth)
    assert len(made) == len(trace.entries)
    for prompt, entry in zip(made, trace.entries, strict=True):
        (message,) = prompt.messages
        assert message["role"] == "user" and synth.count(message["content"]) == entry.input_tokens
        assert prompt.max_tokens == entry.output_tokens and prompt.meta["trace_line"] == entry.line
    odd = [TraceEntry(0.0, n, 1) for n in (1, 2, 3, 511, 512, 513, 4000)]
    assert [synth.count(synth.text(e, i)) for i, e in enumerate(odd)] == [1, 2, 3, 511, 512, 513, 4000]


def _shared_words(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split(" "), b.split(" "), strict=False):
        if x != y:
            break
        n += 1
    return n


def test_requests_sharing_leading_hash_ids_share_exactly_that_prefix(synth):
    e = {name: TraceEntry(0.0, n, 1, ids) for name, n, ids in (
        ("a", 700, (1, 2)), ("b", 1100, (1, 2, 3)), ("c", 600, (1, 9)), ("d", 700, ()), ("e", 700, (1, 2)))}
    text = {name: synth.text(entry, i) for i, (name, entry) in enumerate(e.items())}
    assert text["a"] == text["e"], "the same blocks and length: the same text"
    assert _shared_words(text["a"], text["b"]) == 700, "a's second block is b's, cut to a's length"
    assert _shared_words(text["a"], text["c"]) < HASH_BLOCK_TOKENS + 3, "only block 1 is shared"
    assert _shared_words(text["a"], text["c"]) >= HASH_BLOCK_TOKENS
    assert _shared_words(text["a"], text["d"]) < 3, "no hash ids: a text of its own"
    # each word is one token, so a shared word prefix is a shared token prefix
    ids = {name: synth.tokenizer.encode(t, add_special_tokens=False).ids for name, t in text.items()}
    assert ids["a"][:700] == ids["b"][:700] and ids["a"][:512] == ids["c"][:512]


def test_the_same_trace_and_seed_give_the_same_prompts(synth):
    trace = load_trace(MOONCAKE_FILE)
    assert trace_prompts(trace, synth) == trace_prompts(trace, Synthesiser(tokenizer_path("tiny", "tiny"), seed=0))
    other = trace_prompts(trace, Synthesiser(tokenizer_path("tiny", "tiny"), seed=1))
    assert other != trace_prompts(trace, synth)


def test_a_profile_without_a_tokenizer_says_so():
    check_tokenizer("tiny", "tiny")
    with pytest.raises(TokenizerMissing, match="profile 'qwen3-0.6b' has none cellbench can load"):
        check_tokenizer(None, "qwen3-0.6b")
