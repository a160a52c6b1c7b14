"""Session levels (bench.load.sessions) against the scripted SSE server: the turns of a
conversation go in order, each with the history so far and the server's own answers; a failed
turn ends its session; the session header names the session on every turn. The session options'
checks. The real llama-server run is tests/cells/test_sessions_cells.py."""

from __future__ import annotations

import pytest
from aiohttp import web

from bench.core.level_run import LevelConfig
from bench.core.sessions import Conversation, Sessions
from bench.load import run_level
from bench.run.parsing import session_plan
from tests.load.test_loadgen import ScriptServer, prompts

pytestmark = pytest.mark.timeout(120)


class HeaderServer(ScriptServer):
    def __init__(self) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        return await super()._handle(request)


def _talk(name: str, *turns: str) -> Conversation:
    return Conversation(name, ({"role": "system", "content": "be brief"},), turns, 16)


def test_each_turn_carries_the_history_with_the_servers_answers_and_names_its_session():
    talks = (_talk("a", "stream 2 0.01", "stream 3 0.01", "stream 1 0.01"),
             _talk("b", "stream 1 0.01", "status 500", "stream 1 0.01"))
    sessions = Sessions(talks, think_s=0.01, header="X-Session-Id")
    with HeaderServer() as srv:
        cfg = LevelConfig(srv.base_url, "m", concurrency=2, requests=sessions.turns, warmup=0, sessions=sessions)
        run = run_level(cfg, prompts("stream 1 0.01"), [])
    by = {(r.session, r.turn): r for r in run.records}
    assert sorted(by) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)], "b's failed turn 1 ended b"
    assert [by[(0, k)].answer_text for k in range(3)] == ["t0t1", "t0t1t2", "t0"]
    assert not by[(1, 1)].ok and run.records == sorted(run.records, key=lambda r: r.index)
    bodies = {tuple(m["content"] for m in b["messages"]): b for b in srv.bodies}
    assert ("be brief", "stream 2 0.01", "t0t1", "stream 3 0.01", "t0t1t2", "stream 1 0.01") in bodies
    assert ("be brief", "stream 1 0.01", "t0", "status 500") in bodies
    roles = [m["role"] for m in max(srv.bodies, key=lambda b: len(b["messages"]))["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    named = {h["X-Session-Id"] for h in srv.headers}
    assert named == {"a-0", "b-1"}, "one name per session, on every turn"


def test_the_session_options_are_checked():
    assert session_plan(None) is None
    plan = session_plan(8, session_turns=4, think_time="exp:2s", session_header="X-Session-Id")
    assert plan is not None and (plan.count, plan.turns, plan.think_s, plan.think_drawn) == (8, 4, 2.0, True)
    with pytest.raises(ValueError, match="give --sessions N or --sessions-file PATH too"):
        session_plan(None, think_time="2s")
    with pytest.raises(ValueError, match="--think-time takes"):
        session_plan(4, think_time="soon")
    with pytest.raises(ValueError, match="a header name"):
        session_plan(4, session_header="X Session")


def test_at_a_session_rate_each_session_starts_at_its_arrival_and_waits_for_a_place():
    """--session-rate: five sessions arriving far faster than one place serves them; each first
    turn keeps its arrival (t_sched) and its place (t_admitted) apart, in arrival order."""
    talks = tuple(_talk(f"s{i}", "stream 2 0.02", "stream 1 0.02") for i in range(5))
    sessions = Sessions(talks, rate_per_s=1000.0, seed=3)
    with HeaderServer() as srv:
        cfg = LevelConfig(srv.base_url, "m", concurrency=1, requests=sessions.turns, warmup=0, sessions=sessions)
        run = run_level(cfg, prompts("stream 1 0.01"), [])
    firsts = sorted((r for r in run.records if r.turn == 0), key=lambda r: r.session)
    assert len(firsts) == 5 and all(r.ok for r in run.records) and len(run.records) == 10
    assert [r.t_sched for r in firsts] == sorted(r.t_sched for r in firsts), "arrivals in order"
    assert firsts[0].t_sched > 0 and all(r.t_admitted >= r.t_sched for r in firsts)
    # one place: session i+1 got it only once session i's last turn was over
    ends = {r.session: r.t_end for r in run.records if r.turn == 1}
    assert all(firsts[i + 1].t_admitted >= ends[i] for i in range(4))
    assert all(r.t_admitted is None for r in run.records if r.turn == 1), "later turns never queue"


def test_a_recorded_session_sends_each_turn_whole_with_its_own_output_length_and_pause():
    """A Weka trace's turns hold their history already: no answer is added, each turn asks for its
    recorded output length, and the recorded pauses are kept (think_s None)."""
    talk = Conversation("agent", (), ("stream 2 0.01", "stream 1 0.01", "stream 3 0.01"), 9, recorded=True,
                        turn_max_tokens=(5, 6, 7), think_before_s=(None, 0.2, None))
    sessions = Sessions((talk,), think_s=None)
    with HeaderServer() as srv:
        cfg = LevelConfig(srv.base_url, "m", concurrency=1, requests=sessions.turns, warmup=0, sessions=sessions)
        run = run_level(cfg, prompts("stream 1 0.01"), [])
    assert [len(b["messages"]) for b in srv.bodies] == [1, 1, 1], "each turn whole, as recorded"
    assert [b["max_tokens"] for b in srv.bodies] == [5, 6, 7]
    by = {r.turn: r for r in run.records}
    # the recorded pause before turn 1 (less a millisecond: the event loop's clock may wake it that early)
    assert by[1].t_send - by[0].t_end >= 0.199
    assert sessions.think(talk, 2, lambda mean: 99.0) == 0.0, "none recorded before turn 2: no pause"
