"""Prompt files: the shipped splits and a user's own files, read into `Prompt`s (bench.setup.prompts).

Formats read by `load_prompts` (detected from the content, JSONL also from the suffix):

- cellbench: `{"split", "prompts": [...], "warmup": [...]}`, the shipped `prompts/{chat,agent}.json`;
- siliconbench: a list of `{name, description, messages, max_tokens}`, SiliconBench's own files unchanged;
- sharegpt: a list of `{"conversations": [{"from": "human"|"gpt"|"system", "value": ...}]}`;
- jsonl: one request per line, `{"messages": [...], "max_tokens"?, "name"?, "tools"?}` or a bare list
  of OpenAI messages.

Every entry is checked before a server sees it; a bad one raises `PromptFileError` naming the file,
the entry (index and name) and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.base.defaults import SPLITS
from bench.base.paths import PROJECT_ROOT
from bench.setup.prompts import Prompt, PromptSet, assert_no_shared_prefix

SPLITS_DIR = PROJECT_ROOT / "prompts"
ROLES = ("system", "developer", "user", "assistant", "tool")
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user",
                  "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant", "model": "assistant"}
DEFAULT_MAX_TOKENS = 256


class PromptFileError(ValueError):
    """A prompt file that cannot be used; the message names the file, the entry and the field."""


def load_split(split: str, *, tools_param: bool = False) -> PromptSet:
    """A shipped split. With `tools_param`, agent prompts carry their tools in the request's
    `tools` parameter and their system prompt drops the schema listing (so the schemas are sent
    once either way); without it they are stated only in the system prompt text."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; shipped splits: {', '.join(SPLITS)}")
    return load_prompts(SPLITS_DIR / f"{split}.json", split_hint=split, tools_param=tools_param)


def load_prompts(path: Path, *, split_hint: str | None = None, tools_param: bool = False,
                 default_max_tokens: int = DEFAULT_MAX_TOKENS) -> PromptSet:
    """Read any supported prompt file. `split_hint` picks the shipped warm-up for files without
    their own (default: agent if any prompt has tool calls, else chat); `default_max_tokens`
    applies to ShareGPT and JSONL entries that give none."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptFileError(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        raise PromptFileError(f"{path}: empty file: no prompts")
    prompts: tuple[Prompt, ...]
    warmup: tuple[Prompt, ...]
    if path.suffix in (".jsonl", ".ndjson"):
        fmt, prompts, warmup = "jsonl", _jsonl(path, text, default_max_tokens), ()
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if not _is_jsonl(text):
                raise PromptFileError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, "
                                      f"column {exc.colno}") from None
            data = None
        if data is None:
            fmt, prompts, warmup = "jsonl", _jsonl(path, text, default_max_tokens), ()
        elif isinstance(data, dict) and "prompts" in data:
            fmt = "cellbench"
            prompts = _entries(path, data["prompts"], "prompts", tools_param)
            warmup = _entries(path, data.get("warmup", []), "warmup", tools_param)
        elif isinstance(data, list) and data and isinstance(data[0], dict) and "conversations" in data[0]:
            fmt, prompts, warmup = "sharegpt", _sharegpt(path, data, default_max_tokens), ()
        elif isinstance(data, list):
            # A plain list's `tools` are the request's, as in JSONL (SiliconBench's own files have none).
            fmt, prompts, warmup = "siliconbench", _entries(path, data, "entry", True), ()
        else:
            raise PromptFileError(f"{path}: not a prompt file: expected a list of prompts, a ShareGPT "
                                  f"list or an object with 'prompts'")
    if not prompts:
        raise PromptFileError(f"{path}: no prompts")
    _unique_names(path, prompts, "entry" if fmt != "cellbench" else "prompts")
    _unique_names(path, warmup, "warmup")
    if not warmup:
        warmup = _shipped_warmup(path, prompts, split_hint or _guess_split(prompts))
    try:
        assert_no_shared_prefix(prompts, warmup)
    except ValueError as exc:  # a file's own warm-up list that would prime the cache
        raise PromptFileError(f"{path}: {exc}") from None
    return PromptSet(prompts=prompts, warmup=warmup, source=path, format=fmt)


def _shipped_warmup(path: Path, measured: tuple[Prompt, ...], split: str) -> tuple[Prompt, ...]:
    """The shipped split's warm-up, less any that happens to open like a prompt in the file."""
    shipped = load_split(split).warmup
    keep = []
    for w in shipped:
        try:
            assert_no_shared_prefix(measured, (w,))
        except ValueError:
            continue
        keep.append(w)
    if not keep:
        raise PromptFileError(f"{path}: every shipped {split} warm-up prompt opens like a prompt in this file")
    return tuple(keep)


def _guess_split(prompts: tuple[Prompt, ...]) -> str:
    agentic = any(m.get("role") == "tool" or m.get("tool_calls") for p in prompts for m in p.messages)
    return "agent" if agentic else "chat"


# ---------------------------------------------------------------- formats

def _entries(path: Path, entries: object, label: str, tools_param: bool) -> tuple[Prompt, ...]:
    """cellbench's `prompts`/`warmup` lists and SiliconBench's top-level list."""
    if not isinstance(entries, list):
        raise PromptFileError(f"{path}: {label}: expected a list, got {type(entries).__name__}")
    out = []
    for i, entry in enumerate(entries):
        where = _Where(path, label, i, entry)
        if not isinstance(entry, dict):
            raise where.error("", f"expected an object, got {type(entry).__name__}")
        out.append(_prompt(where, entry, tools_param, None))
    return tuple(out)


def _sharegpt(path: Path, data: list, default_max_tokens: int) -> tuple[Prompt, ...]:
    out = []
    for i, entry in enumerate(data):
        where = _Where(path, "entry", i, entry)
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise where.error("conversations", "expected a list of turns")
        messages = []
        for k, turn in enumerate(turns):
            if not isinstance(turn, dict) or "from" not in turn:
                raise where.error(f"conversations[{k}].from", "missing")
            role = SHAREGPT_ROLES.get(str(turn["from"]).lower())
            if role is None:
                raise where.error(f"conversations[{k}].from", f"unknown speaker {turn['from']!r} (expected one of "
                                  f"{', '.join(SHAREGPT_ROLES)}; tool turns need JSONL with tool_call_id)")
            if not isinstance(turn.get("value"), str):
                raise where.error(f"conversations[{k}].value", "must be a string")
            messages.append({"role": role, "content": turn["value"]})
        while messages and messages[-1]["role"] == "assistant":
            messages.pop()  # the recorded reply is what the server is asked to produce
        if not messages:
            raise where.error("conversations", "no turns left after dropping the trailing assistant reply")
        name = entry.get("id", entry.get("name", f"sharegpt_{i:04d}"))
        fields = {"name": str(name), "messages": messages,
                  "max_tokens": entry.get("max_tokens", default_max_tokens)}
        out.append(_prompt(where, fields, False, {"format": "sharegpt", "index": i}))
    return tuple(out)


def _is_jsonl(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return False
    try:
        json.loads(lines[0])
    except json.JSONDecodeError:
        return False
    return True


def _jsonl(path: Path, text: str, default_max_tokens: int) -> tuple[Prompt, ...]:
    out: list[Prompt] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        index = len(out)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptFileError(f"{path}: line {lineno} (entry {index}): not valid JSON: {exc.msg} "
                                  f"at column {exc.colno}") from None
        if isinstance(obj, list):
            obj = {"messages": obj}
        where = _Where(path, "entry", index, obj, line=lineno)
        if not isinstance(obj, dict):
            raise where.error("", f"expected an object or a list of messages, got {type(obj).__name__}")
        fields = {"name": obj.get("name", f"{path.stem}_{index:04d}"), "messages": obj.get("messages"),
                  "max_tokens": obj.get("max_tokens", default_max_tokens), "tools": obj.get("tools"),
                  "description": obj.get("description", "")}
        out.append(_prompt(where, fields, True, {"format": "jsonl", "index": index, "line": lineno}))
    return tuple(out)


# ---------------------------------------------------------------- validation

@dataclass(frozen=True)
class _Where:
    path: Path
    label: str
    index: int
    entry: object
    line: int | None = None

    def error(self, field_name: str, problem: str) -> PromptFileError:
        name = self.entry.get("name", self.entry.get("id")) if isinstance(self.entry, dict) else None
        place = f"{self.label} {self.index} ({'no name' if name is None else f'name {name!r}'})"
        if self.line is not None:
            place = f"line {self.line}, {place}"
        return PromptFileError(f"{self.path}: {place}: {field_name + ': ' if field_name else ''}{problem}")


def _prompt(where: _Where, entry: dict, tools_param: bool, meta: dict | None) -> Prompt:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise where.error("name", "missing or not a non-empty string")
    max_tokens = entry.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise where.error("max_tokens", f"must be a positive integer, got {max_tokens!r}")
    messages = _messages(where, entry.get("messages"))
    tools = entry.get("tools")
    if tools is not None:
        _check_tools(where, tools)
    file_meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
    if tools_param and tools and "system_for_tools_param" in file_meta and messages[0]["role"] == "system":
        # The tools travel in the parameter, so the system prompt stops listing them.
        messages[0] = {**messages[0], "content": file_meta["system_for_tools_param"]}
    description = entry.get("description", "")
    return Prompt(name=name, messages=tuple(messages), max_tokens=max_tokens,
                  description=description if isinstance(description, str) else "",
                  tools=tuple(tools) if tools_param and tools else None,
                  meta=meta if meta is not None else dict(file_meta))


def _messages(where: _Where, messages: object) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise where.error("messages", "must be a non-empty list")
    open_calls: set[str] = set()
    out = []
    for k, m in enumerate(messages):
        at = f"messages[{k}]"
        if not isinstance(m, dict):
            raise where.error(at, f"expected an object, got {type(m).__name__}")
        role = m.get("role")
        if role is None:
            raise where.error(f"{at}.role", "missing")
        if role not in ROLES:
            raise where.error(f"{at}.role", f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
        calls = m.get("tool_calls")
        if calls is not None:
            if role != "assistant":
                raise where.error(f"{at}.tool_calls", f"only assistant messages carry tool calls, not {role}")
            open_calls |= _check_calls(where, at, calls)
        content = m.get("content")
        if not (isinstance(content, str) or (content is None and calls)):
            raise where.error(f"{at}.content", "must be a string (null only on an assistant message with tool_calls)")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise where.error(f"{at}.tool_call_id", "missing (a tool message answers an assistant tool call)")
            if call_id not in open_calls:
                raise where.error(f"{at}.tool_call_id", f"{call_id!r} answers no earlier assistant tool call")
        out.append(dict(m))
    return out


def _check_calls(where: _Where, at: str, calls: object) -> set[str]:
    if not isinstance(calls, list) or not calls:
        raise where.error(f"{at}.tool_calls", "must be a non-empty list")
    ids = set()
    for j, call in enumerate(calls):
        here = f"{at}.tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            raise where.error(f"{here}.id", "missing")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise where.error(f"{here}.function.name", "missing")
        args = fn.get("arguments")
        if not isinstance(args, str):
            raise where.error(f"{here}.function.arguments", "must be a JSON string (OpenAI format)")
        try:
            json.loads(args)
        except json.JSONDecodeError as exc:
            raise where.error(f"{here}.function.arguments", f"not valid JSON: {exc.msg}") from None
        ids.add(call["id"])
    return ids


def _check_tools(where: _Where, tools: object) -> None:
    if not isinstance(tools, list):
        raise where.error("tools", "must be a list")
    for j, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict) \
                or not isinstance(fn.get("name"), str):
            raise where.error(f"tools[{j}]", "expected {\"type\": \"function\", \"function\": {\"name\": ...}}")


def _unique_names(path: Path, prompts: tuple[Prompt, ...], label: str) -> None:
    seen: dict[str, int] = {}
    for i, p in enumerate(prompts):
        if p.name in seen:
            where = f"line {p.meta['line']}, " if "line" in p.meta else ""
            raise PromptFileError(f"{path}: {where}{label} {i} (name {p.name!r}): name: duplicate of "
                                  f"{label} {seen[p.name]}")
        seen[p.name] = i

