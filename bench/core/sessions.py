"""A session level's conversations as the load generator takes them (bench.load.sessions runs
them; bench.setup.sessions makes them from the cell's prompts)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Conversation:
    """One session: the turns a user sends in order, each with the history so far and the server's
    own answers to the turns before it (bench.load.sessions)."""

    name: str
    system: tuple[dict, ...]  # the messages that open every turn's history (system prompts)
    turns: tuple[str, ...]  # the user's messages, in order
    max_tokens: int  # each turn's output budget


@dataclass(frozen=True)
class Sessions:
    """A session level: `conversations` run `concurrency` at a time, each turn after the last one's
    answer and the think time (`think_s`, or drawn: exponential of that mean, seeded per session)."""

    conversations: tuple[Conversation, ...]
    think_s: float = 0.0
    think_drawn: bool = False
    header: str | None = None  # --session-header: this header names the session on every turn
    seed: int = 0

    @property
    def turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations)
