"""Traces, ramps and durations in the load generator: a trace's offsets as the schedule, the ramp's
formula (docs/metrics.md, Ramps), --duration ending a level's measured phase by time against the
scripted SSE server of tests/load/test_loadgen.py, how the result says it, and the options' errors.

No test here depends on the host's speed: a duration is short against a request count no server
could finish in it, and what is asserted is what the result says, not how fast it went.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.core import metrics
from bench.core.level_run import (
    LevelConfig,
    OpenLoop,
    Ramp,
    TraceSchedule,
    key_label,
    level_key,
    levels_text,
    sidecar_key,
)
from bench.core.rounds import combine_rounds
from bench.load import run_level
from bench.load.arrivals import arrival_offsets, ramp_offsets, schedule
from bench.run.parsing import load_plan
from tests.load.test_loadgen import ScriptServer, level, prompts
from tests.load.test_open_loop import SEND_BOUND_S, open_level, stand_in  # noqa: F401  # stand_in: a fixture
from tests.plugins.test_options import usage_error

pytestmark = pytest.mark.timeout(120)

TRACE = TraceSchedule("t.jsonl", "ab" * 32, "mooncake", (0.0, 0.0, 0.05, 0.12, 0.3))


# ---------------------------------------------------------------- schedules, no clock involved


@pytest.mark.parametrize("shape", ["linear", "exponential"])
def test_a_ramps_gaps_are_the_flat_draws_at_the_rate_of_their_index(shape):
    rate, r0, n = 8.0, 0.5, 41
    offsets = ramp_offsets(rate, Ramp(shape, r0), 2.0, n, seed=7)
    unit = np.diff(arrival_offsets(1.0, 2.0, n, seed=7))  # the same gamma draws at rate 1
    gaps = np.diff(offsets)
    u = np.arange(n - 1) / (n - 2)
    rates = r0 + (rate - r0) * u if shape == "linear" else r0 * (rate / r0) ** u
    assert offsets[0] == 0.0 and len(offsets) == n
    assert gaps == pytest.approx(unit / rates, rel=1e-12)
    assert unit[0] / gaps[0] == pytest.approx(r0) and unit[-1] / gaps[-1] == pytest.approx(rate)
    assert offsets == ramp_offsets(rate, Ramp(shape, r0), 2.0, n, seed=7), "seeded: the same every run"


def test_a_ramp_rises_over_the_level_and_is_slower_than_its_flat_rate():
    flat = arrival_offsets(4.0, 1.0, 2001, seed=1)
    ramped = ramp_offsets(4.0, Ramp("linear", 0.4), 1.0, 2001, seed=1)
    first, last = np.diff(ramped[:200]).mean(), np.diff(ramped[-200:]).mean()
    assert first > 3 * last and last == pytest.approx(1 / 4.0, rel=0.2)
    assert ramped[-1] > flat[-1]
    for bad in (Ramp("linear", 4.0), Ramp("linear", 0.0), Ramp("sideways", 1.0)):
        with pytest.raises(ValueError, match="bad ramp"):
            ramp_offsets(4.0, bad, 1.0, 10, seed=0)


def test_a_trace_level_sends_at_the_files_offsets_and_is_named_by_the_file():
    ol = OpenLoop(TRACE.offered_rate, trace=TRACE, max_concurrency=2)
    assert schedule(ol, 5) == TRACE.offsets and schedule(ol, 2) == (0.0, 0.0)
    assert TRACE.offered_rate == pytest.approx(4 / 0.3) and ol.arrivals == "trace"
    assert ol.label == "trace t.jsonl" and ol.measured(100) == 5
    assert ol.key != OpenLoop(TRACE.offered_rate, max_concurrency=2).key, "never a rate level's key"
    assert key_label(ol.key, full=True) == "trace t.jsonl, max concurrency 2"
    assert OpenLoop(4.0, ramp=Ramp("exponential", 0.5)).label == "4 req/s, exponential ramp from 0.5 req/s"
    assert TraceSchedule("t", "0" * 64, "burstgpt", (0.0, 0.0)).offered_rate == math.inf, "all at once"


# ---------------------------------------------------------------- --duration against a real server


def test_a_ramped_level_sends_on_the_ramp_and_is_keyed_apart_from_its_flat_rate():
    ramp = Ramp("exponential", 5.0)
    cfg = LevelConfig(base_url="", model="req-model", concurrency=0, requests=12, warmup=0,
                      open_loop=OpenLoop(40.0, ramp=ramp, seed=3))
    with ScriptServer() as srv:
        run = run_level(LevelConfig(**{**cfg.__dict__, "base_url": srv.base_url}), prompts("stream 1 0"), [])
    assert run.schedule == ramp_offsets(40.0, ramp, 1.0, 12, seed=3)
    t0 = run.records[0].t_sched
    assert [r.t_sched - t0 for r in run.records] == pytest.approx(list(run.schedule), abs=1e-9)
    s = metrics.summarize_level(run)
    assert s["open_loop"]["ramp"] == {"shape": "exponential", "start_rps": 5.0}
    assert level_key(s) == level_key(sidecar_key(run.config)) == OpenLoop(40.0, ramp=ramp).key
    assert level_key(s) != OpenLoop(40.0).key and key_label(level_key(s)) == "40 req/s, exponential ramp from 5 req/s"


def test_a_duration_ends_a_closed_loop_level_and_lets_its_requests_finish():
    with ScriptServer() as srv:  # each request ~0.1 s: 1000 of them at c=2 take 50 s, the duration 0.4 s
        run = run_level(level(srv.base_url, concurrency=2, requests=1000, duration_s=0.4),
                        prompts("stream 4 0.025"), [])
    t0 = min(r.t_sched for r in run.records)
    assert run.ended_by == "duration" and not run.partial and run.stop_reason is None
    assert 0 < len(run.records) < 1000 and all(r.ok for r in run.records), "what was in flight finished"
    assert all(r.t_send - t0 <= 0.4 + SEND_BOUND_S for r in run.records)
    assert max(r.t_end for r in run.records) - t0 > 0.4, "the last requests ended after the duration"
    s = metrics.summarize_level(run)
    assert s["duration"] == {"limit_s": 0.4, "ended_by": "duration", "sent": len(run.records), "asked": 1000}
    assert not s["partial"]


def test_with_a_count_and_a_duration_the_first_to_come_ends_the_level():
    with ScriptServer() as srv:
        run = run_level(level(srv.base_url, concurrency=1, requests=3, duration_s=60.0), prompts("stream 1 0"), [])
    assert run.ended_by == "requests" and len(run.records) == 3
    assert metrics.summarize_level(run)["duration"]["ended_by"] == "requests"
    with ScriptServer() as srv:
        run = run_level(level(srv.base_url, requests=3), prompts("stream 1 0"), [])
    assert run.ended_by is None and "duration" not in metrics.summarize_level(run)


def test_a_duration_ends_an_open_loop_level_before_its_later_arrivals():
    with ScriptServer() as srv:  # 1000 arrivals at 40/s take 25 s; the duration is 0.5 s
        run = run_level(open_level(srv.base_url, 40.0, 1000, burstiness=50.0, duration_s=0.5),
                        prompts("stream 2 0.02"), [])
    t0 = run.records[0].t_sched
    assert run.ended_by == "duration" and not run.partial and all(r.ok for r in run.records)
    assert len(run.records) < 1000 and all(r.t_sched - t0 <= 0.5 for r in run.records)
    assert all(r.t_send - t0 <= 0.5 + SEND_BOUND_S for r in run.records)


def test_a_trace_cut_by_a_duration_says_how_many_of_its_entries_went():
    offsets = tuple(0.1 * i for i in range(40))  # 4 s of trace, a 0.35 s duration
    trace = TraceSchedule("long.jsonl", "cd" * 32, "mooncake", offsets)
    cfg = LevelConfig(base_url="", model="req-model", concurrency=0, requests=40, warmup=0,
                      open_loop=OpenLoop(trace.offered_rate, trace=trace), duration_s=0.35)
    with ScriptServer() as srv:
        run = run_level(LevelConfig(**{**cfg.__dict__, "base_url": srv.base_url}), prompts("stream 1 0"), [])
    t0 = run.records[0].t_sched
    assert [round(r.t_sched - t0, 9) for r in run.records] == [round(o, 9) for o in offsets[:len(run.records)]]
    s = metrics.summarize_level(run)
    assert s["open_loop"]["trace"] == {"file": "long.jsonl", "sha256": "cd" * 32, "format": "mooncake",
                                       "entries": 40, "sent": len(run.records), "skipped": 0}
    assert 1 <= len(run.records) <= 4 and s["duration"]["ended_by"] == "duration"
    assert level_key(s) == ("trace", "long.jsonl", "cd" * 32, 0) and levels_text([s]) == "trace long.jsonl"
    twice = combine_rounds([{**s, "round": 1}, {**s, "round": 2}])
    assert twice["duration"]["sent"] == 2 * len(run.records) and level_key(twice) == level_key(s)


# ---------------------------------------------------------------- the options


def test_load_plan_says_what_is_wrong_with_a_ramp_or_a_duration():
    plan = load_plan("2,4", ramp_up="exponential", duration="1.5m")
    assert plan is not None and plan.duration_s == 90.0
    assert plan.ramp(4.0) == Ramp("exponential", 0.4), "a tenth of the level's rate by default"
    assert load_plan(None, duration="90s") is not None and load_plan(None, duration="90s").duration_s == 90.0
    for kwargs, says in (({"ramp_up": "linear", "ramp_up_start": 4.0}, "is not below every --request-rate"),
                         ({"ramp_up": "sideways"}, "--ramp-up takes linear or exponential"),
                         ({"duration": "5 weeks"}, "--duration takes a time more than 0"),
                         ({"duration": "0"}, "--duration takes a time more than 0"),
                         ({"ramp_up_start": 1.0}, "give --ramp-up linear|exponential too")):
        with pytest.raises(ValueError, match=says):
            load_plan("2,4", **kwargs)
    with pytest.raises(ValueError, match="cannot rise to --request-rate inf"):
        load_plan("inf", ramp_up="linear")
    with pytest.raises(ValueError, match="a sweep judges|the sweep judges"):
        load_plan("sweep", slo="ttft_p99=1s", ramp_up="linear")


@pytest.mark.parametrize("args, says", [
    (["--ramp-up", "linear"], "--ramp-up linear raises an arrival rate, and closed-loop levels have none"),
    (["--ramp-up", "linear", "--concurrency", "4"], "closed-loop levels have none"),
    (["--trace-file", "TRACE", "--ramp-up", "linear"], "--ramp-up cannot shape --trace-file's level"),
    (["--trace-file", "TRACE", "--request-rate", "4"], "--trace-file's level sends on the file's own arrival times"),
    (["--trace-file", "BAD"], "line 2: missing output_length"),
    (["--duration", "soon"], "--duration takes a time more than 0"),
    (["--trace-file", "TRACE", "--unique-prompts"], "--unique-prompts opens every message with a nonce"),
    (["--trace-file", "TRACE", "--model", "PROFILE"], "profile 'other' has none cellbench can load"),
])
def test_bad_trace_ramp_and_duration_options_are_one_usage_error_line(stand_in, args, says):  # noqa: F811
    (stand_in.path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n')
    (stand_in.path / "bad.jsonl").write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
                                             '{"timestamp": 3, "input_length": 5}\n')
    (stand_in.path / "other.yaml").write_text("name: other\nresults_name: other\nsampling: {}\n"
                                              "formats:\n  gguf: {repo: a/b, file: m.gguf, served_id: m}\n")
    named = {"TRACE": "t.jsonl", "BAD": "bad.jsonl", "PROFILE": "other.yaml"}
    assert says in usage_error(stand_in, *[str(stand_in.path / named[a]) if a in named else a for a in args])


def test_pytests_own_trace_with_a_trace_file_says_which_option_was_meant(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    (pytester.path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n')
    result = pytester.runpytest("--trace", "t.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("pytest's own --trace starts pdb; give a request trace as --trace-file PATH"
            in result.stderr.str()), result.stderr.str()
    assert pytester.runpytest("--trace-file", "t.jsonl", "--collect-only").ret == pytest.ExitCode.OK
