"""The conversations of a session level, from the cell's prompts (bench.load.sessions runs them).

Each prompt of the split (or of `--prompts FILE`: a ShareGPT file's conversations, a JSONL of
message lists, the agent split's tool-use conversations) is one conversation: its opening system
messages are every turn's history's start, its user messages the turns, in order. Its recorded
assistant and tool messages are dropped: in a session every turn's history holds the server's own
answers to the turns before it, as a chat client and an agent send them. `n` conversations are
taken in order (the prompts cycled when there are fewer), each with at most `max_turns` turns;
a prompt with no user message is passed over.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.core.sessions import Conversation
from bench.setup.prompts import Prompt

OPENING_ROLES = ("system", "developer")


def _text(content: object) -> str:
    """A message's text: a string as it is, a list of parts their text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def conversation(prompt: Prompt, max_turns: int | None = None) -> Conversation | None:
    """The prompt as a session; None where it has no user message."""
    opening = []
    for message in prompt.messages:
        if message.get("role") not in OPENING_ROLES:
            break
        opening.append({"role": message["role"], "content": message.get("content", "")})
    turns = [_text(m.get("content")) for m in prompt.messages if m.get("role") == "user"]
    turns = turns[:max_turns] if max_turns is not None else turns
    return Conversation(prompt.name, tuple(opening), tuple(turns), prompt.max_tokens) if turns else None


def conversations(prompts: Sequence[Prompt], n: int, max_turns: int | None = None) -> tuple[Conversation, ...]:
    """`n` sessions from `prompts`, in order, cycled; ValueError where no prompt has a user message."""
    usable = [c for p in prompts if (c := conversation(p, max_turns)) is not None]
    if not usable:
        raise ValueError("no prompt has a user message to open a session with")
    return tuple(usable[i % len(usable)] for i in range(n))
