"""Each percentile's distribution-free 95% interval (bench.core.metrics.stats.intervals): the ranks
against a binomial computed by hand, its coverage in samples of a distribution whose quantiles
are known, the stats blocks and the schema that carry it, REPORT.md and the HTML review that show
it, and docs/metrics.md's table of the n each percentile needs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from statistics import NormalDist
from typing import cast

import jsonschema
import numpy as np
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.metrics import PERCENTILES, stats_block
from bench.core.metrics import table as metric_table
from bench.core.metrics.stats.intervals import binomial_tails, intervals, needs_n, ranks, sorted_percentile
from bench.core.result.files import read_result, validate
from bench.core.result.model import Result
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.markdown import INTERVALS_NOTE, write_report
from bench.reports.review import columns
from tests.reports.test_report import table as report_table
from tests.support.results import Spec, put, synthetic_result, write_cell


def binomial_cdf(n: int, p: float, k: int) -> float:
    """P(B <= k), B ~ Binomial(n, p), term by term."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


# ------------------------------------------------------------------ the ranks, by hand


def test_the_binomial_tails_are_the_binomials():
    for n, p in ((1, 0.5), (10, 0.5), (32, 0.9), (300, 0.99)):
        below, at_least = binomial_tails(n, p)
        for k in range(n + 2):
            assert below[k] == pytest.approx(binomial_cdf(n, p, k - 1) if k else 0.0, abs=1e-12)
            assert at_least[k] == pytest.approx(1 - binomial_cdf(n, p, k - 1) if k else 1.0, abs=1e-12)


def test_the_median_of_ten_values_is_bounded_by_the_2nd_and_the_9th():
    # P(B <= 1) = 11/1024 <= 2.5% < P(B <= 2) = 56/1024: l = 2; and u = 9 by symmetry
    assert binomial_cdf(10, 0.5, 1) == 11 / 1024 and binomial_cdf(10, 0.5, 2) == 56 / 1024
    assert ranks(10, 50) == (2, 9)  # covers 1 - 2 x 11/1024 = 97.9%
    assert intervals(list(range(10, 0, -1)))["p50"] == {"low": 2.0, "high": 9.0}  # of the sorted values


def test_six_values_bound_the_median_and_five_do_not():
    assert ranks(6, 50) == (1, 6)  # min and max miss 2 / 64 = 3.1%
    assert ranks(5, 50) is None  # 2 / 32 = 6.25% > 5%
    assert intervals([3.0, 1.0, 2.0, 5.0, 4.0])["p50"] == {"low": None, "high": None, "needs_n": 6}


def test_where_one_tail_cannot_be_2_5_percent_the_extreme_value_takes_it():
    # the p90 of 32: all 32 below it with 0.9^32 = 3.43% > 2.5%, so u = 32 and the lower tail
    # gets the rest: l = 25, the highest with P(B < l) <= 5% - 3.43%
    assert 0.9 ** 32 > 0.025
    budget = 0.05 - 0.9 ** 32
    assert binomial_cdf(32, 0.9, 24) <= budget < binomial_cdf(32, 0.9, 25)  # 1.17% <= 1.57% < 3.58%
    assert ranks(32, 90) == (25, 32)  # covers 1 - 1.17% - 3.43% = 95.4%


def test_each_percentile_needs_the_n_its_extremes_allow():
    # ranks 1 and n miss (1-p)^n + p^n; equal tails need each <= 2.5% (p99: 0.99^368 <= 0.025 < 0.99^367)
    assert [needs_n(q) for q in PERCENTILES] == [6, 29, 59, 299]
    assert [needs_n(q, equal_tails=True) for q in PERCENTILES] == [6, 36, 72, 368]
    assert 0.99 ** 367 > 0.025 >= 0.99 ** 368 and 0.99 ** 298 > 0.05 >= 0.99 ** 299
    for q in PERCENTILES:
        assert ranks(needs_n(q) - 1, q) is None
        assert all(ranks(n, q) is not None for n in range(needs_n(q), needs_n(q) + 200))


def test_every_interval_covers_95_percent_and_holds_its_point_value():
    rng = np.random.default_rng(7)
    for n in range(1, 400):
        sample = rng.exponential(size=n)
        block = stats_block(sample.tolist())
        for q in PERCENTILES:
            found = ranks(n, q)
            if found is None:
                assert n < needs_n(q)
                continue
            low, high = found
            below, at_least = binomial_tails(n, q / 100)
            assert 1 <= low < high <= n and 1 - below[low] - at_least[high] >= 0.95
            ci = block["ci95"][f"p{q}"]
            assert ci["low"] is not None and ci["high"] is not None
            assert ci["low"] <= block[f"p{q}"] <= ci["high"]


# ------------------------------------------------------------------ coverage, by simulation

MU, SIGMA = math.log(200.0), 0.6  # a lognormal latency, median 200 ms
DRAWS = 1000


@pytest.mark.parametrize("n", [32, 100, 300])
def test_the_intervals_cover_a_lognormals_true_percentiles(n):
    ordered = np.sort(np.random.default_rng(20261201 + n).lognormal(MU, SIGMA, size=(DRAWS, n)), axis=1)
    for q in PERCENTILES:
        found = ranks(n, q)
        if found is None:
            assert n < needs_n(q)
            assert intervals(ordered[0])[f"p{q}"] == {"low": None, "high": None, "needs_n": needs_n(q)}
            continue
        true = math.exp(MU + SIGMA * NormalDist().inv_cdf(q / 100))
        low, high = ordered[:, found[0] - 1], ordered[:, found[1] - 1]
        coverage = float(np.mean((low <= true) & (true <= high)))
        assert 0.94 <= coverage <= 0.995, f"p{q} at n={n}: {coverage:.3f}"
        assert intervals(ordered[0])[f"p{q}"] == {"low": low[0], "high": high[0]}


def test_32_values_bound_p50_and_p90_and_not_p99():
    bounded = {q: ranks(32, q) is not None for q in PERCENTILES}
    assert bounded == {50: True, 90: True, 95: False, 99: False}
    assert intervals(np.arange(32.0))["p99"] == {"low": None, "high": None, "needs_n": 299}


# ------------------------------------------------------------------ the result


def test_every_stats_block_of_a_level_carries_its_intervals_and_validates():
    result = synthetic_result()
    validate(result)
    blocks = [lv[m.key] for lv in result["levels"] for m in metric_table.METRICS if m.key in lv]
    assert blocks and all(set(block["ci95"]) == {f"p{q}" for q in PERCENTILES} for block in blocks)
    ttft = result["levels"][0]["ttft_ms"]  # 8 requests: the median bounded, the p99 not
    assert ttft["ci95"]["p50"]["low"] is not None and ttft["ci95"]["p99"] == {"low": None, "high": None,
                                                                             "needs_n": 299}


@pytest.mark.parametrize("interval", [{"low": None, "high": 1.0}, {"low": 1.0, "high": 2.0, "needs_n": 6},
                                      {"low": 1.0, "high": None}, {"low": 1.0}])
def test_the_schema_refuses_a_half_interval(interval):
    """Both ends or neither ({"low": null, "high": null}: rounds whose values the log scale cannot take)."""
    result = synthetic_result()
    result["levels"][0]["ttft_ms"]["ci95"]["p50"] = interval
    with pytest.raises(jsonschema.ValidationError):
        validate(result)


def without_intervals(result: Result) -> Result:
    """`result` as a cellbench before intervals wrote it: no stats block has a ci95, no level a
    throughput interval or the basis of its intervals."""
    plain = json.loads(json.dumps(result))
    for lv in plain["levels"]:
        lv.pop("throughput_ci95", None)
        lv.pop("uncertainty", None)
        for block in lv.values():
            if isinstance(block, dict):
                block.pop("ci95", None)
    return cast(Result, plain)


def test_a_result_without_intervals_stays_valid():
    validate(without_intervals(synthetic_result()))


# ------------------------------------------------------------------ the reports


def test_report_md_shows_each_percentile_with_its_interval_or_the_n_it_needs(tmp_path: Path):
    path = write_cell(tmp_path / "results", Spec(requests=8))
    level = read_result(path)["levels"][0]
    text = write_report(path.parent, read_comparison(write_comparison(path.parent, machine="intelxeonprocessor")))
    report = text.read_text()
    rows = report_table(report, "Concurrency 1")
    ttft = level["ttft_ms"]
    ci = ttft["ci95"]["p50"]
    assert rows["TTFT p50 (ms)"] == [f"{ttft['p50']:.1f} [{ci['low']:.1f}, {ci['high']:.1f}]"]
    assert rows["TTFT p99 (ms)"] == [f"{ttft['p99']:.1f} (n<299)"]
    assert rows["TTFT avg (ms)"] == [f"{ttft['mean']:.1f}"]  # a mean has no interval
    low, high = level["e2el_ms"]["ci95"]["p50"]["low"], level["e2el_ms"]["ci95"]["p50"]["high"]
    assert low is not None and high is not None
    assert rows["Latency p50 (s)"][0].endswith(f" [{low / 1000:.2f}, {high / 1000:.2f}]")  # in seconds, as the row
    assert report.count(INTERVALS_NOTE) == 1
    html = columns._level_table([level])
    assert f"<td>{ttft['p50']:.1f} [{ci['low']:.1f}, {ci['high']:.1f}]</td>" in html


def test_a_result_written_before_intervals_shows_bare_values(tmp_path: Path):
    path = write_cell(tmp_path / "results")
    earlier = without_intervals(read_result(path))
    put(path.parent, earlier)
    report = write_report(path.parent, read_comparison(write_comparison(path.parent, machine="intelxeonprocessor")))
    text = report.read_text()
    rows = report_table(text, "Concurrency 1")
    assert rows["TTFT p50 (ms)"] == [f"{earlier['levels'][0]['ttft_ms']['p50']:.1f}"]
    assert INTERVALS_NOTE not in text
    assert "[" not in columns._level_table(earlier["levels"])


# ------------------------------------------------------------------ docs/metrics.md


def test_the_docs_table_of_the_n_each_percentile_needs_is_the_codes():
    page = (PROJECT_ROOT / "docs" / "metrics.md").read_text()
    section = page.split("## How sure a percentile is\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| p(\d+) \| (\d+) \| (\d+) \|$", section, re.M)
    assert [(int(q), int(n), int(equal)) for q, n, equal in rows] == [
        (q, needs_n(q), needs_n(q, equal_tails=True)) for q in PERCENTILES]


def test_a_percentile_read_off_sorted_values_is_numpys_to_the_last_bit() -> None:
    """`effective_n` reads the percentile of values it has sorted at its rank instead of calling
    np.percentile (a partition of all of them): the very same float, or the values counted below
    it could differ by one."""
    rng = np.random.default_rng(8)
    for size in [*range(1, 40), 101, 12_000]:
        ordered = np.sort(rng.lognormal(1.0, 1.0, size))
        ordered[size // 2:size // 2 + 2] = ordered[size // 2]  # ties, as clipped gaps give
        for q in (0, 1, 12.5, 50, 90, 95, 99, 99.9, 100):
            assert sorted_percentile(ordered, q) == float(np.percentile(ordered, q)), (size, q)
