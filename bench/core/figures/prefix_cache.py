"""How much of a level's prompts its server took from its prefix cache, as the server told each
request (docs/metrics.md, Prefix-cache hits).

OpenAI's usage block may carry `prompt_tokens_details.cached_tokens`: of the request's prompt
tokens, those its server did not compute again. Over the level's successful requests that say
it, `hit_share` = Σ cached_tokens / Σ prompt_tokens. Which servers send it is measured, not
assumed (docs/metrics.md); where none of the level's requests carried it the share is unknown,
and `unknown` says so. The server's own counters of the same thing, where its adapter declares
them, are in the level's `server_metrics.counters` (prefix_cache_hits, prefix_cache_queries);
`prefix_cache_agreement` sets the two side by side.
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from bench.core.crosswalk.entry import PeerMetric, none
from bench.core.figures.declare import Doc, LevelFigure, Row
from bench.core.level_run import LevelRun

NOT_SENT = "the server sent no usage.prompt_tokens_details.cached_tokens"


class PrefixCache(TypedDict):
    """A level's prompt tokens its server said it took from its prefix cache (bench.core.figures.prefix_cache)."""

    requests: Annotated[int, Doc("Successful measured requests.", minimum=0)]
    reporting: Annotated[int, Doc("Of them, those whose usage carried prompt_tokens_details.cached_tokens.", minimum=0)]
    prompt_tokens: Annotated[int, Doc("Their usage.prompt_tokens, summed.", minimum=0)]
    cached_tokens: Annotated[int, Doc("Their cached_tokens, summed.", minimum=0)]
    hit_share: Annotated[float | None, Doc("cached_tokens / prompt_tokens; null where no request said.", minimum=0,
                                           maximum=1)]
    unknown: Annotated[str | None, Doc("Why hit_share is unknown; null where it is known.")]


def measure(run: LevelRun) -> PrefixCache | None:
    ok = [r for r in run.records if r.ok]
    if not ok:
        return None
    told = [r for r in ok if r.usage_cached_tokens is not None and r.usage_prompt_tokens is not None]
    prompt = sum(r.usage_prompt_tokens or 0 for r in told)
    cached = sum(r.usage_cached_tokens or 0 for r in told)
    return {"requests": len(ok), "reporting": len(told), "prompt_tokens": prompt, "cached_tokens": cached,
            "hit_share": cached / prompt if prompt else None, "unknown": None if told else NOT_SENT}


def _pool(blocks: list[PrefixCache]) -> PrefixCache:
    """The rounds' tokens summed, and the share of the sums."""
    requests, reporting, prompt, cached = (sum(b[k] for b in blocks) for k in
                                           ("requests", "reporting", "prompt_tokens", "cached_tokens"))
    return {"requests": requests, "reporting": reporting, "prompt_tokens": prompt, "cached_tokens": cached,
            "hit_share": cached / prompt if prompt else None, "unknown": None if reporting else NOT_SENT}


_KEY = "prefix_cache.hit_share"
FIGURE = LevelFigure(
    key="prefix_cache",
    block=PrefixCache,
    description=("The share of the level's prompt tokens its server said it took from its prefix cache "
                 "(usage.prompt_tokens_details.cached_tokens over usage.prompt_tokens, successful requests); across "
                 "rounds, the rounds' tokens summed (bench.core.figures.prefix_cache)."),
    measure=measure,
    pool=_pool,
    rows=(Row("hit_share", "Prefix-cache hits, as the server told each request", "share", digits=1, scale=100,
              shown_unit="%"),),
    peers={
        "vllm": (none(_KEY, "its bench reads no cached_tokens; its server's own prefix_cache_hits counter is in "
                      "/metrics", "vllm/benchmarks/serve.py"),),
        "aiperf": (PeerMetric(_KEY, "Total Usage Prompt Cache Read Tokens", "total_usage_prompt_cache_read_tokens",
                              "Sum(Usage Prompt Cache Read Tokens): each response's prompt_tokens_details."
                              "cached_tokens (or Anthropic's cache_read_input_tokens), summed over the run",
                              "different", "a count of tokens over the whole run, not a share of the prompt tokens "
                              "per level: over Total Usage Prompt Tokens it is cellbench's share",
                              "aiperf/metrics/types/usage_total_metrics.py"),),
        "guidellm": (none(_KEY, "no prefix-cache figure in its metrics schema",
                          "guidellm/benchmark/schemas/metrics.py"),),
        "siliconbench": (none(_KEY, "no prefix-cache figure", "scripts/benchmark.py"),),
    },
)
