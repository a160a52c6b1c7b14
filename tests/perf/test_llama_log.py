"""llama-server's own account of a run, read from a log a real llama-server wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.perf.llama.log import served_requests, server_throughput

LOG = Path(__file__).parents[1] / "data" / "llama-server" / "b11434-aiperf-c4.log"


def test_every_request_of_a_real_log_is_read_from_launch_to_release_with_its_generated_tokens():
    served = served_requests(LOG.read_text())
    assert len(served) == 41  # AIPerf's warm-up and its 40 timed requests
    assert all(r.tokens == 100 for r in served)  # max_tokens 100 with ignore_eos
    assert served[0].task == 0 and served[0].started_s == pytest.approx(6.460457)
    assert served[0].released_s == pytest.approx(6.506741) and served[0].decode_ms == pytest.approx(34.13)
    assert all(r.released_s > r.started_s for r in served)
    assert [r.released_s for r in served] == sorted(r.released_s for r in served)


def test_the_servers_own_throughput_is_what_the_client_that_slowed_it_reported():
    # AIPerf reported 314.85 tok/s for this run, against cellbench's 2,456 on a fresh server just
    # before: the server's own log agrees with AIPerf, so AIPerf read the stream right and the
    # server itself was slower (its decode 15-43 ms a token in places, 0.7 ms otherwise).
    timed = served_requests(LOG.read_text())[-40:]
    by_hand = 4000 / (max(r.released_s for r in timed) - min(r.started_s for r in timed))
    assert server_throughput(LOG, 40) == pytest.approx(by_hand)
    assert server_throughput(LOG, 40) == pytest.approx(314.85, rel=0.01)


def test_a_log_short_of_the_runs_requests_or_missing_gives_no_figure(tmp_path):
    cut = tmp_path / "cut.log"
    lines = LOG.read_text().splitlines()
    # A server stopped mid-request: the request launched and never released is not counted.
    last_release = max(i for i, line in enumerate(lines) if " release: " in line)
    cut.write_text("\n".join(lines[:last_release]) + "\n")
    assert len(served_requests(cut.read_text())) == 40
    assert server_throughput(cut, 40) is not None and server_throughput(cut, 41) is None
    assert server_throughput(tmp_path / "absent.log", 40) is None
    assert server_throughput(LOG, 0) is None
