"""Prefix-cache hits per level (bench.core.figures.prefix_cache, prefix_cache_agreement): what a
server told each request in usage.prompt_tokens_details.cached_tokens, summed into a share, and
that share beside the server's own counters, with why they differ where they do."""

from __future__ import annotations

from typing import Any

import pytest

from bench.core.figures.declare import Prices
from bench.core.figures.prefix_cache import NOT_SENT, measure
from bench.core.figures.prefix_cache_agreement import derive
from bench.core.level_run import ClientHealth, LevelConfig, LevelRun
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.core.sse.chunk import apply_usage


def _record(i: int, prompt: int, cached: int | None, *, ok: bool = True) -> RequestRecord:
    rec = RequestRecord(index=i, prompt_name=f"p{i}", warmup=False, t_sched=0.0)
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": 8}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    apply_usage(usage, rec)
    if not ok:
        rec.error = RequestError(ErrorType.HTTP_5XX, "boom")
    return rec


def _run(records: list[RequestRecord]) -> LevelRun:
    return LevelRun(LevelConfig("http://127.0.0.1:1", "m", 1, len(records)), records, [], 0.0, 1.0, 0.0, False,
                    None, ClientHealth(0.1, 1.0, 0.5))


def test_the_usage_cached_tokens_are_read_and_summed_into_a_share():
    rec = _record(0, 300, 256)
    assert rec.usage_cached_tokens == 256 and rec.to_json()["usage_cached_tokens"] == 256
    assert "usage_cached_tokens" not in _record(1, 300, None).to_json(), "a line without it is as it always was"
    block = measure(_run([_record(0, 300, 0), _record(1, 300, 256), _record(2, 300, 288), _record(3, 300, 9,
                                                                                                   ok=False)]))
    assert block is not None and (block["requests"], block["reporting"]) == (3, 3)
    assert (block["prompt_tokens"], block["cached_tokens"]) == (900, 544), "failed requests are left out"
    assert block["hit_share"] == pytest.approx(544 / 900) and block["unknown"] is None


def test_a_server_that_sends_no_cached_tokens_is_unknown_not_zero():
    block = measure(_run([_record(0, 300, None), _record(1, 300, None)]))
    assert block is not None and block["hit_share"] is None and block["unknown"] == NOT_SENT


def _level(usage_share: float | None, hits: float | None, queries: float | None, **more: Any) -> dict[str, Any]:
    level: dict[str, Any] = {"failed": 0, "warmup": {"requests": 0}, **more}
    if usage_share is not None or "unknown" in more:
        level["prefix_cache"] = {"requests": 10, "reporting": 10, "prompt_tokens": 1000,
                                 "cached_tokens": int(1000 * (usage_share or 0)), "hit_share": usage_share,
                                 "unknown": more.get("unknown")}
    if queries is not None:
        level["server_metrics"] = {"includes_warmup": True,
                                   "counters": {"prefix_cache_hits": hits, "prefix_cache_queries": queries}}
    return level


def test_usage_and_counters_that_agree_say_so():
    block = derive(_level(0.60, 610.0, 1000.0), Prices())
    assert block is not None and block["agree"] and block["difference"] == pytest.approx(-0.01) and block["why"] == []


def test_a_difference_is_explained_by_what_each_side_covers():
    block = derive(_level(0.60, 600.0, 1300.0, warmup={"requests": 3}, failed=2), Prices())
    assert block is not None and block["agree"] is False
    assert block["why"] == ["the counters include the level's 3 warm-up requests, the usage share does not",
                            "the counters include the level's 2 failed requests"]


def test_either_side_unknown_is_said():
    no_counters = derive(_level(0.6, None, None), Prices())
    assert no_counters is not None and no_counters["agree"] is None
    assert no_counters["why"] == ["the server publishes no prefix-cache counters"]
    no_usage = derive(_level(None, 600.0, 1000.0, unknown=NOT_SENT), Prices())
    assert no_usage is not None and no_usage["counters_share"] == pytest.approx(0.6) and no_usage["why"] == [NOT_SENT]
    assert derive({"failed": 0}, Prices()) is None, "neither measured: no block"
