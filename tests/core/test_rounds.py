"""A level measured in rounds: how `combine_rounds` makes one level of K, and the within-run
throughput interval every single-round level carries."""

from __future__ import annotations

import copy
import statistics

import pytest

from bench.core import figures
from bench.core.level_run import ClientHealth, LevelConfig, LevelRun
from bench.core.metrics import summarize_level
from bench.core.metrics.stats.intervals import rounds_interval
from bench.core.result.files import validate
from bench.core.result.model import Level
from bench.core.rounds import RULES, combine_rounds, combined_levels
from bench.core.verdicts import Evidence, Identity, Verdict, classify
from tests.support.results import Spec, level_records, synthetic_result


def rounds_of(k: int, requests: int = 8, concurrency: int = 1) -> list[Level]:
    """K rounds of one level, each measured apart (its own random draw), each with its `round`."""
    out = []
    for i in range(1, k + 1):
        spec = Spec(run_id=f"20261130T10000{i}Z-aaa{i}", requests=requests, levels=(concurrency,))
        level = copy.deepcopy(synthetic_result(spec)["levels"][0])
        level["round"] = i
        out.append(level)
    return out


def test_counts_are_summed_and_figures_are_the_median_of_the_rounds():
    rounds = rounds_of(3)
    level = combine_rounds(rounds)
    for key in ("num_requests", "successful", "failed", "output_tokens_total", "input_tokens_total", "chunks_total",
                "wall_time_s"):
        assert level[key] == sum(r[key] for r in rounds), key
    for key in ("output_throughput_tps", "request_throughput_rps", "input_throughput_tps",
                "total_token_throughput_tps"):
        assert level[key] == pytest.approx(statistics.median(r[key] for r in rounds)), key
    ttft = level["ttft_ms"]
    assert ttft["n"] == 24
    assert ttft["min"] == min(r["ttft_ms"]["min"] for r in rounds)
    assert ttft["max"] == max(r["ttft_ms"]["max"] for r in rounds)
    for stat in ("mean", "p50", "p90", "p95", "p99"):
        assert ttft[stat] == pytest.approx(statistics.median(r["ttft_ms"][stat] for r in rounds))
    assert level["tokens_per_chunk"] == pytest.approx(level["output_tokens_total"] / level["chunks_total"])
    assert level["rounds"] == rounds and level["concurrency"] == 1
    assert "round" not in level, "the combined level is no round of its own"


def test_intervals_come_from_the_rounds_or_say_the_pooled_n_they_need():
    rounds = rounds_of(3)
    ttft = combine_rounds(rounds)["ttft_ms"]["ci95"]
    assert ttft["p50"] == pytest.approx(rounds_interval([r["ttft_ms"]["p50"] for r in rounds]))
    # 3 rounds of 8 pool 24 values: not enough to bound a p90 (29) even as one sample
    assert ttft["p90"] == {"low": None, "high": None, "needs_n": 29}
    assert ttft["p99"] == {"low": None, "high": None, "needs_n": 299}
    many = combine_rounds(rounds_of(3, requests=100))["ttft_ms"]
    assert many["ci95"]["p99"]["low"] <= many["p99"] <= many["ci95"]["p99"]["high"]


def test_throughput_interval_and_uncertainty_say_the_basis_is_rounds():
    rounds = rounds_of(2)
    level = combine_rounds(rounds)
    assert level["throughput_ci95"]["output_throughput_tps"] == pytest.approx(
        rounds_interval([r["output_throughput_tps"] for r in rounds]))
    assert level["uncertainty"] == {"basis": "rounds", "rounds": 2, "windows": None}
    short = combine_rounds(rounds, asked=3)  # the cell stopped before the third round
    assert short["uncertainty"] == {"basis": "rounds", "rounds": 2, "windows": None, "rounds_asked": 3}


def test_errors_are_summed_and_the_dominant_error_is_of_the_sums():
    rounds = rounds_of(3)
    for r, (n_500, n_timeout) in zip(rounds, [(1, 2), (3, 0), (2, 2)], strict=True):
        r["errors"] = {"http_500": n_500, "timeout": n_timeout}
        r["dominant_error"] = ({"type": "http_500", "http_status": 500, "count": n_500} if n_500 >= n_timeout
                               else {"type": "timeout", "http_status": None, "count": n_timeout})
        r["failed"] = n_500 + n_timeout
    level = combine_rounds(rounds)
    assert level["errors"] == {"http_500": 6, "timeout": 4} and level["failed"] == 10
    assert level["dominant_error"] == {"type": "http_500", "http_status": 500, "count": 5}


def test_evidence_blocks_are_the_worst_rounds():
    rounds = rounds_of(3)
    rounds[1]["client"] = {**rounds[1]["client"], "client_bound": True, "reasons": ["cpu"]}
    rounds[2]["chunk_divergence"] = {"fraction": 0.5, "warning": True}
    rounds[2]["served_models"] = ["other"]
    level = combine_rounds(rounds)
    assert level["client"] == rounds[1]["client"]
    assert level["chunk_divergence"] == {"fraction": 0.5, "warning": True}
    assert level["served_models"] == ["other", "tiny"]
    assert level["warmup"]["requests"] == sum(r["warmup"]["requests"] for r in rounds)


def _server_block(generated: float, waiting: tuple[float, float, int], ttft: tuple[float, float | None]) -> dict:
    return {"path": "/metrics", "interval_s": 2.0, "includes_warmup": True, "sidecar": "x.server-metrics.jsonl",
            "errors": [], "scrapes": waiting[2], "counters": {"generated_tokens": generated},
            "gauges": {"waiting": {"mean": waiting[0], "max": waiting[1], "samples": waiting[2]}},
            "histograms": {"ttft": {"count": ttft[0], "mean_ms": ttft[1]}}}


def test_the_servers_own_figures_of_rounds_are_pooled_not_medianed():
    """Counters add up over the rounds; a gauge's mean is over all their scrapes and a histogram's
    over all their observations, as if the rounds were one level; a round without figures is said."""
    rounds = rounds_of(3)
    rounds[0]["server_metrics"] = _server_block(100, (1.0, 4, 3), (10, 20.0))
    rounds[1]["server_metrics"] = _server_block(300, (4.0, 8, 9), (30, 40.0))
    rounds[2]["server_metrics"] = {"path": "/metrics", "interval_s": 2.0, "includes_warmup": True,
                                   "sidecar": "y.server-metrics.jsonl", "errors": ["TimeoutError: timed out"],
                                   "note": "no scrape as the level ended"}
    block = combine_rounds(rounds)["server_metrics"]
    assert block["counters"] == {"generated_tokens": 400} and block["scrapes"] == 12
    assert block["gauges"]["waiting"] == {"mean": (1.0 * 3 + 4.0 * 9) / 12, "max": 8, "samples": 12}
    assert block["histograms"]["ttft"] == {"count": 40, "mean_ms": (10 * 20.0 + 30 * 40.0) / 40}
    assert block["errors"] == ["TimeoutError: timed out"]
    assert block["note"] == "1 of 3 rounds without figures: no scrape as the level ended"
    result = synthetic_result()
    result["levels"] = [combine_rounds(rounds)]
    validate(result)


def test_a_failing_round_counts_in_the_verdict():
    rounds = rounds_of(2)
    rounds[1]["failed"], rounds[1]["successful"] = 8, 0
    rounds[1]["errors"] = {"http_500": 8}
    rounds[1]["dominant_error"] = {"type": "http_500", "http_status": 500, "count": 8}
    level = combine_rounds(rounds)
    verdict = classify(Evidence(levels=(level,), identity=Identity("tiny", ("tiny",), ("tiny",))))
    assert verdict.verdict is Verdict.DEGRADED and "8/16" in verdict.reason, verdict.reason


def test_a_result_with_combined_levels_follows_the_schema():
    result = synthetic_result()
    result["levels"] = [combine_rounds(rounds_of(2, concurrency=c)) for c in (1, 2)]
    validate(result)


def test_combined_levels_keep_the_order_levels_were_first_measured():
    one, two = rounds_of(2, concurrency=1), rounds_of(2, concurrency=4)
    measured = [one[0], two[0], one[1], two[1]]  # round-major
    levels = combined_levels(measured, asked=2)
    assert [lv["concurrency"] for lv in levels] == [1, 4]
    assert levels[0]["rounds"] == one and levels[1]["rounds"] == two
    assert combined_levels(measured[:1], asked=1) == measured[:1], "one round: the level as measured"


def test_every_field_of_a_measured_level_has_a_rule():
    level = rounds_of(1)[0]
    made_here = {"round", "throughput_ci95", "uncertainty", "tokens_per_chunk"}
    assert set(level) - made_here <= set(RULES) | {f.key for f in figures.FIGURES}, "the figures declare their pooling"


# ------------------------------------------------------------------ one round: time windows within the level


def _run(requests: int, concurrency: int = 1) -> LevelRun:
    records, _ = level_records(Spec(requests=requests), concurrency)
    t_start = min(r.t_send for r in records if r.t_send is not None)
    t_end = max(r.t_end for r in records if r.t_end is not None)
    return LevelRun(LevelConfig("http://127.0.0.1:1", "tiny", concurrency, requests, 0), records, [], t_start, t_end,
                    0.0, False, None, ClientHealth(0.1, 1.0, 0.1))


@pytest.mark.parametrize("requests, windows", [(8, 4), (32, 8), (100, 8)])
def test_one_round_gets_a_within_run_interval_from_time_windows(requests, windows):
    level = summarize_level(_run(requests))
    assert level["uncertainty"] == {"basis": "within-run", "rounds": 1, "windows": windows}
    for key in ("output_throughput_tps", "request_throughput_rps"):
        interval = level["throughput_ci95"][key]
        assert interval["low"] < level[key] < interval["high"], key
        if interval["low"] > 0:  # not clipped at zero: centred on the level's own rate (batch means)
            assert (interval["low"] + interval["high"]) / 2 == pytest.approx(level[key])


def test_a_level_too_short_for_windows_says_how_many_requests_would_do():
    level = summarize_level(_run(6))
    assert level["uncertainty"] == {"basis": "within-run", "rounds": 1, "windows": None}
    assert level["throughput_ci95"]["request_throughput_rps"] == {"low": None, "high": None, "needs_n": 8}


def test_a_closed_loop_window_holds_a_wave_of_its_slots():
    """16 slots end about together: 32 requests are two waves, too few for four windows of one each."""
    level = summarize_level(_run(32, concurrency=16))
    assert level["uncertainty"]["windows"] is None
    assert level["throughput_ci95"]["request_throughput_rps"] == {"low": None, "high": None, "needs_n": 64}
    assert summarize_level(_run(100, concurrency=16))["uncertainty"]["windows"] == 6
