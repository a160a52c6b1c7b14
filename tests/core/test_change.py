"""Comparisons as decisions (bench.core.metrics.stats.change): how often identical runs are called a
change (at most the 5% the interval allows), whether a real one is found, the direction of
better per figure, and the cases where the data cannot tell."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from bench.core.metrics.stats.change import FIGURES, FloorSpread, compare_levels, estimate, judge
from bench.core.metrics.stats.intervals import rounds_interval
from bench.core.metrics.stats.statistics import stats_block

BY_KEY = {f.key: f for f in FIGURES}
TPS, TTFT50, TTFT99, DECODE50 = (BY_KEY[k] for k in ("output_throughput_tps", "ttft_ms.p50", "ttft_ms.p99",
                                                    "decode_tps.p50"))


def one_round(rng: np.random.Generator, n: int, ttft_ms: float, tps: float, run_sd: float = 0.0) -> dict[str, Any]:
    """A level of one round: n lognormal TTFTs around `ttft_ms` and a rate with a within-run
    interval of +-10%, both shifted by this run's own noise (log sd `run_sd`)."""
    shift = math.exp(rng.normal(0.0, run_sd)) if run_sd else 1.0
    rate = tps * shift / (1 - 0.5 * rng.normal(0, 0.03))
    return {"concurrency": 8, "ttft_ms": stats_block(list(rng.lognormal(math.log(ttft_ms / 1000 * shift), 0.4, n))),
            "output_throughput_tps": rate,
            "throughput_ci95": {"output_throughput_tps": {"low": rate * 0.9, "high": rate * 1.1}}}


def with_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The combined level of the rounds contract: medians, rounds_interval, every round kept."""
    rates = [r["output_throughput_tps"] for r in rounds]
    p50s = [r["ttft_ms"]["p50"] for r in rounds]
    return {"concurrency": 8, "rounds": rounds, "output_throughput_tps": float(np.median(rates)),
            "throughput_ci95": {"output_throughput_tps": rounds_interval(rates)},
            "ttft_ms": {"p50": float(np.median(p50s)), "ci95": {"p50": rounds_interval(p50s)}}}


@pytest.mark.sim
def test_identical_runs_are_called_a_change_at_most_as_often_as_the_interval_allows() -> None:
    """1,000 pairs of identical 3-round runs with 8% run-to-run noise: output tok/s and TTFT p50
    are judged a change in at most 6% of pairs (5% nominal, plus simulation noise)."""
    rng = np.random.default_rng(11)
    called = {TPS.key: 0, TTFT50.key: 0}
    for _ in range(1000):
        old, new = (with_rounds([one_round(rng, 32, 50.0, 2000.0, run_sd=0.08) for _ in range(3)]) for _ in "on")
        for c in compare_levels(old, new):
            if c.figure.key in called:
                called[c.figure.key] += c.decision != "no detectable change"
    assert all(n / 1000 <= 0.06 for n in called.values()), called


@pytest.mark.sim
def test_a_30_percent_throughput_loss_is_a_regression_and_a_gain_an_improvement() -> None:
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(200):
        old = with_rounds([one_round(rng, 32, 50.0, 2000.0, run_sd=0.05) for _ in range(3)])
        new = with_rounds([one_round(rng, 32, 50.0, 1400.0, run_sd=0.05) for _ in range(3)])
        tps = next(c for c in compare_levels(old, new) if c.figure == TPS)
        found += tps.decision == "regression"
        back = next(c for c in compare_levels(new, old) if c.figure == TPS)
        assert back.decision in ("improvement", "no detectable change")
    assert found / 200 >= 0.8


def test_a_single_round_is_judged_within_run_and_says_so() -> None:
    rng = np.random.default_rng(5)
    old, new = one_round(rng, 100, 50.0, 2000.0), one_round(rng, 100, 80.0, 2000.0)
    ttft = next(c for c in compare_levels(old, new) if c.figure == TTFT50)
    assert ttft.decision == "regression" and ttft.basis == "within-run"
    assert ttft.low is not None and ttft.low > 0 and ttft.change == pytest.approx(new["ttft_ms"]["p50"]
                                                                                   / old["ttft_ms"]["p50"] - 1)


def test_direction_of_better_follows_the_figure() -> None:
    """Lower is better for a latency, higher for a rate (decode tok/s included)."""
    def side(v: float, se: float = 0.01) -> Any:
        return estimate({"decode_tps": {"p50": v, "ci95": {"p50": {"low": v * math.exp(-1.96 * se),
                                                                   "high": v * math.exp(1.96 * se)}}},
                         "ttft_ms": {"p50": v, "ci95": {"p50": {"low": v * math.exp(-1.96 * se),
                                                                "high": v * math.exp(1.96 * se)}}}},
                        DECODE50)
    assert judge(DECODE50, side(100.0), side(130.0)).decision == "improvement"
    assert judge(TTFT50, side(100.0), side(130.0)).decision == "regression"


def test_what_the_data_cannot_tell_is_said_not_guessed() -> None:
    rng = np.random.default_rng(9)
    old, new = one_round(rng, 32, 50.0, 2000.0), one_round(rng, 32, 50.0, 2000.0)
    p99 = next(c for c in compare_levels(old, new) if c.figure == TTFT99)
    assert p99.decision == "cannot tell" and "needs at least 299 requests" in (p99.why or "")
    before_intervals = {"concurrency": 8, "output_throughput_tps": 1900.0}
    tps = next(c for c in compare_levels(before_intervals, new) if c.figure == TPS)
    assert tps.decision == "cannot tell" and tps.why is not None and "written before intervals" in tps.why
    assert tps.text().startswith("cannot tell: old:")


def test_no_detectable_change_says_the_smallest_change_it_could_have_seen() -> None:
    rng = np.random.default_rng(2)
    old, new = one_round(rng, 100, 50.0, 2000.0), one_round(rng, 100, 50.0, 2000.0)
    tps = next(c for c in compare_levels(old, new) if c.figure == TPS)
    assert tps.decision == "no detectable change"
    assert tps.detectable == pytest.approx(math.exp(1.96 * math.hypot(*(math.log(1.1 / 0.9) / 3.92,) * 2)) - 1,
                                           rel=1e-3)
    assert "could detect" in tps.text()


def test_a_noise_floor_larger_than_the_within_run_spread_widens_the_interval() -> None:
    """Within-run, a 12% loss looks certain; the machine's floor (10% between runs) says it is not."""
    level = {"concurrency": 8, "output_throughput_tps": 1000.0,
             "throughput_ci95": {"output_throughput_tps": {"low": 990.0, "high": 1010.0}}}
    lower = {**level, "output_throughput_tps": 880.0,
             "throughput_ci95": {"output_throughput_tps": {"low": 871.0, "high": 889.0}}}
    assert judge(TPS, estimate(level, TPS), estimate(lower, TPS)).decision == "regression"
    floor = FloorSpread(log_sd=0.10, runs=6, measured_at="2026-12-01")
    judged = judge(TPS, estimate(level, TPS, floor), estimate(lower, TPS, floor))
    assert judged.decision == "no detectable change"
    assert judged.basis == "noise floor of 2026-12-01 (6 runs)"


def test_an_itl_interval_that_takes_every_gap_as_independent_is_not_judged_but_a_floor_can() -> None:
    """A request's chunk gaps move together: an ITL interval written before intervals counted them
    together (no `effective_n`: each gap an independent value) is far too narrow to judge by; a
    noise floor can judge it."""
    itl50 = BY_KEY["itl_ms.p50"]
    level = {"concurrency": 8, "itl_ms": {"p50": 20.0, "ci95": {"p50": {"low": 19.98, "high": 20.02}}}}
    slower = {"concurrency": 8, "itl_ms": {"p50": 20.1, "ci95": {"p50": {"low": 20.08, "high": 20.12}}}}
    judged = judge(itl50, estimate(level, itl50), estimate(slower, itl50))
    assert judged.decision == "cannot tell" and "chunk gap" in (judged.why or "")
    floor = FloorSpread(log_sd=0.05, runs=5, measured_at="2026-12-01")
    assert judge(itl50, estimate(level, itl50, floor), estimate(slower, itl50, floor)).decision == \
        "no detectable change"
