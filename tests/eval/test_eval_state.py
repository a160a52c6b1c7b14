"""run-state.json, the rounds' spread, and GPU leases."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from bench.eval import gpus
from bench.eval.row import sanity, spread
from bench.eval.state import RunState, refreshed_rows


def _row(row_id: str, status: str = "ok", reason: str = "") -> dict:
    return {"id": row_id, "status": status, "reason": reason, "fail_excerpt": "a\nb\nc\nd", "rounds": []}


def test_state_is_written_after_every_row_and_stores_its_summary(tmp_path):
    state = RunState(tmp_path, {"model": "tiny", "hardware": "Intel Xeon"})
    state.record_row(_row("a"))
    on_disk = json.loads((tmp_path / "run-state.json").read_text())
    assert [r["id"] for r in on_disk["rows"]] == ["a"] and on_disk["rows"][0]["edit"] == {"status": "pending"}
    state.record_row(_row("b", "fail", "round 1: client exit 2"))
    state.record_row({"id": "c", "status": "skipped", "reason": "vllm does not run here", "rounds": []})
    state.record_edit("a", {"status": "ok", "action": "appended"})
    state.record_edit("b", {"status": "skipped", "reason": "row fail"})
    state.write(finished=True)
    summary = json.loads((tmp_path / "run-state.json").read_text())["summary"]
    assert summary["ran_ok"] == 1 and summary["ran"] == 2 and summary["appended"] == 1 and summary["replaced"] == 0
    assert summary["failed_runs"] == [{"id": "b", "reason": "round 1: client exit 2", "excerpt": "b\nc\nd"}]
    lines = state.summary_lines()
    assert lines[0] == "ran ok: 1/2 (1 skipped)" and "FAILED RUN b: round 1: client exit 2" in lines


def test_retry_reads_which_rows_already_landed(tmp_path):
    state = RunState(tmp_path, {})
    for row_id, edit in [("done", {"status": "ok", "action": "replaced"}), ("edit-failed", {"status": "fail"}),
                         ("smoke", {"status": "skipped"})]:
        state.record_row({**_row(row_id), "edit": edit})
    state.record_row(_row("run-failed", "fail"))
    assert refreshed_rows(tmp_path) == {"done"}
    assert refreshed_rows(tmp_path / "run-state.json") == {"done"}
    with pytest.raises(ValueError, match="cannot read"):
        refreshed_rows(tmp_path / "nowhere")


def test_spread_keeps_every_round_and_its_mean_and_stdev():
    rounds = [{"values": {"accuracy": {"v": v}, "label": {"v": "x"}}} for v in (0.5, 0.7, 0.6)]
    out = spread(rounds)
    acc = out["accuracy"]["v"]
    assert acc["values"] == [0.5, 0.7, 0.6] and acc["min"] == 0.5 and acc["max"] == 0.7
    assert acc["mean"] == pytest.approx(0.6) and acc["stdev"] == pytest.approx(0.1)
    assert out["label"]["v"] == {"values": ["x", "x", "x"]}


@pytest.mark.parametrize(("result", "problem"), [
    ({}, "no summary block"),
    ({"summary": {"total_samples": 0}}, "no samples"),
    ({"summary": {"total_samples": 10, "failed_requests": 6}}, "6 of 10 requests failed"),
    ({"summary": {"total_samples": 10}, "speed": {"failed_requests": 6}}, "6 of 10 requests failed"),
    # a wrong model is not a broken run
    ({"summary": {"total_samples": 10, "failed_requests": 5, "accuracy": 0.0}}, None),
])
def test_sanity_judges_the_run_not_the_model(result, problem):
    found = sanity(result)
    assert (found is None) if problem is None else (problem in found)


def _hold(pool, count, lock_dir, seconds, queue):
    with gpus.lease(pool, count, lock_dir, timeout_s=10, poll_s=0.05) as leased:
        queue.put((time.monotonic(), leased))
        time.sleep(seconds)


def test_leases_in_two_processes_get_disjoint_gpus(tmp_path):
    queue = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(target=_hold, args=((0, 1), 1, tmp_path, 0.5, queue))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=10) for _ in procs]
    for p in procs:
        p.join(10)
    assert sorted(g for _, (g,) in got) == [0, 1]
    assert abs(got[0][0] - got[1][0]) < 0.4  # both ran at once: nobody waited for the other's GPU


def test_a_lease_waits_for_a_busy_gpu_and_times_out_naming_the_pool(tmp_path):
    with gpus.lease((3,), 1, tmp_path, timeout_s=1) as leased:
        assert leased == (3,)
        t0 = time.monotonic()
        with (pytest.raises(TimeoutError, match=r"pool \[3\]"),
              gpus.lease((3,), 1, tmp_path, timeout_s=0.3, poll_s=0.05)):
            pass
        assert time.monotonic() - t0 >= 0.3
    with gpus.lease((3,), 1, tmp_path, timeout_s=1) as again:  # released with the block
        assert again == (3,)


@pytest.mark.parametrize("text", ["", "a", "0,0", "-1"])
def test_a_bad_pool_is_refused(text):
    with pytest.raises(ValueError):
        gpus.parse_pool(text)


def test_an_edit_warning_is_in_the_summary_and_its_lines(tmp_path):
    from bench.eval.state import RunState

    state = RunState(tmp_path, {"model": "m"})
    state.record_row({"id": "seedtts-en", "status": "ok", "reason": ""})
    state.record_edit("seedtts-en", {"status": "ok", "action": "replaced", "reason": "replaced line 12",
                                     "warning": "overwrites an n=3 mean row with a single-round value"})
    assert state.summary()["edit_warnings"] == [
        {"id": "seedtts-en", "warning": "overwrites an n=3 mean row with a single-round value"}]
    assert "WARNING seedtts-en: overwrites an n=3 mean row with a single-round value" in state.summary_lines()
