"""Weka KV-cache-tester traces (bench.setup.traces.weka) as `--sessions-file` reads them: the
main agent's requests in order with their recorded pauses, subagents counted and left out, every
bad request named; and the sessions made of them (bench.setup.sessions.recorded) with the tiny
model's tokenizer: each turn exactly its recorded input length, and turn k+1 opening with turn k's
blocks exactly where the recording's hash ids say the agent's cache held them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.run.parsing import session_plan
from bench.setup.sessions import recorded
from bench.setup.traces import Synthesiser, TraceError, tokenizer_path
from bench.setup.traces.weka import load_weka


def _request(t: float, n_in: int, n_out: int, ids: list[int], think: float | None = 0.5, kind: str = "s") -> dict:
    """One API call as kv-cache-tester records it (the fields its traces carry)."""
    out = {"t": t, "type": kind, "model": "claude-opus-4-5-20251101", "in": n_in, "out": n_out, "hash_ids": ids,
           "input_types": ["text"], "output_types": ["text"], "stop": "tool_use", "api_time": 1.2}
    if think is not None:
        out["think_time"] = think
    if kind == "s":
        out["ttft"] = 0.4
    return out


def weka_trace(trace_id: str, requests: list[dict], block_size: int = 16, scope: str = "local") -> dict:
    return {"id": trace_id, "models": ["claude-opus-4-5-20251101"], "block_size": block_size,
            "hash_id_scope": scope, "tool_tokens": 0, "system_tokens": 0, "requests": requests,
            "totals": {"requests": len(requests)}}


def agent_session(trace_id: str, turns: int = 4, first: int = 40, growth: int = 24, out: int = 8) -> dict:
    """An agent whose every turn resends the last one's prompt, its answer and a tool result: turn
    k+1's hash ids open with turn k's full blocks, as the recorded cache saw them."""
    requests: list[dict] = []
    n, ids = first, list[int]()
    for k in range(turns):
        full = n // 16
        ids = ids[:full] + [1000 * k + j for j in range(len(ids[:full]), full)]
        requests.append(_request(3.0 * k, n, out, list(ids), think=None if k == 0 else 0.05 * k))
        n += growth
    return weka_trace(trace_id, requests)


def test_a_trace_reads_as_the_main_agents_requests_with_their_pauses(tmp_path):
    sub = {"t": 4.0, "type": "subagent", "agent_id": "agent_001", "subagent_type": "Explore", "status": "completed",
           "duration_ms": 900, "total_tokens": 300, "tool_use_count": 2, "models": ["claude-haiku-4-5-20251001"],
           "requests": [_request(4.1, 50, 5, [7, 8, 9])]}
    doc = weka_trace("trace_0001", [_request(0.0, 40, 8, [1, 2], think=None), _request(3.0, 64, 8, [1, 2, 3, 4]),
                                    sub, _request(6.5, 90, 8, [1, 2, 3, 4, 5], kind="n")])
    (tmp_path / "trace_0001.json").write_text(json.dumps(doc))
    (trace,) = load_weka(tmp_path / "trace_0001.json")
    assert trace.id == "trace_0001" and trace.block_size == 16 and trace.scope == "local"
    assert [(e.offset_s, e.input_tokens, e.output_tokens, e.line) for e in trace.entries] == [
        (0.0, 40, 8, 1), (3.0, 64, 8, 2), (6.5, 90, 8, 4)]
    assert trace.think_s == (None, 0.5, 0.5) and trace.subagents == 1
    (tmp_path / "trace_0002.json").write_text(json.dumps(agent_session("trace_0002")))
    assert [t.id for t in load_weka(tmp_path)] == ["trace_0001", "trace_0002"], "a folder: every trace, by name"


@pytest.mark.parametrize(("request_", "says"), [
    ({"t": 0, "type": "x", "in": 5, "out": 1}, "request 1: type is n, s or subagent, got 'x'"),
    ({"t": 0, "type": "n", "out": 1}, "request 1: missing in"),
    ({"t": 0, "type": "n", "in": 20, "out": 1, "hash_ids": [1, 2, 3]}, "3 hash_ids of 16 tokens each are more"),
    ({"t": 0, "type": "n", "in": 20, "out": 0}, "request 1: out is a whole number of 1 or more"),
    ({"t": -1, "type": "n", "in": 20, "out": 1}, "request 1: t \\(seconds\\) is a number of 0 or more"),
])
def test_a_bad_request_is_named(tmp_path, request_, says):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(weka_trace("bad", [request_])))
    with pytest.raises(TraceError, match=says):
        load_weka(path)


def test_a_file_that_is_not_a_trace_says_so(tmp_path):
    (tmp_path / "late.json").write_text(json.dumps(weka_trace("late", [_request(5.0, 20, 1, []),
                                                                       _request(4.0, 20, 1, [])])))
    with pytest.raises(TraceError, match="request 2: t goes back in time"):
        load_weka(tmp_path / "late.json")
    (tmp_path / "scope.json").write_text(json.dumps(weka_trace("s", [_request(0, 20, 1, [])], scope="team")))
    with pytest.raises(TraceError, match="hash_id_scope is local or global"):
        load_weka(tmp_path / "scope.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="no \\*.json trace file"):
        load_weka(tmp_path / "empty")


def test_the_sessions_options_read_a_weka_file_or_a_conversation_file(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(agent_session("a")))
    plan = session_plan(None, sessions_file=str(tmp_path / "a.json"), session_rate=2.0)
    assert plan is not None and plan.count is None and plan.think_s is None, "a Weka trace's own pauses"
    assert [t.id for t in plan.weka] == ["a"] and plan.rate_per_s == 2.0
    assert plan.file_json() == {"name": "a.json", "format": "weka", "traces": 1, "sha256": [plan.weka[0].sha256],
                                "subagents_not_replayed": 0}
    assert session_plan(None, sessions_file=str(tmp_path / "a.json"), think_time="0").think_s == 0.0
    talks = tmp_path / "talks.json"
    talks.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}]}]))
    plan = session_plan(3, sessions_file=str(talks))
    assert plan is not None and plan.weka == () and plan.think_s == 0.0 and plan.file_json() == {
        "name": "talks.json", "format": "conversations"}
    with pytest.raises(ValueError, match="--sessions-file .*nowhere.json: no such file"):
        session_plan(None, sessions_file=str(tmp_path / "nowhere.json"))
    with pytest.raises(ValueError, match="--session-rate takes sessions per second"):
        session_plan(2, session_rate=0.0)
    with pytest.raises(ValueError, match="give --sessions N or --sessions-file PATH too"):
        session_plan(None, session_rate=1.0)


# ---------------------------------------------------------------- sessions, with the tiny model's tokenizer


@pytest.fixture(scope="module")
def synth() -> Synthesiser:
    return Synthesiser(tokenizer_path("tiny", "tiny"), seed=0)


def _tokens(synth: Synthesiser, text: str) -> list[int]:
    return synth.tokenizer.encode(text, add_special_tokens=False).ids


def test_each_turn_is_its_recorded_length_and_opens_with_the_blocks_it_shares(tmp_path: Path, synth):
    for name in ("a", "b"):
        (tmp_path / f"{name}.json").write_text(json.dumps(agent_session(name, turns=4)))
    traces = load_weka(tmp_path)
    made = recorded(traces, synth)
    assert [c.name for c in made] == ["a", "b"] and all(c.recorded for c in made)
    a, b = made
    assert [len(_tokens(synth, t)) for t in a.turns] == [e.input_tokens for e in traces[0].entries] == [40, 64, 88, 112]
    assert a.turn_max_tokens == (8, 8, 8, 8) and a.think_before_s == (None, 0.05, 0.1, 0.15000000000000002)
    for k in range(3):  # turn k+1 opens with turn k's full blocks, then differs
        now, nxt = _tokens(synth, a.turns[k]), _tokens(synth, a.turns[k + 1])
        full = 16 * (len(now) // 16)
        assert nxt[:full] == now[:full], k
        assert len(now) == full or nxt[full:len(now)] != now[full:], "a partial block is the turn's own"
    # local hash ids: the same ids in two traces are two conversations' own blocks
    assert _tokens(synth, a.turns[0])[:16] != _tokens(synth, b.turns[0])[:16]
    assert [c.name for c in recorded(traces, synth, 5, max_turns=2)] == ["a", "b", "a", "b", "a"]
    assert all(len(c.turns) == 2 for c in recorded(traces, synth, 2, max_turns=2))
