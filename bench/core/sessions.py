"""A session level's conversations as the load generator takes them (bench.load.sessions runs
them; bench.setup.sessions makes them from the cell's prompts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Conversation:
    """One session: the turns a user sends in order, each with the history so far and the server's
    own answers to the turns before it (bench.load.sessions)."""

    name: str
    system: tuple[dict, ...]  # the messages that open every turn's history (system prompts)
    turns: tuple[str, ...]  # the user's messages, in order
    max_tokens: int  # each turn's output budget
    # A recorded agent session (--sessions-file, a Weka trace): each turn is the whole prompt as
    # recorded, its history included, so the server's answers are not added to it; each turn's
    # output length and the think time recorded before it (None: not recorded).
    recorded: bool = False
    turn_max_tokens: tuple[int, ...] = ()
    think_before_s: tuple[float | None, ...] = ()

    def budget(self, k: int) -> int:
        """Turn k's max_tokens."""
        return self.turn_max_tokens[k] if self.turn_max_tokens else self.max_tokens


@dataclass(frozen=True)
class Sessions:
    """A session level: `conversations` run `concurrency` at a time (with `rate_per_s`: each one
    starting at its arrival, drawn as a Poisson process, at most `concurrency` of them at once),
    each turn after the last one's answer and the think time (`think_s`, or drawn: exponential of
    that mean, seeded per session; None: the conversation's recorded pauses, else none)."""

    conversations: tuple[Conversation, ...]
    think_s: float | None = 0.0
    think_drawn: bool = False
    header: str | None = None  # --session-header: this header names the session on every turn
    seed: int = 0
    rate_per_s: float | None = None  # --session-rate: sessions started per second; None: as slots free up

    def think(self, conv: Conversation, k: int, exponential: Callable[[float], float]) -> float:
        """The pause before turn k (k >= 1) of `conv`; `exponential(mean)` draws one."""
        if self.think_s is None:
            recorded = conv.think_before_s[k] if k < len(conv.think_before_s) else None
            return recorded or 0.0
        return float(exponential(self.think_s)) if self.think_drawn else self.think_s

    @property
    def turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations)
