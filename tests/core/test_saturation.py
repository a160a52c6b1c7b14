"""The over-saturation rule (bench.core.figures.saturation) against simulated queues whose
capacity is known: a server of `c` places, each request taking about `service` seconds, offered
rho times what it serves on a seeded Poisson schedule. No clock and no server: the queue is
computed, then watched as the level watches it (every quarter second of simulated time)."""

from __future__ import annotations

import bisect
import heapq
import itertools

import numpy as np
import pytest

from bench.core.figures.saturation import MIN_ARRIVALS, Growth, growth
from bench.load.arrivals import arrival_offsets
from bench.run.parsing import load_plan

CHECK_S = 0.25


def simulate(rho: float, places: int, n: int, seed: int, service: float = 1.0) -> list[tuple[float, float]]:
    """(arrival, end) of each request: first come, first served on `places` places, each request's
    time `service` +- 15%."""
    arrivals = arrival_offsets(rho * places / service, 1.0, n, seed)
    jitter = np.random.default_rng(seed + 1000).random(n)
    free = [0.0] * places
    out = []
    for a, j in zip(arrivals, jitter, strict=True):
        start = max(a, heapq.heappop(free))
        end = start + service * (0.85 + 0.3 * j)
        heapq.heappush(free, end)
        out.append((a, end))
    return out


def first_stop(requests: list[tuple[float, float]]) -> tuple[float, Growth] | None:
    """When the watch would first find the queue over-saturated, and what it saw; None: never."""
    arrivals = [a for a, _ in requests]
    by_end = sorted(requests, key=lambda r: r[1])
    ends = [e for _, e in by_end]
    shortest = list(itertools.accumulate((e - a for a, e in by_end), min))  # over the first k to end
    t = CHECK_S
    while t <= ends[-1]:
        k = bisect.bisect_right(ends, t)
        found = growth(arrivals, ends[:k], t, shortest[k - 1] if k else None)
        if found.over_saturated:
            return t, found
        t += CHECK_S
    return None


@pytest.mark.parametrize("places", [1, 4])
@pytest.mark.parametrize("rho", [0.5, 0.8, 0.95])
def test_a_server_that_keeps_up_is_never_stopped(rho, places):
    stopped = [seed for seed in range(30) if first_stop(simulate(rho, places, 400, seed)) is not None]
    assert stopped == [], f"offered {rho:.0%} of what it serves, levels {stopped} were stopped"


@pytest.mark.parametrize("places", [1, 4])
@pytest.mark.parametrize(("rho", "by"), [(1.5, 0.9), (2.0, 0.35), (4.0, 0.35)])
def test_a_server_offered_far_more_than_it_serves_is_stopped_early(rho, by, places):
    """Stopped, and before `by` of its schedule has arrived (at 1.5x, half the levels by 30%)."""
    for seed in range(30):
        requests = simulate(rho, places, 400, seed)
        found = first_stop(requests)
        assert found is not None, f"offered {rho}x, level {seed} ran to its end"
        at, growth_seen = found
        last_arrival = requests[-1][0]
        assert at <= by * last_arrival, f"offered {rho}x, level {seed} stopped only at {at / last_arrival:.0%}"
        assert growth_seen.arrived >= MIN_ARRIVALS and growth_seen.grew >= 0.25 * growth_seen.arrived
        assert "over-saturated" in growth_seen.text() and f"grew by {growth_seen.grew}" in growth_seen.text()


def test_a_burst_shorter_than_the_servers_filling_is_not_judged():
    """Arrivals that all fall within a few request times of the start say nothing of a steady
    queue: the window never opens past the filling, however the queue looks."""
    arrivals = [i * 0.01 for i in range(200)]  # 2 s of arrivals, each request taking 1 s
    ends = [1.0 + i for i in range(3)]
    found = growth(arrivals, ends, 10.0, 1.0)
    assert (found.start_s, found.end_s) == (arrivals[-1] / 2, arrivals[-1]), "judged up to the last arrival"
    assert not found.settled and not found.over_saturated


def test_nothing_ended_yet_is_not_judged():
    assert not growth([0.1 * i for i in range(400)], [], 30.0, None).over_saturated


def test_the_stop_is_for_open_loop_levels_and_every_sweep_has_it():
    with pytest.raises(ValueError, match="closed-loop levels have no queue to grow"):
        load_plan(None, slo="ttft_p90=1s", stop_over_saturated=True)
    asked = load_plan("4,8", stop_over_saturated=True)
    assert asked is not None and asked.stops_over_saturated
    fixed = load_plan("4,8")
    assert fixed is not None and not fixed.stops_over_saturated, "fixed rates run to their end unless asked"
    swept = load_plan("sweep", slo="ttft_p90=1s")
    assert swept is not None and swept.stops_over_saturated
