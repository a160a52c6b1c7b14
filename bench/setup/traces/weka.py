"""Agentic sessions recorded as Weka KV-cache-tester traces, read for `--sessions-file`.

The format (the kv-cache-tester project's, and the corpus behind SemiAnalysis' AgentX traces that
NVIDIA AIPerf replays): one JSON object per conversation, `{"id", "models", "block_size",
"hash_id_scope": "local"|"global", "requests": [...]}`. Each request is an API call of the
conversation's main agent, `{"t": s, "type": "n"|"s", "model", "in": tokens, "out": tokens,
"hash_ids": [...], "think_time": s, ...}`: `t` seconds from the conversation's start, `in` the whole
prompt's length (the history included), `hash_ids` one id per `block_size` tokens of it, so a turn
whose list opens with the previous turn's ids carries that history, as the agent's cache saw it;
`think_time` the client's pause before sending it. `{"type": "subagent", "requests": [...]}`
entries are sub-conversations the agent spawned; cellbench replays the main agent's requests and
counts the subagents it leaves out (the published no-subagent corpus has none).

Every request is checked: a bad one raises `TraceError` naming the file and the request, since a
wrong trace silently replayed would measure a load nobody asked for.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.setup.traces.parse import TraceEntry, TraceError, _count, _number

WEKA = "weka"
SCOPES = ("local", "global")


@dataclass(frozen=True)
class WekaTrace:
    """One recorded conversation: its main agent's requests in order (`TraceEntry.line` is the
    request's 1-based position in the file's `requests`), the think time recorded before each."""

    path: Path
    id: str
    sha256: str  # of the file's bytes
    block_size: int  # tokens per hash id
    scope: str  # "local": hash ids name blocks of this conversation only; "global": of every conversation
    entries: tuple[TraceEntry, ...]
    think_s: tuple[float | None, ...]  # the recorded pause before each request; None where not recorded
    subagents: int  # subagent entries not replayed

    @property
    def name(self) -> str:
        return self.id


def is_weka(data: Any) -> bool:
    """Whether a parsed JSON document has a Weka trace's shape (a conversation with `requests`)."""
    return isinstance(data, dict) and "requests" in data and "block_size" in data


def load_weka(path: Path) -> tuple[WekaTrace, ...]:
    """The traces in `path`: one file, or every `*.json` of a folder in name order."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise TraceError(f"{path}: no *.json trace file in this folder")
    return tuple(_one(f) for f in files)


def _one(path: Path) -> WekaTrace:
    try:
        data = path.read_bytes()
        doc = json.loads(data)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not a JSON document ({exc})") from None
    if not is_weka(doc):
        raise TraceError(f"{path}: not a Weka trace: a JSON object with block_size and requests")
    block = _count(doc["block_size"], f"{path}: block_size")
    scope = doc.get("hash_id_scope", "local")
    if scope not in SCOPES:
        raise TraceError(f"{path}: hash_id_scope is local or global, got {scope!r}")
    if not isinstance(doc["requests"], list):
        raise TraceError(f"{path}: requests is a list")
    entries: list[TraceEntry] = []
    think: list[float | None] = []
    subagents = 0
    for n, req in enumerate(doc["requests"], 1):
        where = f"{path}: request {n}"
        kind = req.get("type") if isinstance(req, dict) else None
        if kind == "subagent":
            subagents += 1
            continue
        if kind not in ("n", "s"):
            raise TraceError(f"{where}: type is n, s or subagent, got {kind!r}")
        missing = [k for k in ("t", "in", "out") if k not in req]
        if missing:
            raise TraceError(f"{where}: missing {', '.join(missing)}")
        ids = req.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise TraceError(f"{where}: hash_ids is a list of whole numbers, got {ids!r}")
        n_in = _count(req["in"], f"{where}: in")
        if len(ids) > math.ceil(n_in / block):
            raise TraceError(f"{where}: {len(ids)} hash_ids of {block} tokens each are more blocks than "
                             f"in={n_in} fills")
        t = _number(req["t"], f"{where}: t (seconds)")
        if entries and t < entries[-1].offset_s:
            raise TraceError(f"{where}: t goes back in time (before request {entries[-1].line}'s)")
        entries.append(TraceEntry(t, n_in, _count(req["out"], f"{where}: out"), tuple(ids), n))
        pause = req.get("think_time")
        think.append(None if pause is None else _number(pause, f"{where}: think_time (seconds)"))
    if not entries:
        raise TraceError(f"{path}: no request of the main agent to replay"
                         + (f" ({subagents} subagent entries)" if subagents else ""))
    return WekaTrace(path, str(doc.get("id") or path.stem), hashlib.sha256(data).hexdigest(), block, scope,
                     tuple(entries), tuple(think), subagents)
