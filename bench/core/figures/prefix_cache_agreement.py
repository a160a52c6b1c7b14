"""A level's prefix-cache hits as its server told each request and as its own counters count them,
side by side, and why they differ where they do (docs/metrics.md, Prefix-cache hits).

The two: `prefix_cache.hit_share` (Σ usage cached_tokens / Σ usage prompt_tokens over the
level's successful requests) and the counters' share (the increase of the server's
prefix_cache_hits over that of its prefix_cache_queries across the level, `server_metrics`). One
server counts both from the same per-request number (vLLM: a request's cached tokens are what its
hits counter adds), so they differ only by what each covers: the counters' scrapes bracket the
level's warm-up requests too (`server_metrics.includes_warmup`), and they count failed and
cancelled requests, while the usage shares count the measured successful ones. Beyond TOLERANCE
(2 points) the block says which of these applies; where either side is unknown it says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

from bench.core.crosswalk.entry import none
from bench.core.figures.declare import Doc, LevelFigure, Prices, Row, by_field, median

TOLERANCE = 0.02  # shares: two percentage points


class PrefixCacheAgreement(TypedDict):
    """The prefix-cache hit share from usage and from the server's counters
    (bench.core.figures.prefix_cache_agreement)."""

    usage_share: Annotated[float | None, Doc("prefix_cache.hit_share; null where the server sent no cached_tokens.",
                                             minimum=0, maximum=1)]
    counters_share: Annotated[float | None, Doc("The server's prefix_cache_hits over prefix_cache_queries, their "
                                                "increases over the level; null where it publishes none.", minimum=0,
                                                maximum=1)]
    difference: Annotated[float | None, Doc("usage_share - counters_share; null where either is unknown.")]
    agree: Annotated[bool | None, Doc("Within 2 percentage points; null where either is unknown.")]
    why: Annotated[list[str], Doc("Where they differ or one is unknown: what each covers, one line each.")]


def _counters(level: Mapping[str, Any]) -> tuple[float | None, float | None, bool]:
    block = level.get("server_metrics") or {}
    counters = block.get("counters") or {}
    return counters.get("prefix_cache_hits"), counters.get("prefix_cache_queries"), bool(block.get("includes_warmup"))


def derive(level: Mapping[str, Any], prices: Prices) -> PrefixCacheAgreement | None:
    usage = level.get("prefix_cache")
    hits, queries, with_warmup = _counters(level)
    if usage is None and queries is None:
        return None  # neither side measured (an imported level, a cell from before either)
    usage_share = usage.get("hit_share") if usage else None
    counters_share = hits / queries if hits is not None and queries else None
    why: list[str] = []
    if usage_share is None:
        why.append((usage or {}).get("unknown") or "no usage figure for the level")
    if counters_share is None:
        why.append("the server publishes no prefix-cache counters" if queries is None
                   else "the server's counters looked nothing up over the level")
    difference = None if usage_share is None or counters_share is None else usage_share - counters_share
    agree = None if difference is None else abs(difference) <= TOLERANCE
    if agree is False:
        warmup = (level.get("warmup") or {}).get("requests") or 0
        if with_warmup and warmup:
            why.append(f"the counters include the level's {warmup} warm-up requests, the usage share does not")
        if level.get("failed"):
            why.append(f"the counters include the level's {level['failed']} failed requests")
        if usage and usage["reporting"] < usage["requests"]:
            why.append(f"{usage['requests'] - usage['reporting']} of the successful requests sent no cached_tokens")
        if len(why) == 0:
            why.append("neither warm-up, failures nor missing counts explain it: the two count different things")
    return {"usage_share": usage_share, "counters_share": counters_share, "difference": difference, "agree": agree,
            "why": why}


FIGURE = LevelFigure(
    key="prefix_cache_agreement",
    block=PrefixCacheAgreement,
    description=("The level's prefix-cache hit share from the requests' usage and from the server's own counters, "
                 "side by side, with why they differ beyond 2 points (bench.core.figures.prefix_cache_agreement)."),
    derive=derive,
    pool=by_field({"usage_share": median, "counters_share": median, "difference": median,
                   "agree": lambda values: None if None in values else all(values),
                   "why": lambda lists: sorted(set(sum(lists, [])))}),
    rows=(Row("difference", "Prefix-cache hits, as told less as counted", "share", digits=1, scale=100,
              shown_unit="points"),),
    peers={tool: (none("prefix_cache_agreement.difference", "no such comparison", source),)
           for tool, source in (("vllm", "vllm/benchmarks/serve.py"), ("aiperf", "aiperf/metrics/types/"),
                                ("guidellm", "guidellm/benchmark/schemas/metrics.py"),
                                ("siliconbench", "scripts/benchmark.py"))},
)
