"""An SLO verdict with confidence (bench.core.metrics.stats.attainment): by hand at the edges, and
over many simulated levels of known latency distributions, where `met` may be wrong in at most 5%
of the levels whose true attainment misses the target."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from bench.core.metrics.stats.attainment import bound, decide, decides_at, overall, verdict


def test_a_p99_slo_needs_299_requests_all_within_to_be_met():
    assert decide(299, 299, 0.99) == "met"  # 0.99^299 = 4.95%
    assert decide(298, 298, 0.99) == "cannot tell"  # 0.99^298 = 5.00%: not yet
    assert decides_at(298, 298, 0.99) == 299
    assert decides_at(100, 100, 0.99) == 299  # a level of 100 can never be met on p99
    assert decide(0, 30, 0.90) == "missed" and decide(25, 30, 0.90) == "cannot tell"
    assert decide(0, 0, 0.90) == "cannot tell" and decides_at(0, 0, 0.90) is None
    assert decides_at(90, 100, 0.90) is None  # the share is the target itself: no count decides it


def test_the_bounds_are_clopper_pearson():
    # k = n: the lower bound is 0.05^(1/n); k = 0: the upper bound is 1 - 0.05^(1/n)
    assert bound(50, 50, "low") == pytest.approx(0.05 ** (1 / 50), abs=1e-5)
    assert bound(0, 50, "high") == pytest.approx(1 - 0.05 ** (1 / 50), abs=1e-5)
    v = verdict(95, 100, 0.90)
    assert v["low"] is not None and v["high"] is not None and v["low"] < 0.95 < v["high"]
    assert (v["decision"] == "met") == (v["low"] >= 0.90)


def test_a_level_is_missed_where_one_slo_is_and_met_only_where_all_are():
    met, missed, unsure = verdict(300, 300, 0.99), verdict(0, 50, 0.5), verdict(45, 50, 0.9)
    assert overall([met, met]) == "met" and overall([met, missed, unsure]) == "missed"
    assert overall([met, unsure]) == "cannot tell" and overall([]) == "cannot tell"


@pytest.mark.parametrize(("sigma", "n", "target"), [(0.5, 200, 0.90), (1.2, 400, 0.99), (0.3, 60, 0.50)])
def test_met_is_wrong_in_at_most_5_percent_of_levels_that_truly_miss(sigma, n, target):
    """TTFT lognormal; the limit set where the true attainment is just under the target (the
    hardest case for the test), 4,000 levels of n requests each."""
    rng = np.random.default_rng(20261206)
    levels = 4000
    for true_share in (target - 0.002, target - 0.02):
        limit = math.exp(sigma * NormalDist().inv_cdf(true_share))  # the lognormal's true_share quantile
        within = (np.exp(rng.normal(0.0, sigma, size=(levels, n))) <= limit).sum(axis=1)
        decided = {k: decide(int(k), n, target) for k in np.unique(within)}
        wrong = sum(decided[k] == "met" for k in within) / levels
        assert wrong <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / levels), (true_share, wrong)


def test_a_level_well_within_its_slo_is_met_and_one_well_outside_is_missed():
    rng = np.random.default_rng(7)
    n, levels = 2000, 500
    limit = math.exp(NormalDist().inv_cdf(0.998))
    within = (np.exp(rng.normal(size=(levels, n))) <= limit).sum(axis=1)
    assert sum(decide(int(k), n, 0.99) == "met" for k in within) / levels > 0.95
    limit = math.exp(NormalDist().inv_cdf(0.97))
    within = (np.exp(rng.normal(size=(levels, n))) <= limit).sum(axis=1)
    assert sum(decide(int(k), n, 0.99) == "missed" for k in within) / levels > 0.95
