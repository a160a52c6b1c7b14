"""What limited a level, by the server's own queue (bench.core.metrics.client.with_server_queue)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from bench.core.annotations import client_limited
from bench.core.metrics.blocks import ClientHealthBlock
from bench.core.metrics.client import SERVER_QUEUE_MEAN, with_server_queue
from bench.core.metrics.server_view import ServerMetricsBlock

CLIENT = cast(ClientHealthBlock, {"cpu_share": 0.2, "loop_lag_p99_ms": 1.0, "schedule_lag_p99_ms": 2.0,
                                  "client_bound": False, "limited_by": None, "reasons": []})


def server(waiting: tuple[float, float] | None, queue_ms: float | None = None) -> ServerMetricsBlock:
    block: dict[str, Any] = {"path": "/metrics", "interval_s": 2.0, "includes_warmup": True, "sidecar": "s",
                             "errors": [], "scrapes": 5, "counters": {}, "histograms": {}, "gauges": {}}
    if waiting is not None:
        block["gauges"]["waiting"] = {"mean": waiting[0], "max": waiting[1], "samples": 5}
    if queue_ms is not None:
        block["histograms"]["queue"] = {"count": 20, "mean_ms": queue_ms}
    return cast(ServerMetricsBlock, block)


def test_a_server_that_queued_for_much_of_the_level_bounds_it():
    judged = with_server_queue(CLIENT, server((SERVER_QUEUE_MEAN, 3)))
    assert judged["limited_by"] == "server" and not judged["client_bound"]
    assert judged["server_queue"] == "server queue: 0.5 requests waiting on average, 3 at most"
    with_wait = with_server_queue(CLIENT, server((7.25, 12), queue_ms=812.44))
    assert with_wait["server_queue"] == "server queue: 7.2 requests waiting on average, 12 at most, 812.4 ms mean wait"
    assert CLIENT["limited_by"] is None, "the client block given is not changed"


@pytest.mark.parametrize("waiting", [None, (0.0, 0.0), (0.49, 1.0)])
def test_no_queue_or_a_passing_one_leaves_the_level_as_the_client_judged_it(waiting):
    assert with_server_queue(CLIENT, server(waiting)) == CLIENT


def test_a_late_client_keeps_its_cause_and_the_server_queue_is_said_beside_it():
    late = cast(ClientHealthBlock, {**CLIENT, "cpu_share": 0.95, "client_bound": True, "limited_by": "client",
                                    "reasons": ["client CPU 0.95 of a core > 0.80"]})
    judged = with_server_queue(late, server((4.0, 8.0)))
    assert judged["limited_by"] == "client" and judged["server_queue"].startswith("server queue: 4.0")


def test_a_server_bound_level_does_not_make_the_verdict_name_the_client():
    level = {"concurrency": 16, "client": with_server_queue(CLIENT, server((4.0, 8.0)))}
    assert client_limited([level]) is None
