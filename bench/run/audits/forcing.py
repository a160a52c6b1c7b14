"""Teacher forcing (--fidelity; docs/metrics.md, Fidelity): the reference stack's answers fed back
to this stack one token at a time, so that a near-tie of two tokens is told apart from a real
difference.

Two greedy stacks that pick different tokens at one near-tie go on from different contexts, and
their free answers share nothing after it: the first divergence alone cannot say whether the
stack would otherwise have answered as the reference did. Here, for each fidelity prompt whose
reference answer is at hand and each position k of its first AGREE_TOKENS tokens, the prompt (as
the checkpoint's chat template renders it, in the checkpoint tokenizer's ids) followed by the
reference's first k answer tokens goes to the stack's `/v1/completions` as token ids, greedy,
`max_tokens` 1: the token it picks is its top-1 where the reference's context is the context.
The share of positions where that is the reference's own token k is the stack's top-1 agreement.
A prompt whose free answer diverged from the reference's but whose forced picks disagree at one
position at most is a near-tie; more positions than that say the two compute something else.

Offered only where the server takes a prompt as token ids on `/v1/completions` and counts them as
sent (llama-server and vLLM do; mlx-lm's and vllm-mlx's take text only); the first request's
refusal (any status but 200, after one more try without `logprobs` on a 400 or 422), or a
`usage.prompt_tokens` other than the ids sent (the server added a token, a BOS: the context is
not the reference's), is recorded as not offered, with why. The token picked is read as an id
where the server gives one (llama-server's logprobs `id`, vLLM's `token_ids` with
`return_token_ids`), else compared as text with the reference token's own text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from bench.core.lenses.fidelity import AGREE_TOKENS, Answer, Forced, first_divergence, wilson
from bench.setup.prompts import Prompt

TIES = 1  # a prompt whose forced picks differ at no more positions than this is a near-tie


class NotOffered(Exception):
    """The server cannot be fed token ids (its first answer says why)."""


def _pick(response: httpx.Response, sent: int) -> tuple[int | None, str]:
    """The token a forced request picked, as an id where the server gives one, and as text."""
    if response.status_code != 200:
        raise NotOffered(f"HTTP {response.status_code} to a prompt of token ids on /v1/completions: "
                         f"{response.text[:160]}")
    body = response.json()
    counted = (body.get("usage") or {}).get("prompt_tokens")
    if counted is not None and counted != sent:
        raise NotOffered(f"it adds tokens to a prompt of token ids: {counted} counted where {sent} were sent")
    choice = body["choices"][0]
    logprobs = (choice.get("logprobs") or {}).get("content") or []
    ids = choice.get("token_ids") or [entry.get("id") for entry in logprobs]
    picked = ids[0] if ids and isinstance(ids[0], int) else None
    return picked, choice.get("text") or ""


def run(client: httpx.Client, model: str, prompts: Sequence[Prompt], ours: Sequence[Answer],
        reference: Sequence[Answer], prompt_ids: Callable[[Prompt], list[int]], decode: Callable[[int], str],
        reference_name: str) -> Forced:
    """Feed `reference`'s answers to the stack behind `client`; `ours`: its own free answers, for the
    near-ties. `prompt_ids(prompt)`: the prompt as the template renders it, in token ids."""
    theirs = {a.prompt: a for a in reference}
    own = {a.prompt: a for a in ours}
    positions = agree = 0
    differ: dict[str, list[int]] = {}
    stopped: str | None = None
    logprobs: dict[str, Any] = {"logprobs": 1}  # llama-server's answer then names the token's id
    try:
        for prompt in prompts:
            if (answer := theirs.get(prompt.name)) is None:
                continue
            head = prompt_ids(prompt)
            for k, token in enumerate(answer.tokens[:AGREE_TOKENS]):
                ids = head + list(answer.tokens[:k])
                body = {"model": model, "prompt": ids, "temperature": 0, "max_tokens": 1, "return_token_ids": True}
                try:
                    response = client.post("/v1/completions", json={**body, **logprobs})
                    if logprobs and response.status_code in (400, 422):  # it refuses logprobs (or wants a bool)
                        logprobs = {}
                        response = client.post("/v1/completions", json=body)
                except httpx.HTTPError as exc:  # the server went away or stopped answering: what was fed stands
                    raise NotOffered(f"{type(exc).__name__}: {exc}") from exc
                picked, text = _pick(response, len(ids))
                positions += 1
                if (picked == token) if picked is not None else (text == decode(token)):
                    agree += 1
                else:
                    differ.setdefault(prompt.name, []).append(k)
    except NotOffered as exc:
        if not positions:
            return {"offered": False, "note": str(exc), "reference": reference_name}
        stopped = f"stopped after {positions} positions: {exc}"
    diverged = [name for name, a in own.items() if name in theirs
                and (d := first_divergence(a, theirs[name])) is not None and d < AGREE_TOKENS]
    forced: Forced = {"offered": True, "reference": reference_name, "positions": positions, "agree": agree,
                      "agree_share": agree / positions if positions else None,
                      "agree_ci95": list(wilson(agree, positions)) if positions else None,
                      "differ": differ, "diverged": len(diverged),
                      "ties": sum(len(differ.get(name, [])) <= TIES for name in diverged)}
    if stopped:
        forced["note"] = stopped
    return forced


def template_ids(tokenizer: Any, render: Callable[[list[Mapping[str, Any]], list[Any] | None], str]
                 ) -> Callable[[Prompt], list[int]]:
    """A prompt's ids as a server applying the checkpoint's template would build them: the rendered
    text (with the generation prompt), its special tokens parsed, nothing added."""
    def ids(prompt: Prompt) -> list[int]:
        tools = list(prompt.tools) if prompt.tools is not None else None
        return list(tokenizer.encode(render(list(prompt.messages), tools), add_special_tokens=False).ids)
    return ids
