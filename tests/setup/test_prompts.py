"""The shipped prompt splits, their build script and stats, and the prompt-file loaders."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.setup.prompt_files import PromptFileError, load_prompts, load_split
from bench.setup.prompts import Prompt, assert_no_shared_prefix

PROMPTS_DIR = PROJECT_ROOT / "prompts"
SILICONBENCH = Path(__file__).parents[1] / "data" / "siliconbench"  # small files in SiliconBench's format
# SiliconBench's chat split: 100 prompts numbered in this order, by (bucket, max_tokens) and count.
SILICONBENCH_CHAT_MIX = (("short", 64, 10), ("short", 256, 10), ("medium", 64, 10), ("medium", 256, 10),
                         ("long", 64, 15), ("long", 256, 15), ("vlong", 64, 15), ("vlong", 256, 15))
CHAT_BOUNDS = {"short": (10, 80), "medium": (80, 500), "long": (500, 2000), "vlong": (2000, 4000)}
TOLERANCE = 0.10  # another build of the tiny tokenizer may split words a little differently

sys.path.insert(0, str(PROMPTS_DIR))
import token_stats  # noqa: E402


def build_into(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PROMPTS_DIR / "build_splits.py"), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=120)


def listed_tool_names(system: str) -> list[str]:
    start = system.index("Available tools:\n") + len("Available tools:\n")
    tools, _ = json.JSONDecoder().raw_decode(system, start)
    return [t["function"]["name"] for t in tools]


@pytest.fixture(scope="module")
def tiny_counter() -> token_stats.TokenCounter:
    try:
        tok, tpl = token_stats.tiny_model_files()
    except Exception as exc:  # the tiny model cannot be built here: the only reason to skip
        pytest.skip(f"tiny model tokenizer unavailable: {exc}")
    return token_stats.make_counter("tiny", "bench.setup.tinymodel", tok, tpl)


# ---------------------------------------------------------------- build

def test_rebuild_gives_identical_files(tmp_path: Path) -> None:
    for run in ("a", "b"):
        result = build_into(tmp_path / run)
        assert result.returncode == 0, result.stderr
        for name in ("chat.json", "agent.json"):
            assert (tmp_path / run / name).read_bytes() == (PROMPTS_DIR / name).read_bytes(), f"{run}/{name}"


def test_check_reports_a_stale_file(tmp_path: Path) -> None:
    for name in ("chat.json", "agent.json"):
        (tmp_path / name).write_bytes((PROMPTS_DIR / name).read_bytes())
    assert build_into(tmp_path, "--check").returncode == 0
    agent = tmp_path / "agent.json"
    agent.write_text(agent.read_text(encoding="utf-8").replace('"max_tokens": 256', '"max_tokens": 255', 1),
                     encoding="utf-8")
    result = build_into(tmp_path, "--check")
    assert result.returncode == 1
    assert "agent.json" in result.stderr and "chat.json" not in result.stderr


def test_files_are_written_the_documented_way() -> None:
    for name in ("chat.json", "agent.json"):
        text = (PROMPTS_DIR / name).read_text(encoding="utf-8")
        data = json.loads(text)
        assert text == json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1) + "\n"
        assert data["split"] == name.split(".")[0] and data["license"] == "CC0-1.0"
        for p in data["prompts"] + data["warmup"]:
            assert p["meta"]["license"] == "CC0-1.0"
            assert p["meta"]["provenance"].startswith("self-written: cellbench prompts/build_splits.py")


# ---------------------------------------------------------------- chat

def test_chat_has_siliconbench_bucket_mix() -> None:
    ps = load_split("chat")
    mix = Counter((p.meta["bucket"], p.max_tokens) for p in ps.prompts)
    assert mix == {("short", 64): 10, ("short", 256): 10, ("medium", 64): 10, ("medium", 256): 10,
                   ("long", 64): 15, ("long", 256): 15, ("vlong", 64): 15, ("vlong", 256): 15}
    for p in ps.prompts:
        assert re.fullmatch(rf"p\d{{3}}_{p.meta['bucket']}_out{p.max_tokens}", p.name)
        assert [m["role"] for m in p.messages] == ["user"] and p.tools is None
    assert [p.name for p in ps.prompts] != sorted(p.name for p in ps.prompts), "the list is shuffled"


def siliconbench_chat_names() -> list[str]:
    """The names SiliconBench's chat split gives its prompts: p000 to p099 in the mix's order."""
    kinds = [(bucket, out) for bucket, out, count in SILICONBENCH_CHAT_MIX for _ in range(count)]
    return [f"p{i:03d}_{bucket}_out{out}" for i, (bucket, out) in enumerate(kinds)]


def test_chat_mix_equals_siliconbench_names() -> None:
    ours = load_split("chat").prompts
    assert sorted(p.name for p in ours) == siliconbench_chat_names()
    fixture = json.loads((SILICONBENCH / "chat_benchmark_prompts.json").read_text(encoding="utf-8"))
    assert {p["name"] for p in fixture} <= set(siliconbench_chat_names()), "the fixture follows the scheme"


# ---------------------------------------------------------------- agent

def test_agent_traces_are_well_formed() -> None:
    ps = load_split("agent")
    assert len(ps.prompts) == 100
    assert Counter(p.meta["bucket"] for p in ps.prompts) == {"medium": 5, "long": 17, "vlong": 78}
    assert set(Counter(p.meta["domain"] for p in ps.prompts).values()) == {10}
    for n, p in enumerate(ps.prompts + ps.warmup):
        if n < 100:
            assert p.name == f"a{n:03d}_{p.meta['bucket']}_{p.meta['domain']}"
        assert 2 <= len(p.messages) <= 20 and p.max_tokens == 256
        assert p.messages[0]["role"] == "system" and p.messages[-1]["role"] in ("tool", "user")
        asked, answered = [], []
        for m in p.messages:
            for call in m.get("tool_calls") or ():
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                asked.append(call["id"])
            if m["role"] == "tool":
                answered.append(m["tool_call_id"])
        assert sorted(asked) == sorted(answered), p.name
    roles = Counter(p.messages[-1]["role"] for p in ps.prompts)
    assert roles["tool"] > roles["user"] > 0
    assert sum(1 for p in ps.prompts if any(m.get("tool_calls") for m in p.messages)) >= 95


def test_agent_tools_are_stated_both_ways() -> None:
    in_text = load_split("agent")
    in_param = load_split("agent", tools_param=True)
    for text_p, param_p in zip(in_text.prompts, in_param.prompts, strict=True):
        assert text_p.tools is None and text_p.name == param_p.name
        names = listed_tool_names(text_p.messages[0]["content"])
        assert names == [t["function"]["name"] for t in param_p.tools or ()]
        called = {c["function"]["name"] for m in text_p.messages for c in m.get("tool_calls") or ()}
        assert called <= set(names), text_p.name
        # In parameter mode the system prompt stops listing the schemas; the rest is unchanged.
        assert "Available tools:" not in param_p.messages[0]["content"]
        assert param_p.messages[0]["content"].split("\n\n")[0] == text_p.messages[0]["content"].split("\n\n")[0]
        assert param_p.messages[1:] == text_p.messages[1:]


# ---------------------------------------------------------------- token counts

def test_token_targets_with_the_tiny_tokenizer(tiny_counter: token_stats.TokenCounter) -> None:
    for p in load_split("chat").prompts:
        lo, hi = CHAT_BOUNDS[p.meta["bucket"]]
        n = tiny_counter.count(p)
        assert lo * (1 - TOLERANCE) <= n <= hi * (1 + TOLERANCE), (p.name, n)
    counts = [tiny_counter.count(p) for p in load_split("agent").prompts]
    assert 3500 <= sum(counts) / len(counts) <= 4500
    assert min(counts) >= 200 and max(counts) <= 10500


def test_stats_file_is_current(tiny_counter: token_stats.TokenCounter) -> None:
    stored = json.loads((PROMPTS_DIR / "stats.json").read_text(encoding="utf-8"))
    if stored["tokenizers"]["tiny"]["tokenizer_sha256"] != tiny_counter.source["tokenizer_sha256"]:
        pytest.skip("stats.json was measured with another build of the tiny tokenizer")
    fresh = token_stats.build_stats({"tiny": tiny_counter, "qwen3": None}, {"qwen3": token_stats.QWEN3_MISSING})
    for split in ("chat", "agent"):
        assert fresh["splits"][split] == stored["splits"][split]


def test_stats_structure_and_missing_qwen3() -> None:
    stored = json.loads((PROMPTS_DIR / "stats.json").read_text(encoding="utf-8"))
    assert stored["tokenizers"]["qwen3"] is None and "Qwen3" in stored["notes"]["qwen3"]
    for split in ("chat", "agent"):
        entry = stored["splits"][split]
        assert entry["input_tokens"]["qwen3"] is None
        expected = token_stats.structure(load_split(split))
        assert {k: entry[k] for k in expected} == expected


def test_qwen3_code_path_counts_with_any_tokenizer_file(tmp_path: Path,
                                                        tiny_counter: token_stats.TokenCounter) -> None:
    # The real Qwen3 tokenizer is not here; the same --qwen3-tokenizer path runs on the tiny one.
    tok, tpl = token_stats.tiny_model_files()
    out = tmp_path / "stats.json"
    assert token_stats.main(["--tokenizer", str(tok), "--template", str(tpl), "--qwen3-tokenizer", str(tok),
                             "--qwen3-template", str(tpl), "--out", str(out)]) == 0
    stats = json.loads(out.read_text(encoding="utf-8"))
    agent = stats["splits"]["agent"]["input_tokens"]
    assert agent["qwen3"]["all"] == agent["tiny"]["all"] and "qwen3" not in stats["notes"]


# ---------------------------------------------------------------- warm-up

def test_warmup_shares_no_prefix_with_measured_prompts() -> None:
    for split in ("chat", "agent"):
        ps = load_split(split)
        assert len(ps.warmup) >= 3
        assert_no_shared_prefix(ps.prompts, ps.warmup)
        heads = {p.messages[0]["content"][:32] for p in ps.prompts}
        assert not heads & {w.messages[0]["content"][:32] for w in ps.warmup}


def test_shared_prefix_is_refused() -> None:
    measured = (Prompt("m", ({"role": "user", "content": "Please read the following article and summarise"},), 64),)
    clash = Prompt("w", ({"role": "user", "content": "Please read the following article, then stop"},), 64)
    with pytest.raises(ValueError, match="'w' shares its first 32 characters with measured prompt 'm'"):
        assert_no_shared_prefix(measured, (clash,))


# ---------------------------------------------------------------- loaders

def write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_loads_siliconbench_list_format(tmp_path: Path) -> None:
    entries = [{"name": "p000_short_out64", "description": "d", "max_tokens": 64,
                "messages": [{"role": "user", "content": "What is a tide?"}]},
               {"name": "a000_long_x", "description": "", "max_tokens": 256, "messages": [
                   {"role": "system", "content": "tools: ..."}, {"role": "user", "content": "go"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"}]}]
    ps = load_prompts(write(tmp_path / "list.json", entries))
    assert ps.format == "siliconbench" and ps.source == tmp_path / "list.json"
    assert [p.name for p in ps.prompts] == ["p000_short_out64", "a000_long_x"]
    assert [list(p.messages) for p in ps.prompts] == [e["messages"] for e in entries]
    assert ps.warmup == load_split("agent").warmup  # it has tool calls


def test_loads_sharegpt(tmp_path: Path) -> None:
    data = [{"id": "conv1", "conversations": [
                {"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"},
                {"from": "gpt", "value": "Hello"}, {"from": "human", "value": "Name a river."},
                {"from": "gpt", "value": "The Thames."}]},
            {"conversations": [{"from": "human", "value": "Why is the sea salty?"}], "max_tokens": 32}]
    path = write(tmp_path / "share.json", data)
    ps = load_prompts(path)
    assert ps.format == "sharegpt"
    first, second = ps.prompts
    assert first.name == "conv1" and first.max_tokens == 256
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant", "user"]
    assert second.name == "sharegpt_0001" and second.max_tokens == 32
    assert load_prompts(path, default_max_tokens=100).prompts[0].max_tokens == 100
    assert ps.warmup == load_split("chat").warmup


def test_loads_jsonl_of_openai_messages(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    lines = [json.dumps({"name": "one", "max_tokens": 16, "messages": [{"role": "user", "content": "a"}]}),
             "",
             json.dumps([{"role": "user", "content": "b"}]),
             json.dumps({"messages": [{"role": "user", "content": "c"}], "tools": tools})]
    path = tmp_path / "reqs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ps = load_prompts(path)
    assert ps.format == "jsonl"
    assert [(p.name, p.max_tokens) for p in ps.prompts] == [("one", 16), ("reqs_0001", 256), ("reqs_0002", 256)]
    assert ps.prompts[0].tools is None and ps.prompts[2].tools == tuple(tools)
    assert ps.prompts[1].meta == {"format": "jsonl", "index": 1, "line": 3}
    # The same lines in a .json file are recognised by their content.
    other = tmp_path / "reqs.json"
    other.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert load_prompts(other).format == "jsonl"


def test_cellbench_format_and_unknown_split() -> None:
    shipped = load_split("agent", tools_param=True)
    again = load_prompts(PROMPTS_DIR / "agent.json", tools_param=True)
    assert again.format == "cellbench" and again.prompts == shipped.prompts and again.warmup == shipped.warmup
    with pytest.raises(ValueError, match="unknown split 'code'"):
        load_split("code")


@pytest.mark.parametrize("split", ["chat", "agent"])
def test_siliconbench_files_load_unchanged(split: str) -> None:
    path = SILICONBENCH / f"{split}_benchmark_prompts.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    ps = load_prompts(path)
    assert ps.format == "siliconbench" and len(ps.prompts) == len(raw) >= 6
    assert all(p.tools is None for p in ps.prompts), "SiliconBench states tools in the system prompt's text"
    assert [(p.name, list(p.messages), p.max_tokens, p.description) for p in ps.prompts] == \
        [(e["name"], e["messages"], e["max_tokens"], e["description"]) for e in raw]
    assert ps.warmup == load_split(split).warmup


@pytest.mark.parametrize("split", ["chat", "agent"])
def test_siliconbench_fixtures_keep_the_format(split: str) -> None:
    """The fixture files hold exactly what SiliconBench's files hold (tests/data/siliconbench/README.md),
    so the tests above test that format, not a looser one."""
    entries = json.loads((SILICONBENCH / f"{split}_benchmark_prompts.json").read_text(encoding="utf-8"))
    name = r"p\d{3}_(short|medium|long|vlong)_out(64|256)" if split == "chat" else r"a\d{3}_(medium|long|vlong)_\w+"
    for e in entries:
        assert set(e) == {"name", "description", "messages", "max_tokens"}, e["name"]
        assert re.fullmatch(name, e["name"]) and isinstance(e["description"], str) and e["max_tokens"] in (64, 256)
        roles = [m["role"] for m in e["messages"]]
        if split == "chat":
            assert roles == ["user"]
            continue
        assert roles[0] == "system" and "Available tools:\n" in e["messages"][0]["content"]
        asked = [c["id"] for m in e["messages"] for c in m.get("tool_calls", ())]
        assert asked and asked == [m["tool_call_id"] for m in e["messages"] if m["role"] == "tool"]
        for m in e["messages"]:
            if m["role"] == "assistant":
                assert m["content"] == "" and all(isinstance(c["function"]["arguments"], str) for c in m["tool_calls"])


# ---------------------------------------------------------------- bad files

def user(text: str = "hi") -> dict:
    return {"role": "user", "content": text}


BAD_ENTRIES = {
    "no_role": ([{"name": "ok", "max_tokens": 8, "messages": [user()]},
                 {"name": "broken", "max_tokens": 8, "messages": [{"content": "hi"}]}],
                r"entry 1 \(name 'broken'\): messages\[0\]\.role: missing"),
    "tool_without_id": ([{"name": "t", "max_tokens": 8, "messages": [
                            user(), {"role": "assistant", "content": None, "tool_calls": [
                                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                            {"role": "tool", "content": "{}"}]}],
                        r"entry 0 \(name 't'\): messages\[2\]\.tool_call_id: missing"),
    "negative_max_tokens": ([{"name": "n", "max_tokens": -5, "messages": [user()]}],
                            r"entry 0 \(name 'n'\): max_tokens: must be a positive integer, got -5"),
    "duplicate_names": ([{"name": "same", "max_tokens": 8, "messages": [user()]},
                         {"name": "same", "max_tokens": 8, "messages": [user("b")]}],
                        r"entry 1 \(name 'same'\): name: duplicate of entry 0"),
    "unknown_role": ([{"name": "r", "max_tokens": 8, "messages": [{"role": "robot", "content": "x"}]}],
                     r"entry 0 \(name 'r'\): messages\[0\]\.role: unknown role 'robot'"),
    "bad_arguments": ([{"name": "a", "max_tokens": 8, "messages": [user(), {
                          "role": "assistant", "content": None, "tool_calls": [
                              {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]}],
                      r"entry 0 \(name 'a'\): messages\[1\]\.tool_calls\[0\]\.function\.arguments: not valid JSON"),
    "null_content": ([{"name": "z", "max_tokens": 8, "messages": [{"role": "user", "content": None}]}],
                     r"entry 0 \(name 'z'\): messages\[0\]\.content: must be a string"),
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_bad_entry_names_file_entry_and_field(tmp_path: Path, case: str) -> None:
    entries, expected = BAD_ENTRIES[case]
    path = write(tmp_path / f"{case}.json", entries)
    with pytest.raises(PromptFileError, match=re.escape(str(path)) + ": " + expected):
        load_prompts(path)


def test_invalid_json_names_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"name": "x", "max_tokens": 8,\n  "messages": [}]', encoding="utf-8")
    with pytest.raises(PromptFileError, match=re.escape(str(path)) + r": not valid JSON: .* line 2, column"):
        load_prompts(path)


def test_bad_jsonl_line_names_file_line_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps([user()]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(PromptFileError, match=re.escape(str(path)) + r": line 2 \(entry 1\): not valid JSON"):
        load_prompts(path)
    path.write_text(json.dumps([user()]) + "\n" + json.dumps({"name": "late", "max_tokens": 0, "messages": [user()]}),
                    encoding="utf-8")
    with pytest.raises(PromptFileError, match=r"line 2, entry 1 \(name 'late'\): max_tokens"):
        load_prompts(path)


def test_bad_sharegpt_speaker_and_bad_cellbench_warmup(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", [{"id": "c9", "conversations": [{"from": "tool", "value": "{}"}]}])
    with pytest.raises(PromptFileError,
                       match=r"entry 0 \(name 'c9'\): conversations\[0\]\.from: unknown speaker 'tool'"):
        load_prompts(path)
    data = json.loads((PROMPTS_DIR / "chat.json").read_text(encoding="utf-8"))
    data["warmup"][0]["messages"][0]["content"] = data["prompts"][3]["messages"][0]["content"]
    path = write(tmp_path / "w.json", data)
    with pytest.raises(PromptFileError, match=re.escape(str(path)) + r": warm-up prompt 'w00_short_out64' shares"):
        load_prompts(path)
    data["warmup"][1]["messages"][0].pop("role")
    path = write(tmp_path / "c.json", data)
    with pytest.raises(PromptFileError, match=r"warmup 1 \(name 'w01_medium_out256'\): messages\[0\]\.role: missing"):
        load_prompts(path)


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_empty_file_is_named_empty(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PromptFileError, match=re.escape(str(path)) + r": empty file: no prompts$"):
        load_prompts(path)
