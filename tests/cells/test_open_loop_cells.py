"""Open-loop cells against the real llama-server on the built-in tiny model, run as a user runs
them: `pytest -m chat -k llamacpp --request-rate 4 --requests 40` in a fresh pytest process, with a
cache of its own (`CELLBENCH_CACHE`: its own host lock, the shared framework builds and models).
Checked: the result's levels are labelled by rate, the requests went out on the level's seeded
schedule (never early; how late, the result says), and an SLO sweep reports goodput and the
highest rate that met the SLOs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT, cache_root
from bench.core.metrics import percentile
from bench.core.result.files import validate
from bench.load.arrivals import arrival_offsets
from tests.support.busy import (
    HOST_LOCK_WAIT_S,
    SESSION_TIMEOUT_S,
    TEST_TIMEOUT_S,
    assert_ok_unless_client_limited,
    client_limited,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]


def private_cache(tmp_path: Path) -> Path:
    """A cache of this test's own (`CELLBENCH_CACHE`) over the user's framework builds and models."""
    cache = tmp_path / "x-cache"
    cache.mkdir()
    for part in ("frameworks", "models"):
        (cache / part).symlink_to(cache_root() / part, target_is_directory=True)
    return cache


def cellbench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """`pytest -m chat -k llamacpp ARGS` in a fresh process; returns it and its results root."""
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "llamacpp", *args,
           "--port", "0", "--results-dir", str(results), "--host-lock-timeout", str(HOST_LOCK_WAIT_S)]
    env = {**os.environ, "CELLBENCH_CACHE": str(private_cache(tmp_path))}
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=SESSION_TIMEOUT_S)
    return proc, results


def only_result(results: Path) -> tuple[Path, dict]:
    (path,) = sorted(p for p in results.rglob("llamacpp_*.json"))
    data = json.loads(path.read_text())
    validate(data)
    return path, data


def test_the_issues_command_gives_levels_labelled_by_rate_sent_on_their_schedule(tmp_path):
    proc, results = cellbench(tmp_path, "--request-rate", "4", "--requests", "40", "--price-kwh", "0.3",
                              "--price-hour", "2.5")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path, result = only_result(results)
    (level,) = result["levels"]
    # its cost at those prices: the hour's share over its tokens; the energy part where this machine reads power
    cost, tokens = level["cost"], level["output_tokens_total"]
    assert (cost["price_kwh"], cost["price_hour"]) == (0.3, 2.5)
    assert cost["time_per_mtok"] == pytest.approx(2.5 * level["wall_time_s"] / 3600 / tokens * 1e6)
    if level["energy"].get("sources"):
        assert cost["energy_per_mtok"] is not None and cost["per_mtok"] == pytest.approx(
            cost["energy_per_mtok"] + cost["time_per_mtok"])
    else:
        assert cost["energy_per_mtok"] is None and cost["per_mtok"] is None
        assert cost["unknown"] == [f"energy: {level['energy']['note']}"]
    assert level["request_rate"] == 4 and "concurrency" not in level
    assert result["run_config"]["levels"] == ["4 req/s"] and result["servers"][0]["levels"] == ["4 req/s"]
    assert result["run_config"]["load"] == {"mode": "open", "request_rates": [4], "burstiness": 1.0,
                                            "max_concurrency": None, "seed": 0, "slo": None, "sweep": None}
    assert level["num_requests"] == 40 and level["open_loop"]["arrivals"] == "poisson"
    assert level["open_loop"]["queued"] == 0 and level["queue_delay_ms"]["max"] == 0.0
    # the requests went out on the seeded schedule: send offsets equal the scheduled ones
    sidecar = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    measured = sorted((r for r in sidecar if not r["warmup"]), key=lambda r: r["index"])
    assert all(r["request_rate"] == 4 for r in sidecar) and len(measured) == 40
    t0 = measured[0]["t_sched"]
    for r, offset in zip(measured, arrival_offsets(4.0, 1.0, 40, seed=0), strict=True):
        assert r["t_sched"] - t0 == pytest.approx(offset, abs=1e-6)
        assert r["t_send"] >= r["t_sched"], r["index"]  # never early
    # How late a send went is the host's doing (beside `stress-ng --cpu 2`, 259 ms once); that the
    # result says it truly, and that a late client is a client-limited verdict, is cellbench's.
    lags = [r["t_send"] - r["t_sched"] for r in measured]
    assert level["client"]["schedule_lag_p99_ms"] == pytest.approx(percentile(lags, 99) * 1000, abs=1e-6)
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat at 4 req/s")
    if level["client"]["schedule_lag_p99_ms"] > 50:
        assert client_limited(result["verdict"]) and "schedule lag p99" in result["verdict"]["reason"]
    assert f"llamacpp-chat {result['verdict']['verdict']}: 4 req/s " in proc.stdout
    report = (path.parent / "REPORT.md").read_text()
    assert "## Request rate 4 req/s" in report and "## Concurrency" not in report
    assert "| Of it, the machine's time (currency) |" in report
    assert (path.parent / "plots" / "throughput_rate.png").is_file()


def test_an_slo_sweep_reports_goodput_and_the_highest_rate_meeting_it(tmp_path):
    proc, results = cellbench(tmp_path, "--request-rate", "sweep:0.5", "--slo", "e2el_p50=120s,ttft_p90=60s",
                              "--requests", "6", "--warmup", "1", "--sweep-levels", "3", "--share-server")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path, result = only_result(results)
    sweep = result["sweep"]
    assert sweep["slo"] == {"e2el_p50": 120000.0, "ttft_p90": 60000.0} and sweep["start_rps"] == 0.5
    assert sweep["rates"][0] == 0.5 and len(sweep["rates"]) <= 3 and sweep["stopped"]
    assert [lv["request_rate"] for lv in result["levels"]] == sweep["rates"]
    assert [lv["goodput"]["slo_met"] for lv in result["levels"]] == sweep["passed"]
    for level in result["levels"]:
        block = level["goodput"]
        assert block["goodput_rps"] == pytest.approx(block["good_requests"] / level["wall_time_s"])
    if sweep["best_rps"] is not None:
        best = next(lv for lv in result["levels"] if lv["request_rate"] == sweep["best_rps"])
        assert sweep["goodput_rps"] == best["goodput"]["goodput_rps"]
    assert result["run_config"]["levels"] == ["sweep"] and result["run_config"]["load"]["sweep"] == {
        "start_rps": 0.5, "tolerance": 0.1, "max_levels": 3}
    # with 95% confidence: 6 requests can never show a p90 met (that takes 29 all within), so no level
    # is met; the answer keeps each undecided rate apart
    assert sweep["decisions"] == [lv["goodput"]["slo_decision"] for lv in result["levels"]]
    for level in result["levels"]:
        p90 = level["goodput"]["slo_verdicts"]["ttft_p90"]
        assert p90["decision"] != "met" and p90["requests"] == 6, p90
        assert p90["within"] < 6 or (p90["decision"], p90["decides_at"]) == ("cannot tell", 29), p90
    assert sweep["best_met_rps"] is None
    assert sweep["undecided_rps"] == sorted(r for r, d in zip(sweep["rates"], sweep["decisions"], strict=True)
                                            if d == "cannot tell")
    report = (path.parent / "REPORT.md").read_text()
    assert "## SLO sweep" in report and "| Goodput (req/s) |" in report
    assert "| At 95% confidence |" in report and "| SLO at 95% confidence |" in report


def test_a_sweep_from_far_above_capacity_stops_over_saturated_levels_and_answers_with_confidence(tmp_path):
    """--max-concurrency 1 holds the server to one request at a time, so it serves at most 1/S
    requests a second, S the time of one request (tens of milliseconds at least for the tiny model's
    answers on any host here): a sweep that starts at 300 req/s starts far above it, whatever the
    host. Its first level's queue grows from the start and the over-saturation stop ends it early,
    marked, as missed; the sweep halves down from there. How far down it must go before a level is
    met is the host's speed; the answer's shape is cellbench's: the highest rate met at 95%, the
    lowest missed above it, the undecided ones apart."""
    proc, results = cellbench(tmp_path, "--request-rate", "sweep:300", "--max-concurrency", "1", "--requests",
                              "6000", "--duration", "8s", "--warmup", "1", "--slo", "ttft_p90=60s",
                              "--sweep-levels", "6", "--share-server")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path, result = only_result(results)
    sweep, levels = result["sweep"], result["levels"]
    first = levels[0]
    assert first["request_rate"] == 300 and first["partial"] and first["stop_reason"].startswith("over-saturated")
    over = first["over_saturated"]
    assert over["reason"] == first["stop_reason"] and over["arrived"] >= 30
    assert over["arrived"] - over["ended"] >= max(0.25 * over["arrived"], 3 * over["arrived"] ** 0.5)
    assert over["cut"] <= 1, "one place: at most one request was in flight to cut"
    assert first["num_requests"] + over["cut"] + over["unsent"] <= 6000 and over["unsent"] > 0
    assert first["failed"] == 0, "the cut requests are not the server's failures"
    assert first["goodput"]["slo_decision"] == "missed" and sweep["decisions"][0] == "missed"
    assert result["run_config"]["load"]["stop_over_saturated"] is True
    assert "over-saturated" in result["verdict"]["annotations"]
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat sweep from 300 req/s")
    # the answer with 95% confidence, consistent with each level's decision
    decided = dict(zip(sweep["rates"], sweep["decisions"], strict=True))
    assert sweep["lowest_missed_rps"] is not None and decided[sweep["lowest_missed_rps"]] == "missed"
    if sweep["best_met_rps"] is not None:
        assert decided[sweep["best_met_rps"]] == "met" and sweep["best_met_rps"] < sweep["lowest_missed_rps"]
    assert sweep["undecided_rps"] == sorted(r for r, d in decided.items() if d == "cannot tell")
    for level in levels:  # every level that stopped so is marked, and counted as missed
        if "over_saturated" in level:
            assert level["goodput"]["slo_decision"] == "missed" and level["stop_reason"].startswith("over-saturated")
    report = (path.parent / "REPORT.md").read_text()
    assert "| Cut when over-saturated (requests) |" in report and "over-saturated" in report
