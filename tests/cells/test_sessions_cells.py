"""Session levels against the real llama-server on the built-in tiny model: the agent split's
conversations, and a ShareGPT file written here, each turn carrying the server's own previous
answers. The request log proves what each turn sent: its record's SHA-256 of the messages equals
that of the history rebuilt from the prompt file and the earlier turns' recorded answers. And
recorded agent sessions (Weka traces written here) arriving at a session rate: each turn whole,
its prefix taken from llama-server's cache where the recording shares it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.setup.prompt_files import load_prompts, load_split
from bench.setup.sessions import conversations, recorded
from bench.setup.traces import Synthesiser, tokenizer_path
from bench.setup.traces.weka import load_weka
from tests.cells.test_open_loop_cells import cellbench, only_result
from tests.setup.test_weka import agent_session
from tests.support.busy import TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]


def _sent(path: Path, result: dict) -> list[dict]:
    lines = (path.parent / result["requests_file"]).read_text().splitlines()
    return [r for r in map(json.loads, lines) if not r["warmup"]]


def _proves_the_history(records: list[dict], prompts_path: Path | None, split: str, sessions: int,
                        turns: int | None) -> None:
    """Every turn sent the conversation's opening, each earlier user turn followed by the server's
    answer to it verbatim, then its own user turn."""
    prompts = load_split(split) if prompts_path is None else load_prompts(prompts_path, split_hint=split)
    convs = conversations(prompts.prompts, sessions, turns)
    by_turn = {(r["session"], r["turn"]): r for r in records}
    assert {s for s, _ in by_turn} == set(range(sessions))
    for (s, k), record in by_turn.items():
        history = list(convs[s].system)
        for j in range(k):
            history += [{"role": "user", "content": convs[s].turns[j]},
                        {"role": "assistant", "content": by_turn[(s, j)]["answer_text"]}]
        history.append({"role": "user", "content": convs[s].turns[k]})
        digest = hashlib.sha256(json.dumps(history, sort_keys=True).encode()).hexdigest()
        assert record["history_sha256"] == digest, (s, k)
        assert record["answer_text"], "the server's answer is kept whole for the next turn"
    assert all(len(r["answer_text"]) > len(r["output_text_head"]) for r in records if len(r["answer_text"]) > 200)


def test_the_agent_splits_conversations_with_the_servers_own_answers(tmp_path):
    proc, results = cellbench(tmp_path, "-m", "agent", "--sessions", "8", "--session-turns", "4", "--concurrency",
                              "4", "--warmup", "1", "--think-time", "exp:0.05s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = sorted((results).rglob("llamacpp_*.json"))
    result = json.loads(path.read_text())
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-agent in sessions")
    (level,) = result["levels"]
    block = level["sessions"]
    records = _sent(path, result)
    _proves_the_history(records, None, "agent", 8, 4)
    assert block["sessions"] == block["completed"] == 8 and block["turns"] == len(records) == level["num_requests"]
    turns = block["by_turn"]
    assert [t["turn"] for t in turns] == list(range(len(turns))) and len(turns) >= 2
    assert all(t["ttft_p50_ms"] is not None for t in turns), "TTFT by turn index"
    assert turns[1]["prompt_tokens_mean"] > turns[0]["prompt_tokens_mean"], "the history grows turn by turn"
    # llama-server reuses a conversation's prefix: a later turn's prompt mostly comes from its cache
    assert all(t["cached_share"] > 0.5 for t in turns[1:]), turns
    assert level["prefix_cache"]["cached_tokens"] == sum(r["usage_cached_tokens"] for r in records)
    assert result["run_config"]["load"]["sessions"] == {"count": 8, "turns": 4, "think_s": 0.05,
                                                        "think": "exponential", "header": None}
    report = (path.parent / "REPORT.md").read_text()
    assert "## Sessions" in report and "| Sessions completed (sessions) | 8 |" in report


def test_a_sharegpt_files_conversations(tmp_path):
    """ShareGPT's own shape through --sessions-file: `conversations` of `from`/`value` turns; the
    recorded gpt turns are replaced by the server's."""
    talks = [{"id": f"talk{i}", "conversations": [
        {"from": "system", "value": "You are terse."},
        {"from": "human", "value": f"Name a colour, {i}."}, {"from": "gpt", "value": "Blue."},
        {"from": "human", "value": "And another?"}, {"from": "gpt", "value": "Red."},
        {"from": "human", "value": "Which is warmer?"}]} for i in range(3)]
    path = tmp_path / "talks.json"
    path.write_text(json.dumps(talks))
    proc, results = cellbench(tmp_path, "--sessions-file", str(path), "--sessions", "3", "--concurrency", "2",
                              "--warmup", "0", "--session-header", "X-Session-Id")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path_out, result = only_result(results)
    records = _sent(path_out, result)
    _proves_the_history(records, path, "chat", 3, None)
    block = result["levels"][0]["sessions"]
    assert (block["sessions"], block["completed"], block["turns"]) == (3, 3, 9)
    assert result["run_config"]["load"]["sessions"]["file"] == {"name": "talks.json", "format": "conversations"}
    assert all(r["answer_text"] not in ("Blue.", "Red.") or r["output_text_head"] == r["answer_text"]
               for r in records), "the recorded answers are the server's, not the file's"


def test_recorded_agent_sessions_from_weka_traces_at_a_session_rate(tmp_path):
    """Two traces of 4 turns (64 to 112 tokens, 16-token blocks), each turn opening with the last
    one's full blocks: every turn sent whole as synthesised, at its recorded output length; the
    sessions arrive at 20/s with 2 places; llama-server answers each later turn's shared prefix
    from its cache."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("trace_0001", "trace_0002"):
        (traces / f"{name}.json").write_text(json.dumps(agent_session(name, first=64, growth=16, out=6)))
    proc, results = cellbench(tmp_path, "--sessions-file", str(traces), "--session-rate", "20", "--concurrency", "2",
                              "--warmup", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path, result = only_result(results)
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat in Weka sessions")
    records = _sent(path, result)
    made = recorded(load_weka(traces), Synthesiser(tokenizer_path("tiny", "tiny")))
    for r in records:  # each turn is the synthesised prompt, whole: no answer spliced in
        sent = [{"role": "user", "content": made[r["session"]].turns[r["turn"]]}]
        assert r["history_sha256"] == hashlib.sha256(json.dumps(sent, sort_keys=True).encode()).hexdigest()
        assert r["max_tokens"] == 6
    firsts = [r for r in records if r["turn"] == 0]
    assert len(firsts) == 2 and all(r["t_admitted"] >= r["t_sched"] for r in firsts), "arrivals kept apart"
    block = result["levels"][0]["sessions"]
    assert (block["sessions"], block["completed"], block["turns"]) == (2, 2, 8)
    turns = block["by_turn"]
    assert [t["prompt_tokens_mean"] - turns[0]["prompt_tokens_mean"] for t in turns] == [0, 16, 32, 48]
    assert all(t["cached_share"] > 0.6 for t in turns[1:]), turns
    load = result["run_config"]["load"]["sessions"]
    assert (load["count"], load["think"], load["think_s"], load["rate_per_s"]) == (None, "recorded", None, 20.0)
    assert load["file"]["format"] == "weka" and load["file"]["traces"] == 2
    assert result["run_config"]["prompts"]["format"] == "weka trace"
