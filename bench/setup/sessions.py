"""The conversations of a session level, from the cell's prompts or a recorded agent trace
(bench.load.sessions runs them).

Each prompt of the split (or of `--prompts FILE`: a ShareGPT file's conversations, a JSONL of
message lists, the agent split's tool-use conversations) is one conversation: its opening system
messages are every turn's history's start, its user messages the turns, in order. Its recorded
assistant and tool messages are dropped: in a session every turn's history holds the server's own
answers to the turns before it, as a chat client and an agent send them. `n` conversations are
taken in order (the prompts cycled when there are fewer), each with at most `max_turns` turns;
a prompt with no user message is passed over.

A Weka trace (`--sessions-file`, bench.setup.traces.weka) records an agent's requests by length
and shared cache blocks, not by text: each turn is made whole, to its recorded input length, from
its hash ids (bench.setup.traces.synth: equal ids, equal text, so turn k+1 opens with turn k's
prompt exactly as the recorded agent's did), with its recorded output length and think time. The
history those prompts hold is the recording's, so the server's answers are not added to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.core.sessions import Conversation
from bench.setup.prompts import Prompt
from bench.setup.traces.synth import Synthesiser
from bench.setup.traces.weka import WekaTrace

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


def conversations(prompts: Sequence[Prompt], n: int | None, max_turns: int | None = None) -> tuple[Conversation, ...]:
    """`n` sessions (None: one per usable prompt) from `prompts`, in order, cycled; ValueError where
    no prompt has a user message."""
    usable = [c for p in prompts if (c := conversation(p, max_turns)) is not None]
    if not usable:
        raise ValueError("no prompt has a user message to open a session with")
    return tuple(usable[i % len(usable)] for i in range(len(usable) if n is None else n))


def recorded(traces: Sequence[WekaTrace], synth: Synthesiser, n: int | None = None,
             max_turns: int | None = None) -> tuple[Conversation, ...]:
    """`n` sessions (None: one per trace) from Weka traces, in order, cycled; each turn's message
    checked to be its recorded input length in the model's tokens (ValueError where not)."""
    made = []
    for i, trace in enumerate(traces):
        scope = (i + 1,) if trace.scope == "local" else ()  # local ids name this trace's blocks only
        entries = trace.entries[:max_turns] if max_turns is not None else trace.entries
        texts = [synth.text(e, k, trace.block_size, scope, own=(1, i)) for k, e in enumerate(entries)]
        counts = [len(e.ids) for e in synth.tokenizer.encode_batch(texts, add_special_tokens=False)]
        for e, got in zip(entries, counts, strict=True):
            if got != e.input_tokens:  # never expected: the words are chosen so that it cannot happen
                raise ValueError(f"{trace.path} request {e.line}: the message is {got} tokens, not {e.input_tokens}")
        made.append(Conversation(trace.id, (), tuple(texts), max(e.output_tokens for e in entries), recorded=True,
                                 turn_max_tokens=tuple(e.output_tokens for e in entries),
                                 think_before_s=trace.think_s[:len(entries)]))
    count = len(made) if n is None else n
    return tuple(made[i % len(made)] for i in range(count))
