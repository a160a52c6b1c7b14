"""The caching audit (--cache-audit) on the real llama-server and the built-in tiny model.

llama-server keeps prompts' KV cache (cache_prompt), so its repeats usually come back faster; how
much faster depends on the host, so what is asserted is what holds on any host: the audit ran on
the last level only, 8 prompts twice, every figure in the block is its own TTFTs' arithmetic, and
the outcome, the annotation and REPORT.md's line agree with those figures.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest

from bench.core.metrics.audits import CACHE_RATIO, CACHED
from bench.core.metrics.uncertainty import t_quantile
from tests.cells.test_cells_llamacpp import load_valid, result_files, run_pytest
from tests.support.busy import TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]


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
    (journal,) = path.parent.parent.glob("journal_*.md")
    assert f"- llamacpp / chat: c=2: cache audit {block['outcome']}: " in journal.read_text()
