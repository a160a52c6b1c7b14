"""The fidelity lens: do two stacks serving one checkpoint answer alike? (docs/metrics.md, Fidelity)

A fidelity run sends a fixed set of prompts, greedy (temperature 0) and with a fixed `max_tokens`,
twice (bench.run.audits.fidelity), and keeps each answer as the checkpoint's tokenizer splits it.
Two sets of answers to the same prompts are compared prompt by prompt:

- the **first divergence**: the index of the first token where the two answers differ; an answer
  that ends (EOS) where the other goes on diverges at its end; two identical answers have none;
- per set, the share of prompts whose answers agree through their first `AGREE_TOKENS` tokens
  (both ended identically before it counts as agreeing), with its 95% interval (Wilson), the share
  identical as a whole, and the median first divergence with its distribution-free 95% interval
  (an identical answer counts as diverging at its length: censored, so the median is "at least"
  where half or more are identical).

A stack's answers are compared with a reference stack's (another framework serving the same
checkpoint) and with its own second pass: a greedy stack that differs from itself is
nondeterministic (batching, atomics), which bounds how alike two stacks can look. A stack is
flagged (`fidelity`, bench.core.annotations) when it diverges from the reference within
AGREE_TOKENS on more prompts than the reference diverges from its own second pass, beyond chance:
a one-sided Fisher exact test at 5% on the two counts of the same prompts.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypedDict

import numpy as np

from bench.base.doc import Doc
from bench.core.metrics.stats.blocks import PercentileInterval
from bench.core.metrics.stats.intervals import bound_text, interval

AGREE_TOKENS = 16  # "identical to N tokens": the first this many tokens of both answers agree
MAX_TOKENS = 32  # each fidelity request's max_tokens
ALPHA = 0.05  # the one-sided test that flags a stack


@dataclass(frozen=True)
class Answer:
    """One answer: its prompt, its tokens (ids of the checkpoint's tokenizer), how it ended."""

    prompt: str
    tokens: tuple[int, ...]
    finish_reason: str | None = None


def first_divergence(a: Answer, b: Answer) -> int | None:
    """The first token index where `a` and `b` differ (one ending where the other goes on is a
    difference at its end); None where they are identical."""
    for i, (x, y) in enumerate(zip(a.tokens, b.tokens, strict=False)):
        if x != y:
            return i
    return None if len(a.tokens) == len(b.tokens) else min(len(a.tokens), len(b.tokens))


class Agreement(TypedDict):
    """How one set of answers agrees with another, prompt by prompt (bench.core.lenses.fidelity)."""

    prompts: Annotated[int, Doc("Prompts both sets answered.", minimum=0)]
    agree_tokens: Annotated[int, Doc("N of `agree_share`: the tokens that must agree.", minimum=1)]
    agree: Annotated[int, Doc("Prompts whose answers agree through their first N tokens.", minimum=0)]
    agree_share: Annotated[float | None, Doc("agree / prompts; null without prompts.", minimum=0, maximum=1)]
    agree_ci95: Annotated[list[float] | None, Doc("The share's 95% interval (Wilson), [low, high].")]
    identical: Annotated[int, Doc("Prompts whose answers are identical as a whole.", minimum=0)]
    median_divergence: Annotated[float | None, Doc(
        "The median, over the prompts, of the first differing token's index (an identical answer counts at its "
        "length); null without prompts.", minimum=0)]
    median_ci95: Annotated[PercentileInterval | None, Doc("The median's distribution-free 95% interval (order "
                                                          "statistics); null ends with needs_n where the prompts "
                                                          "are too few to bound it.")]
    divergences: Annotated[list[int | None], Doc("Each prompt's first differing token, in the prompts' order; null "
                                                 "where identical.")]


def agreement(ours: Sequence[Answer], theirs: Sequence[Answer], agree_tokens: int = AGREE_TOKENS) -> Agreement:
    """`ours` against `theirs`, over the prompts both answered (matched by prompt name)."""
    by_name = {a.prompt: a for a in theirs}
    pairs = [(a, by_name[a.prompt]) for a in ours if a.prompt in by_name]
    divergences = [first_divergence(a, b) for a, b in pairs]
    at = [len(a.tokens) if d is None else d for d, (a, _) in zip(divergences, pairs, strict=True)]
    agree = sum(d is None or d >= agree_tokens for d in divergences)
    n = len(pairs)
    return {"prompts": n, "agree_tokens": agree_tokens, "agree": agree, "agree_share": agree / n if n else None,
            "agree_ci95": list(wilson(agree, n)) if n else None,
            "identical": sum(d is None for d in divergences),
            "median_divergence": float(statistics.median(at)) if at else None,
            "median_ci95": interval(np.sort(np.asarray(at, dtype=float)), 50) if at else None,
            "divergences": divergences}


def read_answers(path: Path, first_pass: bool = True) -> list[Answer]:
    """The answers of one pass from an answers file ([] where it cannot be read)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    wanted = 1 if first_pass else 2
    found = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed run
        if entry.get("pass") == wanted:
            found.append(Answer(entry["prompt"], tuple(entry["tokens"]), entry.get("finish_reason")))
    return found


def in_words(block: Fidelity, framework: str, vs: Agreement | None = None, is_flagged: bool = False, *,
             brief: bool = False) -> str:
    """A stack's fidelity as a report's cell says it: "16/16 alike to 16 tokens vs hf_transformers, median
    divergence 32 [32, 32]", "(flagged)" where it is, its agreement with itself where not whole, or why
    there is no comparison. `vs`: its answers against the reference's (None: none to compare). `brief`:
    without the median, for a sentence."""
    reference, own = block["reference_framework"], block["self"]
    itself = f"itself: {own['agree']}/{own['prompts']} alike to {own['agree_tokens']} tokens"
    if "error" in block:
        return "none: " + block["error"]
    if framework == reference:
        return f"the reference; {itself}"
    if vs is None:
        return f"no answers of {reference} to compare"
    median = "—" if vs["median_divergence"] is None else f"{vs['median_divergence']:.0f}"
    bound = bound_text({"ci95": {"m": vs["median_ci95"]}}, "m", ".0f")
    said = f"{vs['agree']}/{vs['prompts']} alike to {vs['agree_tokens']} tokens vs {reference}"
    return (said + ("" if brief else f", median divergence {median}{bound}") + (" (flagged)" if is_flagged else "")
            + (f"; {itself}" if own["agree"] < own["prompts"] else "")
            + forced_words(block.get("forced"), reference, brief))


def forced_words(forced: Forced | None, reference: str, brief: bool = False) -> str:
    """"; fed vllm's answers, 255/256 picks alike, 1 of 1 divergent prompt a near-tie" (teacher forcing,
    bench.run.audits.forcing), or why the stack could not be fed (the note's head: the server's answer
    stays in the block); "" where it was not tried, and in a sentence (`brief`)."""
    if forced is None or brief:
        return ""
    if not forced["offered"]:
        return f"; not fed {reference}'s answers: " + forced.get("note", "").split(": ", 1)[0]
    share = f"fed {reference}'s answers, {forced.get('agree', 0)}/{forced.get('positions', 0)} picks alike"
    diverged = forced.get("diverged", 0)
    ties = f", {forced.get('ties', 0)} of {diverged} divergent prompt{'s' if diverged != 1 else ''} a near-tie"
    return f"; {share}" + (ties if diverged else "") + (f" ({forced['note']})" if "note" in forced else "")


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score 95% interval of the share k / n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def more_divergent(stack: Agreement, reference_self: Agreement) -> float:
    """The one-sided Fisher exact p-value that the stack's prompts diverge (within N tokens) from the
    reference more often than the reference's diverge from its own second pass."""
    d1, n1 = stack["prompts"] - stack["agree"], stack["prompts"]
    d2, n2 = reference_self["prompts"] - reference_self["agree"], reference_self["prompts"]
    total, diverged = n1 + n2, d1 + d2
    if n1 == 0 or n2 == 0:
        return 1.0
    denominator = math.comb(total, n1)
    return sum(math.comb(diverged, k) * math.comb(total - diverged, n1 - k)
               for k in range(d1, min(diverged, n1) + 1)) / denominator


def flagged(stack: Agreement, reference_self: Agreement) -> bool:
    """Whether the stack diverges from the reference more than the reference from itself, beyond chance."""
    return more_divergent(stack, reference_self) < ALPHA


class _ForcedRequired(TypedDict):
    offered: Annotated[bool, Doc("Whether the server could be fed the reference's tokens: it takes a prompt as token "
                                 "ids on /v1/completions and counts them as sent.")]
    reference: Annotated[str, Doc("The reference result whose answers were fed, by file name.")]


class Forced(_ForcedRequired, total=False):
    """Teacher forcing (bench.run.audits.forcing): the reference's answer tokens fed back one position at a time,
    and how often the stack's greedy pick is the reference's own next token."""

    positions: Annotated[int, Doc("Positions fed: each prompt's first N answer tokens of the reference.", minimum=0)]
    agree: Annotated[int, Doc("Positions where the stack's pick was the reference's token.", minimum=0)]
    agree_share: Annotated[float | None, Doc("agree / positions: the top-1 agreement.", minimum=0, maximum=1)]
    agree_ci95: Annotated[list[float] | None, Doc("The share's 95% interval (Wilson), [low, high].")]
    differ: Annotated[dict[str, list[int]], Doc("Per prompt, the positions where the pick differed.")]
    diverged: Annotated[int, Doc("Prompts whose free answer diverged from the reference's within N tokens.",
                                 minimum=0)]
    ties: Annotated[int, Doc("Of those, the near-ties: fed the reference's tokens, the stack picks another at one "
                             "position at most.", minimum=0)]
    note: Annotated[str, Doc("Why it is not offered, or where it stopped.")]


class _FidelityRequired(TypedDict):
    prompts: Annotated[int, Doc("Prompts sent, each twice.", minimum=0)]
    max_tokens: Annotated[int, Doc("Each request's max_tokens.", minimum=1)]
    unit: Annotated[Literal["tokens", "characters"], Doc(
        "What an answer is compared in: the checkpoint tokenizer's tokens, or characters where cellbench has no "
        "tokenizer of the profile's model.")]
    answers: Annotated[str, Doc("The answers file beside the result, by name (JSON lines: pass, prompt, text, tokens, "
                                "finish_reason, margins).")]
    logprobs: Annotated[bool, Doc("Whether the server returned logprobs (then each answer has its tokens' top-2 "
                                  "margins).")]
    self: Annotated[Agreement, Doc("The first pass against the second: how far the stack differs from itself.")]
    reference_framework: Annotated[str, Doc("The framework its answers are compared with (--fidelity-reference).")]


class Fidelity(_FidelityRequired, total=False):
    """The fidelity run (--fidelity, bench.run.audits.fidelity): the stack's greedy answers against its own second
    pass and against the reference stack's."""

    reference: Annotated[str, Doc("The reference result the answers were compared with, by file name.")]
    vs_reference: Annotated[Agreement, Doc("This stack's first pass against the reference's first pass.")]
    flagged: Annotated[bool, Doc("It diverges from the reference more than the reference from itself, beyond chance "
                                 "(bench.core.lenses.fidelity.flagged): the cell is annotated `fidelity`.")]
    note: Annotated[str, Doc("Why there is no comparison with the reference (none in the folder yet, ...).")]
    error: Annotated[str, Doc("Why the run stopped: the server's answer to a fidelity request.")]
    forced: Annotated[Forced, Doc("The reference's answers fed back to the stack (teacher forcing), where the "
                                  "reference's answers were at hand when the cell ran.")]
