"""What a real-server test accepts as `ok` on a host that something else keeps busy.

A cell whose client could not keep time (its own work, or a host busy with another benchmark)
comes out `degraded` with the client as the reason: "client-bound at ...", "client starved at
...", "client late at ...". Its speed numbers include the client's delay, but what the server
answered is still right. A test of what a server answers, not of how fast, takes that verdict
for `ok` and goes on to check the answers; speed belongs in benchmarks that report figures.
"""

from __future__ import annotations

import warnings

CLIENT_LIMITED = ("client-bound", "client starved", "client late")  # bench.core.annotations.client_limited's openings


def client_limited(verdict: dict) -> bool:
    """A `degraded` verdict whose only cause is the client's timing (no failure share behind it)."""
    return verdict["verdict"] == "degraded" and verdict["reason"].startswith(CLIENT_LIMITED)


def assert_ok_unless_client_limited(verdict: dict, context: str = "") -> str:
    """Fail unless the verdict block is `ok` or client-limited `degraded` (then warn, naming it).

    Returns the verdict's name, for the checks that follow (the journal's row, the summary line).
    """
    if client_limited(verdict):
        warnings.warn(f"{context or 'cell'}: the client, not the server, limited this run: {verdict['reason']}",
                      stacklevel=2)
    else:
        assert verdict["verdict"] == "ok", f"{context}: got {verdict['verdict']}: {verdict['reason']}"
    return verdict["verdict"]


# A cell the suite runs may first find the host lock held by another session (a benchmark, or
# another checkout's `make test`, running beside the suite: one cell at a time per machine). A
# test does not wait that out: after HOST_LOCK_WAIT_S its cell is settled `failed`, "host busy:
# waited 60 s for the host lock ..., held by pid P (command) for ...", and the test fails naming
# the holder. tests/conftest.py gives every session of the suite this bound (the suite's own, and
# through PYTEST_ADDOPTS every pytest session a test starts) unless the run names
# --host-lock-timeout itself; users' sessions keep the product's default (an hour). Each bound
# fires before the one around it: the lock wait, then the subprocess, then pytest-timeout on the test.
HOST_LOCK_WAIT_S = 60
SESSION_TIMEOUT_S = 1800
TEST_TIMEOUT_S = 1900
