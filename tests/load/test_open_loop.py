"""Open-loop levels: the seeded arrival schedule against its distribution (no clock involved), the
dispatcher against real servers on 127.0.0.1 (sends on the schedule, the --max-concurrency cap
never exceeded, the queueing delay recorded apart from TTFT), the SLOs and goodput, the rate
sweep's search, and the options that ask for all of it.

The servers: the scripted SSE server of tests/load/test_loadgen.py (it counts what it has in flight)
and the paced zero-work server of bench/perf/client_overhead.py, a separate process.
"""

from __future__ import annotations

import json
import math
import signal
import statistics
import time

import pytest

from bench.core import metrics
from bench.core.client_settings import ClientSettings
from bench.core.level_run import ClientHealth, LevelConfig, LevelInterrupted, LevelRun, OpenLoop, Progress
from bench.core.metrics.stats.attainment import Decision
from bench.core.open_loop import Slo, goodput, parse_slos, within
from bench.core.records import ErrorType, RequestError, RequestRecord
from bench.load import run_level
from bench.load.arrivals import arrival_offsets
from bench.perf.null_server.server import paced_server
from bench.run.config import LoadPlan
from bench.run.levels.sweep import RateSweep, SweepPlan
from bench.run.parsing import load_plan
from bench.setup.prompts import Prompt
from tests.load.test_loadgen import ScriptServer, prompts
from tests.plugins.test_options import STAND_IN_CELL, usage_error

pytestmark = pytest.mark.timeout(120)

# Generous: on a busy 2-core host (xdist workers, a server beside the client) the event loop may be
# kept from running for a while, and every send due meanwhile goes out late by as much. Most go at once.
SEND_BOUND_S = 0.3
SEND_MEDIAN_S = 0.03


# ---------------------------------------------------------------- the schedule, against its distribution


def _gaps(offsets: tuple[float, ...]) -> list[float]:
    return [b - a for a, b in zip(offsets, offsets[1:], strict=False)]


def test_a_schedule_is_fixed_by_its_seed():
    first = arrival_offsets(4.0, 1.0, 200, seed=11)
    assert first == arrival_offsets(4.0, 1.0, 200, seed=11), "two runs of one rate send at the same offsets"
    assert first != arrival_offsets(4.0, 1.0, 200, seed=12)
    assert len(first) == 200 and first[0] == 0.0
    assert all(b >= a for a, b in zip(first, first[1:], strict=False))


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0, 16.0])
def test_inter_arrival_times_have_the_asked_mean_and_variation(burstiness):
    """Gamma(shape B, mean 1/R): mean rate R, coefficient of variation 1/sqrt(B) (1: Poisson)."""
    rate = 8.0
    gaps = _gaps(arrival_offsets(rate, burstiness, 40_001, seed=3))
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    assert mean == pytest.approx(1 / rate, rel=0.02)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.04)
    offsets = arrival_offsets(rate, burstiness, 40_001, seed=3)
    assert metrics.arrival_rate(offsets) == pytest.approx(rate, rel=0.02)


def test_poisson_arrivals_in_a_window_have_a_variance_equal_to_their_mean():
    """A Poisson process's counts in fixed windows: variance = mean (a regular one's is far less)."""
    offsets = arrival_offsets(10.0, 1.0, 30_000, seed=5)
    windows = int(offsets[-1])
    counts = [0] * windows
    for t in offsets:
        if int(t) < windows:
            counts[int(t)] += 1
    assert statistics.fmean(counts) == pytest.approx(10.0, rel=0.03)
    assert statistics.pvariance(counts) == pytest.approx(statistics.fmean(counts), rel=0.1)
    regular = arrival_offsets(10.0, 100.0, 30_000, seed=5)
    counts = [0] * int(regular[-1])
    for t in regular:
        if int(t) < len(counts):
            counts[int(t)] += 1
    assert statistics.pvariance(counts) < 0.2 * statistics.fmean(counts)


def test_one_seed_gives_one_schedule_scaled_across_rates_and_inf_is_all_at_once():
    slow, fast = arrival_offsets(2.0, 1.0, 50, seed=9), arrival_offsets(8.0, 1.0, 50, seed=9)
    assert fast == pytest.approx([t / 4 for t in slow])
    assert arrival_offsets(math.inf, 1.0, 5, seed=0) == (0.0,) * 5
    assert arrival_offsets(3.0, 1.0, 0, seed=0) == ()
    for bad in ((0.0, 1.0), (-1.0, 1.0), (1.0, 0.0)):
        with pytest.raises(ValueError, match="bad schedule"):
            arrival_offsets(*bad, 10, seed=0)


# ---------------------------------------------------------------- the dispatcher, against real servers


def open_level(base_url: str, rate: float, requests: int, **kw) -> LevelConfig:
    ol = OpenLoop(rate, kw.pop("burstiness", 1.0), kw.pop("max_concurrency", None), kw.pop("seed", 0))
    return LevelConfig(base_url=base_url, model="req-model", concurrency=0, requests=requests,
                       warmup=kw.pop("warmup", 0), open_loop=ol, **kw)


def assert_sent_on_schedule(run, bound_s=SEND_BOUND_S):
    """Each arrival is its schedule's offset from the phase's start, and went out on it (no cap)."""
    cfg = run.config.open_loop
    assert cfg is not None
    expected = arrival_offsets(cfg.rate, cfg.burstiness, run.config.requests, cfg.seed)
    assert run.schedule == expected
    t0 = run.records[0].t_sched
    for r, offset in zip(run.records, expected, strict=True):
        assert r.t_sched - t0 == pytest.approx(offset, abs=1e-9)
        assert r.t_admitted == r.t_sched, "no cap: admitted on arrival"
        assert 0.0 <= r.t_send - r.t_sched < bound_s, (r.index, r.t_send - r.t_sched)
    assert statistics.median(r.t_send - r.t_sched for r in run.records) < SEND_MEDIAN_S


def in_flight_at_sends(records):
    """The most requests in flight at any send, from the records alone."""
    return max(sum(1 for o in records if o.t_send <= r.t_send < o.t_end) for r in records)


def test_requests_go_out_at_their_scheduled_offsets(tmp_path):
    with ScriptServer() as srv:
        run = run_level(open_level(srv.base_url, 25.0, 30, seed=4), prompts("stream 3 0.01", 4), [])
    assert len(run.records) == 30 and all(r.ok for r in run.records), [r.error for r in run.records]
    assert not run.partial and run.peak_in_flight >= 1
    assert_sent_on_schedule(run)
    assert all(metrics.queue_delay(r) == 0.0 for r in run.records)
    s = metrics.summarize_level(run)
    assert "concurrency" not in s and s["request_rate"] == 25.0
    assert s["open_loop"]["arrivals"] == "poisson" and s["open_loop"]["queued"] == 0
    assert s["open_loop"]["offered_rate_rps"] == pytest.approx(metrics.arrival_rate(run.schedule))
    assert s["open_loop"]["achieved_rate_rps"] == pytest.approx(s["open_loop"]["offered_rate_rps"], rel=0.1)
    assert s["queue_delay_ms"]["max"] == 0.0


def test_the_cap_is_never_exceeded_and_a_wait_for_it_is_queueing_delay_not_ttft():
    cap = 2
    with ScriptServer() as srv:  # ~100 ms per request, arrivals ~20 ms apart: the cap binds
        run = run_level(open_level(srv.base_url, 50.0, 24, max_concurrency=cap, seed=1), prompts("stream 5 0.02"), [])
        assert srv.max_in_flight <= cap
    records = run.records
    assert len(records) == 24 and all(r.ok for r in records)
    assert run.peak_in_flight == cap and in_flight_at_sends(records) <= cap
    queued = [r for r in records if r.t_admitted > r.t_sched]
    assert len(queued) >= 10, "most arrivals found the cap full"
    ends = sorted(r.t_end for r in records)
    for r in queued:
        # it got its place when an earlier request released its connection (just after [DONE]), and went at once
        assert any(0.0 <= r.t_admitted - end < 0.05 for end in ends), r.index  # stamped, not woken: no loop lag
        assert 0.0 <= r.t_send - r.t_admitted < SEND_BOUND_S
        assert metrics.queue_delay(r) == pytest.approx(r.t_admitted - r.t_sched)
        assert metrics.ttft(r) == pytest.approx(r.t_first_token - r.t_send), "TTFT starts at the send"
        assert metrics.schedule_lag(r) == pytest.approx(r.t_send - r.t_admitted), "the wait is not the client's"
    s = metrics.summarize_level(run)
    block = s["open_loop"]
    assert block["max_concurrency"] == cap and block["peak_in_flight"] == cap and block["queued"] == len(queued)
    assert block["achieved_rate_rps"] < 0.6 * block["offered_rate_rps"], "the cap held the arrivals back"
    assert s["queue_delay_ms"]["max"] > 100.0 and s["schedule_lag_ms"]["p99"] < SEND_BOUND_S * 1000


def test_rate_inf_sends_everything_at_once_up_to_the_cap():
    with ScriptServer() as srv:
        run = run_level(open_level(srv.base_url, math.inf, 9, max_concurrency=3), prompts("stream 3 0.02"), [])
        assert srv.max_in_flight == 3
    assert all(r.ok for r in run.records) and run.schedule == (0.0,) * 9
    assert sum(r.t_admitted == r.t_sched for r in run.records) == 3
    s = metrics.summarize_level(run)
    assert s["request_rate"] == "inf" and s["open_loop"]["arrivals"] == "all at once"
    assert s["open_loop"]["offered_rate_rps"] is None


def test_a_gap_between_arrivals_is_idle_not_a_stall_but_a_hung_request_is():
    with ScriptServer() as srv:  # arrivals ~0.5 s apart, watchdog at 0.3 s: waiting for an arrival is not a stall
        run = run_level(open_level(srv.base_url, 2.0, 3, burstiness=200.0, hang_s=0.3),
                        prompts("stream 1 0"), [])
        assert run.stop_reason is None and all(r.ok for r in run.records)
        run = run_level(open_level(srv.base_url, 2.0, 3, burstiness=200.0, hang_s=0.3,
                                   client=ClientSettings(request_timeout_s=20)),
                        prompts("stall"), [])
    assert run.partial and run.stop_reason.startswith("no progress for")
    assert all(r.error is not None and r.error.type is ErrorType.CANCELLED for r in run.records)


def test_the_deadline_stops_the_arrivals_and_cancels_what_is_in_flight():
    with ScriptServer() as srv:
        t0 = time.perf_counter()
        run = run_level(open_level(srv.base_url, 10.0, 100, burstiness=50.0, deadline=t0 + 1.0),
                        prompts("stream 10 0.05"), [])
    assert time.perf_counter() - t0 < 5
    assert run.partial and run.stop_reason.startswith("deadline reached")
    # about 10 arrivals a second from the level's start to the deadline: a busy host that started
    # the level late left it less of that second, which is not what this test is about
    window = max(0.0, t0 + 1.0 - run.t_start)
    assert abs(len(run.records) - 10 * window) <= 5, (len(run.records), window)
    assert all(r.t_send <= t0 + 1.0 + SEND_BOUND_S for r in run.records)


def test_a_server_gone_stops_the_arrivals_at_once():
    gone_at: list[float] = []

    def watch(p: Progress) -> None:
        if not gone_at and p.done >= 2:
            gone_at.append(time.perf_counter())

    with ScriptServer() as srv:
        cfg = open_level(srv.base_url, 5.0, 40, burstiness=50.0, progress=watch,
                         client=ClientSettings(request_timeout_s=60),
                         server_gone=lambda: "server exited with code 3" if gone_at else None)
        run = run_level(cfg, prompts("stream 30 0.05"), [])  # 1.5 s each: ~7 in flight when it goes
    assert gone_at and time.perf_counter() - gone_at[0] < 10
    assert run.partial and run.stop_reason.startswith("server exited with code 3; ")
    assert len(run.records) < 20, "no arrival went out after the server was gone"
    assert all(r.ok or r.error.type is ErrorType.TRUNCATED for r in run.records)


def _ctrl_c(signum, frame):
    raise KeyboardInterrupt


@pytest.mark.timeout(0)  # this test arms SIGALRM itself, as pytest-timeout's signal method does
def test_an_interrupt_ends_an_open_loop_level_and_keeps_what_it_finished():
    def arm(p: Progress) -> None:  # the signal lands once 3 requests have finished, however fast the host is
        if p.done >= 3:
            signal.setitimer(signal.ITIMER_REAL, 0.01)

    previous = signal.signal(signal.SIGALRM, _ctrl_c)
    try:
        with ScriptServer() as srv:
            with pytest.raises(LevelInterrupted) as caught:  # a KeyboardInterrupt that carries the level
                run_level(open_level(srv.base_url, 10.0, 200, burstiness=50.0, max_concurrency=4, progress=arm),
                          prompts("stream 3 0.02"), [])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    kept: LevelRun = caught.value.level_run
    assert kept.partial and kept.stop_reason.startswith("interrupted")
    # what finished is kept; the 20 s schedule of 200 did not run on (however slow the host)
    assert 3 <= len(kept.records) < 200 and all(r.ok for r in kept.records)
    assert kept.schedule == arrival_offsets(10.0, 50.0, 200, seed=0)


def test_against_the_paced_server_sends_follow_the_schedule_and_the_cap_holds():
    """The zero-work server in its own process, each response 8 tokens 10 ms apart (~80 ms)."""
    with paced_server(10.0) as (base_url, _):
        prompt = [Prompt(name="p", messages=({"role": "user", "content": "go"},), max_tokens=8)]
        free = run_level(open_level(base_url, 20.0, 40, seed=2, warmup=1), prompt, prompt)
        capped = run_level(open_level(base_url, 40.0, 40, seed=2, max_concurrency=2), prompt, [])
    assert all(r.ok for r in free.records) and len(free.warmup_records) == 1
    assert_sent_on_schedule(free)
    assert all(r.ok for r in capped.records)
    assert capped.peak_in_flight <= 2 and in_flight_at_sends(capped.records) <= 2
    waited = [metrics.queue_delay(r) for r in capped.records]
    assert sum(w > 0 for w in waited) >= 10 and max(waited) > 0.1
    assert all(0 <= r.t_send - r.t_admitted < SEND_BOUND_S for r in capped.records)


# ---------------------------------------------------------------- SLOs and goodput


def _rec(i: int, ttft: float, gap: float, n: int = 5, ok: bool = True) -> RequestRecord:
    """A request sent at i/10 s with a TTFT and a fixed gap between its n tokens."""
    t = i / 10
    chunks = [t + ttft + k * gap for k in range(n)]
    return RequestRecord(index=i, prompt_name="p", t_sched=t, t_admitted=t, t_send=t, t_first_token=chunks[0],
                         t_end=chunks[-1], chunk_times=chunks, usage_completion_tokens=n,
                         error=None if ok else RequestError(ErrorType.HTTP_5XX, "HTTP 500"))


def _run(records: list[RequestRecord], open_loop: OpenLoop | None = None, partial: bool = False) -> LevelRun:
    cfg = LevelConfig("http://x", "m", 0 if open_loop else 4, len(records), 0, open_loop=open_loop)
    span = metrics.wall_span(records) or (0.0, 0.0)
    schedule = tuple((r.t_sched or 0.0) - (records[0].t_sched or 0.0) for r in records) if open_loop else ()
    return LevelRun(cfg, records, [], span[0], span[1], 0.0, partial, "deadline" if partial else None,
                    ClientHealth(0.1, 1.0, 1.0), schedule=schedule)


def test_slos_parse_with_units_and_refuse_what_they_cannot_mean():
    assert parse_slos("ttft_p99=500ms, tpot_p99=50ms,e2el_p50=2s,itl_p95=30") == (
        Slo("ttft", 99, 500.0), Slo("tpot", 99, 50.0), Slo("e2el", 50, 2000.0), Slo("itl", 95, 30.0))
    for bad in ("", "ttft=500ms", "ttft_p98=500ms", "latency_p99=1s", "ttft_p99=fast", "ttft_p99=0", "ttft_p99"):
        with pytest.raises(ValueError):
            parse_slos(bad)


def test_goodput_counts_requests_that_met_every_slo_over_the_wall_time():
    # 10 requests: TTFT 0.1 s except two at 0.9 s; gaps 20 ms except one request at 80 ms; one failed
    records = [_rec(i, 0.9 if i in (3, 7) else 0.1, 0.08 if i == 5 else 0.02) for i in range(9)]
    records.append(_rec(9, 0.1, 0.02, ok=False))
    run = _run(records)
    slos = parse_slos("ttft_p90=500ms,tpot_p90=50ms")
    block = goodput(run, slos)
    assert block["good_requests"] == 6  # not 3, 7 (TTFT), 5 (TPOT), 9 (failed)
    wall = run.t_end - run.t_start
    assert block["goodput_rps"] == pytest.approx(6 / wall)
    assert block["attainment"] == {"ttft_p90": pytest.approx(0.7), "tpot_p90": pytest.approx(0.8)}
    assert not block["slo_met"] and len(block["missed"]) == 2 and block["missed"][0].startswith("ttft_p90: 70.0%")
    loose = goodput(run, parse_slos("ttft_p50=1s,tpot_p50=100ms"))
    assert loose["slo_met"] and loose["missed"] == [] and loose["good_requests"] == 9
    assert within(records[0], Slo("itl", 99, 25.0)) and not within(records[5], Slo("itl", 99, 25.0))
    assert within(_rec(0, 0.1, 0.0, n=1), Slo("tpot", 99, 1.0)), "one token: no TPOT to miss"


def test_an_open_loop_level_that_fell_behind_or_stopped_early_misses_its_slo():
    records = [_rec(i, 0.1, 0.02) for i in range(10)]
    ok = goodput(_run(records, OpenLoop(10.0)), parse_slos("ttft_p99=1s"))
    assert ok["slo_met"], ok["missed"]
    late = [_rec(i, 0.1, 0.02) for i in range(10)]
    for r in late[5:]:  # the second half went out a second late: held back by the cap
        r.t_send = r.t_admitted = r.t_sched + 1.0
    behind = goodput(_run(late, OpenLoop(10.0, max_concurrency=2)), parse_slos("ttft_p99=1s"))
    assert not behind["slo_met"] and behind["missed"][0].startswith("fell behind: sent at")
    stopped = goodput(_run(records, OpenLoop(10.0), partial=True), parse_slos("ttft_p99=1s"))
    assert stopped["missed"] == ["the level stopped early: deadline"]


# ---------------------------------------------------------------- the sweep's search


def _search(limit: float, plan: SweepPlan) -> RateSweep:
    search = RateSweep(plan, parse_slos("ttft_p99=500ms"))
    while (rate := search.next_rate()) is not None:
        search.record(rate, rate <= limit, rate * 0.9 if rate <= limit else None)
    return search


def test_the_sweep_doubles_then_bisects_to_the_tolerance():
    search = _search(5.3, SweepPlan(start=1.0, tolerance=0.1, max_levels=12))
    assert [r for r, _ in search.tried] == [1, 2, 4, 8, 6, 5, 5.5]
    out = search.outcome()
    assert (out["best_rps"], out["failing_rps"], out["goodput_rps"]) == (5.0, 5.5, 4.5)
    assert out["passed"] == [True, True, True, False, False, True, False]
    assert out["stopped"].startswith("within the tolerance")


def test_the_sweep_halves_from_a_failing_start_and_stops_at_its_level_cap():
    search = _search(3.1, SweepPlan(start=8.0, tolerance=0.05, max_levels=5))
    assert [r for r, _ in search.tried] == [8, 4, 2, 3, 3.5]
    out = search.outcome()
    assert (out["best_rps"], out["failing_rps"]) == (3.0, 3.5) and out["stopped"].startswith("the level cap")
    nothing = _search(0.0, SweepPlan(start=1.0, max_levels=3)).outcome()
    assert nothing["best_rps"] is None and nothing["goodput_rps"] is None and nothing["rates"] == [1, 0.5, 0.25]


def test_the_sweep_answers_with_confidence_keeping_the_undecided_rates_apart():
    """The search moves on each level's measured outcome; its answer at 95% is the highest rate met,
    the lowest missed above it, and the rates neither decided (near the limit, a short level)."""
    search = RateSweep(SweepPlan(start=1.0, tolerance=0.1, max_levels=12), parse_slos("ttft_p99=500ms"))
    outcomes: dict[float, Decision] = {1: "met", 2: "met", 4: "cannot tell", 8: "missed", 6: "missed",
                                       5: "cannot tell", 5.5: "cannot tell"}
    while (rate := search.next_rate()) is not None:
        search.record(rate, rate <= 5.3, None, outcomes[rate])
    out = search.outcome()
    assert (out["best_rps"], out["failing_rps"]) == (5.0, 5.5)  # the point answer, as before
    assert (out["best_met_rps"], out["lowest_missed_rps"]) == (2.0, 6.0)
    assert out["undecided_rps"] == [4.0, 5.0, 5.5] and out["decisions"][:3] == ["met", "met", "cannot tell"]
    early = RateSweep(SweepPlan(), parse_slos("ttft_p99=500ms"))
    early.record(1.0, True, None)  # a level with no goodput block: not judged
    assert early.outcome()["best_met_rps"] is None and early.outcome()["undecided_rps"] == []


# ---------------------------------------------------------------- the options


def test_load_options_become_a_plan_and_nothing_without_them():
    assert load_plan(None) is None, "no rate: closed-loop levels, as always"
    assert load_plan(None, slo="ttft_p99=1s") == LoadPlan(slos=(Slo("ttft", 99, 1000.0),))
    assert load_plan("4,inf", max_concurrency=8, burstiness=2.0, arrival_seed=3) == LoadPlan(
        rates=(4.0, math.inf), burstiness=2.0, max_concurrency=8, seed=3)
    plan = load_plan("sweep:0.5", slo="ttft_p99=500ms", sweep_levels=6, sweep_tolerance=0.2)
    assert plan is not None and plan.sweep == SweepPlan(0.5, 0.2, 6) and plan.open_loop


@pytest.fixture
def stand_in(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_cells=STAND_IN_CELL + """
def test_load(cell_config):
    Path("load.json").write_text(json.dumps(repr(cell_config.load.plan)))
""")
    return pytester


@pytest.mark.parametrize("args, says", [
    (["--request-rate", "0"], "--request-rate takes comma-separated requests/s"),
    (["--request-rate", "fast"], "--request-rate takes comma-separated requests/s"),
    (["--request-rate", "4", "--concurrency", "8"], "--concurrency and --request-rate name two kinds of level"),
    (["--request-rate", "sweep"], "--request-rate sweep looks for the highest rate meeting an SLO: give --slo too"),
    (["--burstiness", "2"], "--burstiness shape open-loop levels: give --request-rate or --trace-file too"),
    (["--request-rate", "4", "--max-concurrency", "0"], "--max-concurrency takes a count of 1 or more"),
    (["--request-rate", "4", "--slo", "ttft_p97=1s"], "'ttft_p97=1s': an SLO is METRIC_pNN=LIMIT"),
])
def test_bad_load_options_are_one_usage_error_line(stand_in, args, says):
    assert says in usage_error(stand_in, *args)


def test_the_cells_get_the_plan(stand_in):
    stand_in.runpytest("-k", "llamacpp-chat and load", "--request-rate", "2,4", "--max-concurrency", "3"
                       ).assert_outcomes(passed=1)
    text = json.loads((stand_in.path / "load.json").read_text())
    assert text.startswith("LoadPlan(rates=(2.0, 4.0)") and "max_concurrency=3" in text
    stand_in.runpytest("-k", "llamacpp-chat and load").assert_outcomes(passed=1)
    assert json.loads((stand_in.path / "load.json").read_text()) == "None"
