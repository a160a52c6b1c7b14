"""A level's audits (docs/metrics.md, Audits): checks that the numbers mean what they say, each an
outcome with its figures in the level's `audits` block, and an annotation of the cell when it fires
(bench.core.annotations.annotations_for); an audit never changes a verdict.

- `token_accounting`: the server's usage.completion_tokens against the chunks it streamed;
- `output_length`: with ignore_eos sent, every successful request ran to its max_tokens;
- `cache` (--cache-audit, the cell's last level only): N prompts sent again after their first
  time, their TTFT against the first (`cache_audit`; bench.run.audits.cache sends them).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict

import numpy as np

from bench.base.doc import Doc
from bench.core.level_run import level_label, levels_text
from bench.core.metrics.stats.intervals import t_quantile
from bench.core.records import RequestRecord

DIVERGENCE_BAND = (0.95, 1.05)  # completion_tokens / chunks outside it: the request diverges
DIVERGENCE_WARN_FRACTION = 0.05  # above this share of diverging requests, token accounting diverges
TOKEN_ACCOUNTING = "token-accounting"  # the annotations of a fired audit
SHORT_OUTPUT = "short-output"
CACHED = "cached"
CACHE_PROMPTS = 8  # prompts of the cache audit, each sent twice
CACHE_MIN_PAIRS = 4  # fewer prompts with a TTFT both times give no interval worth deciding on (t(0.975, 2) = 4.3)
CACHE_RATIO = 0.9  # repeats at least 10% faster: the interval's upper end at or below it means `cached`
NOT_SENT = ("ignore_eos not sent: neither --ignore-eos nor the profile's ignore_eos asked for it, so each "
            "request ends where the model stops and output lengths differ by design")


class TokenAccounting(TypedDict):
    """The token accounting audit (bench.core.metrics.audits.token_accounting): usage.completion_tokens against
    output chunks over the successful requests that reported usage and had a chunk; it diverges when more than
    5% of them lie outside 0.95-1.05 tokens per chunk (annotation token-accounting)."""

    outcome: Annotated[Literal["pass", "diverges", "no usage"], Doc("pass, diverges, or no usage (no successful "
                                                                    "request reported usage.completion_tokens).")]
    requests: Annotated[int, Doc("Successful requests compared: with usage.completion_tokens and at least one output "
                                 "chunk.", minimum=0)]
    diverging: Annotated[int, Doc("Compared requests whose completion_tokens / chunks lies outside 0.95-1.05.",
                                  minimum=0)]
    fraction: Annotated[float | None, Doc("diverging / requests; null with no usage.", minimum=0)]
    usage_tokens: Annotated[int | None, Doc("Sum of usage.completion_tokens over the compared requests; null with no "
                                            "usage.", minimum=0)]
    chunks: Annotated[int, Doc("Sum of output chunks over the compared requests.", minimum=0)]
    note: Annotated[str | None, Doc("What the outcome means for the numbers, when it diverges or there is no usage; "
                                    "null on a pass.")]


class OutputLength(TypedDict):
    """The output length audit (bench.core.metrics.audits.output_length): with ignore_eos sent, whether every
    successful request produced the max_tokens its body asked for (output tokens by usage where reported, else
    chunks); stopped short with any that did not (annotation short-output)."""

    outcome: Annotated[Literal["honoured", "stopped short", "not applicable"], Doc("honoured, stopped short, or not "
                                                                                   "applicable (ignore_eos not sent, "
                                                                                   "no max_tokens recorded, or no "
                                                                                   "successful request: the note says "
                                                                                   "which).")]
    ignore_eos: Annotated[bool, Doc("The level's requests carried ignore_eos: true.")]
    requests: Annotated[int, Doc("Successful requests checked (those that recorded their max_tokens); 0 when not "
                                 "applicable.", minimum=0)]
    short: Annotated[int, Doc("Checked requests with fewer output tokens than their max_tokens.", minimum=0)]
    max_tokens_min: Annotated[int | None, Doc("The smallest max_tokens a checked request asked for; null when not "
                                              "applicable.", minimum=0)]
    max_tokens_max: Annotated[int | None, Doc("The largest max_tokens a checked request asked for; null when not "
                                              "applicable.", minimum=0)]
    short_min_tokens: Annotated[int | None, Doc("The fewest output tokens of a short request; null with none.",
                                                minimum=0)]
    short_median_tokens: Annotated[float | None, Doc("The median output tokens of the short requests; null with none.",
                                                     minimum=0)]
    short_finish_reasons: Annotated[dict[str, Annotated[int, Doc(minimum=1)]],
                                    Doc("Short requests per finish_reason (\"None\" where none came).")]
    tokens_source: Annotated[str | None, Doc("How the checked requests' output tokens were counted: usage, chunks or "
                                             "mixed; null when not applicable.",
                                             enum=['usage', 'chunks', 'mixed', None])]
    note: Annotated[str | None, Doc("Why the audit does not apply, or how the requests stopped short; null when "
                                    "honoured.")]


class RatioInterval(TypedDict):
    """The 95% interval of the cache audit's ratio."""

    low: Annotated[float, Doc("The lower end.", minimum=0)]
    high: Annotated[float, Doc("The upper end; at or below 0.9: cached.", minimum=0)]


class CacheAudit(TypedDict):
    """The caching audit (--cache-audit; bench.run.audits.cache, decided by
    bench.core.metrics.audits.cache_audit), in the cell's last level only: 8 prompts opened by a fresh nonce
    sent at concurrency 1 on that level's server, then the same 8 bodies again; cached when the upper end of the
    95% interval of the geometric mean of the prompts' repeat/first TTFT ratios is at or below 0.9 (annotation
    cached). Absent without --cache-audit."""

    outcome: Annotated[Literal["cached", "no cache seen", "not run"], Doc("cached, no cache seen, or not run (the cell"
                                                                          " stopped early, a pass stopped, fewer than "
                                                                          "4 pairs: the note says which).")]
    prompts: Annotated[int, Doc("Prompts sent in each pass (8); 0 when the audit was not started.", minimum=0)]
    pairs: Annotated[int, Doc("Prompts with a TTFT in both passes: the pairs the ratio is made of.", minimum=0)]
    first_ttft_ms: Annotated[list[Annotated[float | None, Doc(minimum=0)]], Doc(
        "Each prompt's TTFT (ms) the first time, in the order sent; null where that request failed or had no "
        "token; empty when not started.")]
    repeat_ttft_ms: Annotated[list[Annotated[float | None, Doc(minimum=0)]], Doc(
        "Each prompt's TTFT (ms) when sent again with the same body, in the same order as first_ttft_ms.")]
    first_median_ms: Annotated[float | None, Doc("The median first TTFT of the pairs (ms); null when not run.",
                                                 minimum=0)]
    repeat_median_ms: Annotated[float | None, Doc("The median repeat TTFT of the pairs (ms); null when not run.",
                                                  minimum=0)]
    ratio: Annotated[float | None, Doc("The geometric mean of the pairs' repeat/first TTFT ratios, exp(mean of their "
                                       "logs); below 1: repeats are faster. Null when not run.", minimum=0)]
    ratio_ci95: Annotated[RatioInterval | None, Doc("The ratio's 95% interval: exp(mean -/+ t(0.975, pairs - 1) * sd /"
                                                    " sqrt(pairs)) of the log ratios (a paired Student t interval on "
                                                    "the log scale); null when not run.")]
    note: Annotated[str, Doc("What the audit saw, in words, or why it was not run.")]


class _AuditsRequired(TypedDict):
    token_accounting: Annotated[TokenAccounting, Doc("The token accounting audit "
                                                     "(bench.core.metrics.audits.token_accounting): "
                                                     "usage.completion_tokens against output chunks over the "
                                                     "successful requests that reported usage and had a chunk; it "
                                                     "diverges when more than 5% of them lie outside 0.95-1.05 tokens "
                                                     "per chunk (annotation token-accounting).")]
    output_length: Annotated[OutputLength, Doc("The output length audit (bench.core.metrics.audits.output_length): "
                                               "with ignore_eos sent, whether every successful request produced the "
                                               "max_tokens its body asked for (output tokens by usage where reported, "
                                               "else chunks); stopped short with any that did not (annotation "
                                               "short-output).")]


class Audits(_AuditsRequired, total=False):
    """The level's audits (bench.core.metrics.audits; docs/metrics.md, Audits): checks that its numbers mean
    what they say. An audit that fires annotates the cell and never changes its verdict. Absent from results
    written before the audits."""

    cache: Annotated[CacheAudit, Doc("The caching audit (--cache-audit; bench.run.audits.cache, decided by "
                                     "bench.core.metrics.audits.cache_audit), in the cell's last level only: 8 prompts"
                                     " opened by a fresh nonce sent at concurrency 1 on that level's server, then the "
                                     "same 8 bodies again; cached when the upper end of the 95% interval of the "
                                     "geometric mean of the prompts' repeat/first TTFT ratios is at or below 0.9 "
                                     "(annotation cached). Absent without --cache-audit.")]


def compared(ok: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The successful requests with usage.completion_tokens and at least one output chunk."""
    return [r for r in ok if r.usage_completion_tokens is not None and r.n_chunks]


def diverges(r: RequestRecord) -> bool:
    """completion_tokens / chunks of a compared request lies outside DIVERGENCE_BAND."""
    low, high = DIVERGENCE_BAND
    return not low <= (r.usage_completion_tokens or 0) / r.n_chunks <= high


def token_accounting(ok: Sequence[RequestRecord]) -> TokenAccounting:
    """outcome = "no usage" when no successful request reported usage.completion_tokens (with a
    chunk), else "diverges" when more than 5% of those that did diverge, else "pass"; usage_tokens
    and chunks are their sums over the compared requests."""
    with_usage = compared(ok)
    if not with_usage:
        return {"outcome": "no usage", "requests": 0, "diverging": 0, "fraction": None, "usage_tokens": None,
                "chunks": 0, "note": "no successful request reported usage.completion_tokens: output tokens are "
                                     "chunk counts, and TPOT and throughput count chunks too"}
    n, bad = len(with_usage), sum(1 for r in with_usage if diverges(r))
    tokens, chunks = sum(r.usage_completion_tokens or 0 for r in with_usage), sum(r.n_chunks for r in with_usage)
    fraction = bad / n
    fired = fraction > DIVERGENCE_WARN_FRACTION
    note = (f"{bad} of {n} successful requests ({fraction:.0%}) report usage.completion_tokens outside "
            f"{DIVERGENCE_BAND[0]}-{DIVERGENCE_BAND[1]}x their chunks ({tokens} tokens in {chunks} chunks): "
            "per-request ITL is per chunk and not comparable across frameworks; TTFT, TPOT and throughput "
            "are (TPOT and throughput count usage tokens)") if fired else None
    return {"outcome": "diverges" if fired else "pass", "requests": n, "diverging": bad, "fraction": fraction,
            "usage_tokens": tokens, "chunks": chunks, "note": note}


def _not_applicable(ignore_eos: bool, checked: int, why: str) -> OutputLength:
    return {"outcome": "not applicable", "ignore_eos": ignore_eos, "requests": checked, "short": 0,
            "max_tokens_min": None, "max_tokens_max": None, "short_min_tokens": None, "short_median_tokens": None,
            "short_finish_reasons": {}, "tokens_source": None, "note": why}


def output_length(ok: Sequence[RequestRecord], *, ignore_eos: bool, not_sent: str = NOT_SENT) -> OutputLength:
    """With ignore_eos sent, a successful request is short when its output tokens (usage where
    reported, else chunks) are fewer than the max_tokens its body asked for; outcome "stopped
    short" with any, "honoured" with none, "not applicable" (and why) without ignore_eos, without
    a recorded max_tokens or without a successful request."""
    if not ignore_eos:
        return _not_applicable(False, 0, not_sent)
    checked = [r for r in ok if r.max_tokens is not None]
    if not checked:
        why = "no successful request" if not ok else "no successful request recorded the max_tokens it asked for"
        return _not_applicable(True, 0, why)
    short = [r for r in checked if r.output_tokens < (r.max_tokens or 0)]
    asked = [r.max_tokens or 0 for r in checked]
    sources = {r.tokens_source for r in checked}
    block: OutputLength = {
        "outcome": "stopped short" if short else "honoured", "ignore_eos": True, "requests": len(checked),
        "short": len(short), "max_tokens_min": min(asked), "max_tokens_max": max(asked),
        "short_min_tokens": min((r.output_tokens for r in short), default=None),
        "short_median_tokens": float(statistics.median(r.output_tokens for r in short)) if short else None,
        "short_finish_reasons": dict(Counter(str(r.finish_reason) for r in short)),
        "tokens_source": sources.pop() if len(sources) == 1 else "mixed", "note": None}
    if short:
        wanted = f"{min(asked)}" if min(asked) == max(asked) else f"{min(asked)}-{max(asked)}"
        finishes = ", ".join(f"{k} x{v}" for k, v in block["short_finish_reasons"].items())
        block["note"] = (f"{len(short)} of {len(checked)} successful requests stopped short of max_tokens ({wanted}) "
                         f"though ignore_eos was sent: fewest {block['short_min_tokens']} output tokens, median "
                         f"{block['short_median_tokens']:g} (by {block['tokens_source']}; finish_reason {finishes})")
    return block


def level_audits(ok: Sequence[RequestRecord], extra_body: Mapping[str, Any], *, not_sent: str = NOT_SENT) -> Audits:
    """Both audits of a level's successful requests; ignore_eos counts as sent when the requests'
    extra body carried it true."""
    return {"token_accounting": token_accounting(ok),
            "output_length": output_length(ok, ignore_eos=bool(extra_body.get("ignore_eos")), not_sent=not_sent)}


def cache_not_run(why: str, prompts: int = 0) -> CacheAudit:
    """The cache audit's block when it could not be made, and why."""
    return {"outcome": "not run", "prompts": prompts, "pairs": 0, "first_ttft_ms": [], "repeat_ttft_ms": [],
            "first_median_ms": None, "repeat_median_ms": None, "ratio": None, "ratio_ci95": None, "note": why}


def _ms(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else round(v * 1000, 3) for v in values]


def cache_audit(first: Sequence[float | None], repeat: Sequence[float | None]) -> CacheAudit:
    """Prompt i's TTFT (s; None where it failed or had no token) sent first (`first[i]`) and
    then again with the same body (`repeat[i]`). Paired, on the log scale: the ratio is the
    geometric mean of the prompts' own repeat/first ratios, exp(mean of the log ratios), and its
    95% interval exp(mean -/+ t(0.975, n - 1) * sd / sqrt(n)) (Student t, sd with ddof 1).
    `cached` when the interval's upper end is at or below 0.9: the repeats are at least 10% faster
    beyond what chance in these pairs explains. `no cache seen` otherwise; `not run` with fewer
    than 4 pairs."""
    pairs = [(f, r) for f, r in zip(first, repeat, strict=True) if f and r]
    if len(pairs) < CACHE_MIN_PAIRS:
        return {**cache_not_run(f"{len(pairs)} of {len(first)} prompts had a TTFT both times; the audit needs "
                                f"{CACHE_MIN_PAIRS}", len(first)),
                "pairs": len(pairs), "first_ttft_ms": _ms(first), "repeat_ttft_ms": _ms(repeat)}
    logs = np.log([r / f for f, r in pairs])
    centre = float(np.mean(logs))
    half = t_quantile(len(pairs) - 1) * float(np.std(logs, ddof=1)) / math.sqrt(len(pairs))
    low, high = math.exp(centre - half), math.exp(centre + half)
    cached = high <= CACHE_RATIO
    said = (f"{len(first)} prompts sent twice at c=1 on this level's server: the repeats' TTFT {math.exp(centre):.2f}x "
            f"their first [{low:.2f}, {high:.2f}] (geometric mean of {len(pairs)} paired ratios, 95% interval)")
    note = (f"{said}: the server answers a repeated prompt from a cache, so a benchmark that repeats "
            "prompts measures the cache" if cached else
            f"{said}: not shown to be at least 10% faster (the interval's upper end is above {CACHE_RATIO})")
    return {"outcome": "cached" if cached else "no cache seen", "prompts": len(first), "pairs": len(pairs),
            "first_ttft_ms": _ms(first), "repeat_ttft_ms": _ms(repeat),
            "first_median_ms": round(float(np.median([f for f, _ in pairs])) * 1000, 3),
            "repeat_median_ms": round(float(np.median([r for _, r in pairs])) * 1000, 3),
            "ratio": math.exp(centre), "ratio_ci95": {"low": low, "high": high}, "note": note}


# ------------------------------------------------------------------ what the cell and the reports say


def fired(levels: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The annotations of the audits that fired in some level: token-accounting, short-output, cached."""
    outcomes = {(name, block["outcome"]) for lv in levels for name, block in (lv.get("audits") or {}).items()}
    return tuple(note for note, key in ((TOKEN_ACCOUNTING, ("token_accounting", "diverges")),
                                        (SHORT_OUTPUT, ("output_length", "stopped short")),
                                        (CACHED, ("cache", "cached"))) if key in outcomes)


_TITLES = {"token_accounting": "token accounting", "output_length": "output length", "cache": "cache audit"}
_FIRED = ("diverges", "stopped short", "cached", "no cache seen")  # the cache audit's line says what it saw


def audit_lines(levels: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per level whose audit fired ("c=4: output length stopped short: 3 of 9 ..."), and
    one per audit that could not be made, with the levels it could not be made at; a level without
    a successful request has nothing audited (its failures are the verdict's business)."""
    lines: list[str] = []
    unmade: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for lv in levels:
        if not lv.get("successful"):
            continue
        for name, block in (lv.get("audits") or {}).items():
            if block["outcome"] in _FIRED:
                lines.append(f"{level_label(lv)}: {_TITLES[name]} {block['outcome']}: {block['note']}")
            elif block["outcome"] in ("no usage", "not applicable", "not run"):
                unmade.setdefault((name, block["outcome"], block["note"]), []).append(lv)
    lines += [f"{levels_text(at)}: {_TITLES[name]} {outcome}: {note}" for (name, outcome, note), at in unmade.items()]
    return lines
