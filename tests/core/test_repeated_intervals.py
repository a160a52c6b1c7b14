"""Intervals of figures measured more than once (bench.core.metrics.stats.intervals): the t quantile
against published values, and coverage of rounds and time windows on simulated runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.core.metrics.stats.intervals import rounds_interval, t_quantile, window_rates, windows_interval


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423),
                                              (1e20, 1.9600), (math.inf, 1.9600)])
def test_t_quantile_matches_the_published_tables(df: float, expected: float) -> None:
    assert t_quantile(df) == pytest.approx(expected, abs=2e-4)


def test_t_quantile_meets_the_closed_forms_and_refuses_what_it_cannot_integrate() -> None:
    """Where t has a closed form (1 df: Cauchy, tan(pi (p - 1/2)); 2 df: (2p - 1) sqrt(2 / (4p(1 - p))))
    the quantile is exact to 1e-9 at 95% and 99%, and so at a fractional (Welch) df; below 1 df
    (no caller's) it refuses rather than guess."""
    for confidence in (0.95, 0.99):
        p = (1 + confidence) / 2
        assert t_quantile(1, confidence) == pytest.approx(math.tan(math.pi * (p - 0.5)), abs=1e-9)
        assert t_quantile(2, confidence) == pytest.approx((2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p))), abs=1e-9)
    # Welch's fractional df, against the regularized incomplete beta at 30 digits (mpmath)
    for df, exact in ((1.5, 6.01666310442793), (2.7, 3.39214838317375), (7.3, 2.3450667365477),
                      (57.5, 2.00208815197951)):
        assert t_quantile(df) == pytest.approx(exact, abs=1e-9)
    assert t_quantile(1 - 1e-12) == pytest.approx(t_quantile(1))  # Welch's df of two 1-df parts, rounded
    with pytest.raises(ValueError, match="at least 1 degree of freedom"):
        t_quantile(0.5)


@pytest.mark.parametrize("rounds", [2, 3, 5])
def test_rounds_interval_covers_the_true_median_in_about_95_percent_of_runs(rounds: int) -> None:
    """Rounds whose log values spread normally (run-to-run noise, 10%): the interval around their
    median covers the true median at least 94% of the time and is not uselessly wide (<= 99.5%)."""
    rng = np.random.default_rng(rounds)
    draws = 1000
    hits = 0
    for _ in range(draws):
        values = np.exp(rng.normal(math.log(1000.0), 0.10, rounds))
        found = rounds_interval(list(values))
        assert found is not None and found["low"] is not None and found["high"] is not None
        hits += found["low"] <= 1000.0 <= found["high"]
    assert 0.94 <= hits / draws <= 0.995


def test_rounds_interval_needs_two_positive_values() -> None:
    assert rounds_interval([120.0]) is None
    assert rounds_interval([120.0, None]) is None
    assert rounds_interval([120.0, 0.0]) is None
    same = rounds_interval([50.0, 50.0, 50.0])
    assert same is not None and same["low"] == pytest.approx(50.0) and same["high"] == pytest.approx(50.0)


def test_window_rates_put_each_event_in_its_window_and_sum_to_the_whole() -> None:
    times = [0.1, 0.2, 1.5, 2.0, 3.99, 4.0]
    rates = window_rates(times, [1.0] * 6, start=0.0, end=4.0, windows=4)
    assert rates == [2.0, 1.0, 1.0, 2.0]  # the one at the end falls in the last window
    assert sum(rates) * 1.0 == pytest.approx(6.0)


def test_windows_interval_covers_a_steady_rate_and_refuses_too_few_windows() -> None:
    rng = np.random.default_rng(7)
    hits, draws = 0, 4000  # the coverage estimate's own sd: 0.35%
    for _ in range(draws):
        found = windows_interval(list(rng.normal(100.0, 8.0, 8)))
        assert found is not None and found["low"] is not None and found["high"] is not None
        hits += found["low"] <= 100.0 <= found["high"]
    assert 0.94 <= hits / draws <= 0.995
    assert windows_interval([100.0, 101.0, 99.0]) is None
