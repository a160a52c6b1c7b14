"""Reasoning models: the thinking a level's requests streamed before their answers.

A reasoning model (Qwen3, DeepSeek-R1) streams its thinking as `delta.reasoning_content`
(llama-server, SGLang, older vLLM) or `delta.reasoning` (newer vLLM), then its answer as
`delta.content` or tool calls. TTFT ends at the first reasoning delta, as vLLM's own client
measures it; TTFA, the time to the first answer delta, is defined beside it in
`bench.core.metrics.requests.ttfa` (its level statistics are the metric table's `ttfa_ms`).
Here: which requests reasoned, how many of their chunks were reasoning, the server's reasoning
token counts, and the level block that holds them, present (with `ttfa_ms`) only when a
successful request of the level reasoned (docs/metrics.md, "Reasoning models").
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Annotated, TypedDict

from bench.base.doc import Doc
from bench.core.records import RequestRecord


class Reasoning(TypedDict):
    """A reasoning model's thinking over the level's successful requests
    (bench.core.metrics.reasoning.reasoning_summary); only when one of them reasoned."""

    requests: Annotated[int, Doc("Successful requests that reasoned: a reasoning chunk, or reasoning tokens in their "
                                 "usage.", minimum=1)]
    unanswered: Annotated[int, Doc("Successful requests whose answer never came (reasoning, then the finish): they "
                                   "have no TTFA.", minimum=0)]
    chunks_total: Annotated[int, Doc("Output chunks that arrived before each request's first answer chunk (all of them"
                                     " without an answer); a lower bound where a read carried reasoning and answer "
                                     "together.", minimum=0)]
    answer_chunks_total: Annotated[int, Doc("The other output chunks of the successful requests: "
                                            "reasoning.chunks_total + answer_chunks_total = the level's chunks_total.",
                                            minimum=0)]
    tokens_total: Annotated[int | None, Doc("Sum of usage.completion_tokens_details.reasoning_tokens (part of the "
                                            "output tokens); null unless every successful request reported it.",
                                            minimum=0)]
    tokens_mean: Annotated[float | None, Doc("tokens_total per successful request; null with it.", minimum=0)]


class Reasoned(TypedDict, total=False):
    reasoning: Reasoning  # with `ttfa_ms`, when a successful request reasoned


def reasoning_chunks(r: RequestRecord) -> int:
    """Reasoning chunks = output chunks that arrived before the first answer chunk (chunk times
    earlier than t_first_answer); every output chunk when no answer came.

    Chunks are stamped per socket read: reasoning events that arrived in the same read as the
    first answer event carry its stamp and count as answer chunks, so where a server's events
    coalesce this is a lower bound (usage's reasoning tokens, when reported, are exact)."""
    if r.t_first_answer is None:
        return r.n_chunks
    return bisect_left(r.chunk_times, r.t_first_answer)


def reasoned(r: RequestRecord) -> bool:
    """The request streamed reasoning: a reasoning chunk, or reasoning tokens in its usage."""
    return reasoning_chunks(r) > 0 or bool(r.usage_reasoning_tokens)


def reasoning_tokens_total(ok: Sequence[RequestRecord]) -> int | None:
    """Σ usage.completion_tokens_details.reasoning_tokens, None unless every successful request
    reported it (llama-server reports none)."""
    counts = [r.usage_reasoning_tokens for r in ok]
    if not counts or any(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None)


def reasoning_summary(ok: Sequence[RequestRecord]) -> Reasoning | None:
    """The level's `reasoning` block for successful requests `ok` of which at least one
    reasoned, else None (a level of a model that does not reason is unchanged: no `reasoning`,
    no `ttfa_ms`).

    requests = successful requests that reasoned; unanswered = successful requests whose answer
    never came (reasoning, then the finish: they have no TTFA and did not fail); chunks_total =
    Σ reasoning chunks, answer_chunks_total = the rest of the output chunks; tokens_total =
    `reasoning_tokens_total`, tokens_mean = tokens_total / successful requests."""
    thinking = sum(1 for r in ok if reasoned(r))
    if not thinking:
        return None
    chunks = sum(map(reasoning_chunks, ok))
    tokens = reasoning_tokens_total(ok)
    return {
        "requests": thinking,
        "unanswered": sum(1 for r in ok if r.t_first_answer is None),
        "chunks_total": chunks,
        "answer_chunks_total": sum(r.n_chunks for r in ok) - chunks,
        "tokens_total": tokens,
        "tokens_mean": None if tokens is None else tokens / len(ok),
    }
