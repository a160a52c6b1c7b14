"""The caching audit (--cache-audit): where a cell runs it (hand-made cells, no server), and on the
real llama-server and the built-in tiny model.

llama-server keeps prompts' KV cache (cache_prompt), so its repeats usually come back faster; how
much faster depends on the host, so what is asserted is what holds on any host: the audit ran on
the last level only, 8 prompts twice, every figure in the block is its own TTFTs' arithmetic, and
the outcome, the annotation and REPORT.md's line agree with those figures.
"""

from __future__ import annotations

import json
import math
import statistics
from types import SimpleNamespace
from typing import Any

import pytest

from bench.core.metrics.audits import CACHE_RATIO, CACHED, cache_audit
from bench.core.metrics.stats.intervals import t_quantile
from bench.run.audits import cache
from tests.cells.test_cells_llamacpp import load_valid, result_files, run_pytest
from tests.support.busy import TEST_TIMEOUT_S, assert_ok_unless_client_limited

SEEN = cache_audit([0.1] * 8, [0.05] * 8)


def _cell(points: list[Any], *, shared: bool = False, capped: str | None = None) -> Any:
    return SimpleNamespace(cfg=SimpleNamespace(load=SimpleNamespace(cache_audit=True)),
                           summaries=[{"audits": {}} for _ in points], shared=shared, capped=capped,
                           server_exit=None, oom=None,
                           plan=SimpleNamespace(steps=lambda: [(p, 1) for p in points]), extra_body={},
                           deadline=None)


def _after(cell: Any, last_point: Any, *, sweep: bool = False) -> list[str | None]:
    cache.after_group(cell, SimpleNamespace(), "tiny", [], last_point=(last_point, 1), sweep=sweep)  # round 1
    return [lv["audits"].get("cache", {}).get("outcome") for lv in cell.summaries]


def test_only_the_cells_last_level_is_audited_and_a_cell_cut_short_says_why(monkeypatch):
    monkeypatch.setattr(cache, "audit", lambda *args, **kw: SEEN)
    assert _after(_cell([1, 4]), 1)[-1] is None  # a fresh server per level: c=4's is the last
    assert _after(_cell([1, 4]), 4) == [None, "cached"]
    assert _after(_cell([1, 4], shared=True), 4) == [None, "cached"]  # one server: its group is the cell
    capped = _cell([1, 4], capped="cell budget of 60 s reached at c=1")
    assert _after(capped, 1)[-1] == "not run"
    assert capped.summaries[-1]["audits"]["cache"]["note"].endswith("cell budget of 60 s reached at c=1")
    swept = _cell(["4 req/s", "8 req/s"])
    swept.summaries[0]["audits"]["cache"] = cache.cache_not_run(cache.SWEEP_APART)  # from its first level
    assert _after(swept, "8 req/s", sweep=True) == [None, "not run"]  # on the last level only
    assert _after(_cell(["4 req/s", "8 req/s"], shared=True), "8 req/s", sweep=True) == [None, "cached"]
    off = _cell([1])
    off.cfg.load.cache_audit = False
    assert _after(off, 1) == [None]


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_the_last_levels_server_answers_eight_prompts_twice_and_the_outcome_follows_its_figures(tmp_path,
                                                                                               llama_server):
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--cache-audit", "--concurrency", "1,2", "--requests", "4",
                      "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat")  # the audit never fails a cell
    first_level, last_level = result["levels"]
    assert "cache" not in first_level["audits"], "only the cell's last level, on its own server, is audited"
    block = last_level["audits"]["cache"]
    assert (block["prompts"], block["pairs"]) == (8, 8), block  # every audit request answered
    assert len(block["first_ttft_ms"]) == len(block["repeat_ttft_ms"]) == 8
    logs = [math.log(r / f) for f, r in zip(block["first_ttft_ms"], block["repeat_ttft_ms"], strict=True)]
    half = t_quantile(7) * statistics.stdev(logs) / math.sqrt(8)
    # the block's figures are its TTFTs' (kept to the microsecond, so to about 1e-3 relative)
    assert block["ratio"] == pytest.approx(math.exp(statistics.fmean(logs)), rel=1e-2)
    assert block["ratio_ci95"]["high"] == pytest.approx(math.exp(statistics.fmean(logs) + half), rel=1e-2)
    assert block["first_median_ms"] == pytest.approx(statistics.median(block["first_ttft_ms"]), abs=1e-3)
    assert block["outcome"] == ("cached" if block["ratio_ci95"]["high"] <= CACHE_RATIO else "no cache seen")
    assert (CACHED in result["verdict"]["annotations"]) is (block["outcome"] == "cached")
    # the audit's 16 requests are not measured ones: the sidecar holds the levels' requests only
    records = (path.parent / result["requests_file"]).read_text().splitlines()
    assert sum(not json.loads(line)["warmup"] for line in records) == 8
    report = (path.parent / "REPORT.md").read_text()
    assert f"- llamacpp: c=2: cache audit {block['outcome']}: {block['note']}" in report
    (journal,) = path.parent.parent.glob("weekly_*.journal.md")
    assert f"- llamacpp / chat: c=2: cache audit {block['outcome']}: " in journal.read_text()
