"""The load generator's health over a level (its `client` block), and whether its timing limited
the level's numbers or, by the server's own queue, the server's capacity did."""

from __future__ import annotations

from bench.core.level_run import ClientHealth
from bench.core.metrics.blocks import ClientHealthBlock
from bench.core.metrics.server_view import ServerMetricsBlock

STARVED_CPUS_BUSY = 0.9  # the client's CPUs this busy (every process): the host kept it from running
STARVED_RUN_QUEUE_WAIT = 0.1  # the loop thread waited this share of the phase for a CPU: likewise
# The server's `waiting` gauge this high on average over the scrapes while a level ran: it held
# requests it could not start yet for a good part of the level, not for a passing moment.
SERVER_QUEUE_MEAN = 0.5


def client_health(
    health: ClientHealth, *, cpu_limit: float = 0.8, schedule_lag_limit_ms: float = 50.0
) -> ClientHealthBlock:
    """The client's health over a level, and whether its timing limited the level's numbers.

    A level is late when the schedule lag p99 > schedule_lag_limit_ms, or the client's CPU share
    > cpu_limit (share of one core). `limited_by` says why:
    - "client": CPU share > cpu_limit, the client saturated by its own work (`client_bound`);
    - "host": late with CPU to spare, while the client's CPUs were >= 90% busy (every process)
      or its loop thread waited >= 10% of the phase for a CPU: the host did not let it run;
    - "unknown": late with CPU to spare and no sign of a busy host (blocked on I/O, paused).
    Either way every time stamp of the level includes the client's delay."""
    reasons = []
    if health.cpu_share > cpu_limit:
        reasons.append(f"client CPU {health.cpu_share:.2f} of a core > {cpu_limit:.2f}")
    lag = health.schedule_lag_p99_ms
    if lag is not None and lag > schedule_lag_limit_ms:
        reasons.append(f"schedule lag p99 {lag:.1f} ms > {schedule_lag_limit_ms:g} ms")
    host = health.host
    starved = host is not None and (
        (host.client_cpus_busy is not None and host.client_cpus_busy >= STARVED_CPUS_BUSY)
        or (host.run_queue_wait_share is not None and host.run_queue_wait_share >= STARVED_RUN_QUEUE_WAIT))
    limited_by = None
    if health.cpu_share > cpu_limit:
        limited_by = "client"
    elif reasons:
        limited_by = "host" if starved else "unknown"
    block: ClientHealthBlock = {
        "cpu_share": health.cpu_share,
        "loop_lag_p99_ms": health.loop_lag_p99_ms,
        "schedule_lag_p99_ms": lag,
        "client_bound": limited_by == "client",
        "limited_by": limited_by,
        "reasons": reasons,
        "pinned": health.pinned,
        "cpus": None if host is None or host.client_cpus is None else list(host.client_cpus),
        "cpus_busy": None if host is None else host.client_cpus_busy,
        "host_cpus": None if host is None else host.host_cpus,
        "host_cpu_busy": None if host is None else host.host_busy,
        "run_queue_wait_share": None if host is None else host.run_queue_wait_share,
        "involuntary_switches": None if host is None else host.involuntary_switches,
        "cpu_pressure_some": None if host is None else host.cpu_pressure_some,
        "procs": health.procs,
        "procs_how": health.procs_how,
        "workers": [client_health(w, cpu_limit=cpu_limit, schedule_lag_limit_ms=schedule_lag_limit_ms)
                    for w in health.workers],  # each process's own, when there were several
    }
    if health.connections is not None:
        block["connections"] = health.connections.to_json()
    return block


def with_server_queue(client: ClientHealthBlock, server: ServerMetricsBlock) -> ClientHealthBlock:
    """The client block, with `limited_by` "server" where the client was not late and the server
    held requests it had not started: its `waiting` gauge's mean over the scrapes while the level
    ran was SERVER_QUEUE_MEAN or more. Its capacity, not the offered load, set the level's numbers;
    `server_queue` says what was seen (and the queue histogram's mean wait, where the server has
    one). A late client stays what it was: its delay is in the numbers whatever the server did."""
    waiting = server.get("gauges", {}).get("waiting")
    if waiting is None or waiting["mean"] < SERVER_QUEUE_MEAN:
        return client
    seen = f"server queue: {waiting['mean']:.1f} requests waiting on average, {waiting['max']:g} at most"
    queue = server.get("histograms", {}).get("queue")
    if queue is not None and queue["mean_ms"] is not None:
        seen += f", {queue['mean_ms']:.1f} ms mean wait"
    block: ClientHealthBlock = {**client, "server_queue": seen}
    if client.get("limited_by") is None:
        block["limited_by"] = "server"
    return block
