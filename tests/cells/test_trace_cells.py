"""Trace replay and --duration on the real llama-server with the built-in tiny model, run as a user
runs them (`pytest -m chat -k llamacpp --trace-file tests/data/traces/mooncake-small.jsonl`) in a
fresh pytest process with a cache of its own (tests/cells/test_open_loop_cells.py's helpers).

Checked: the level is named by the trace; every measured request was scheduled at its entry's
offset and sent within the lag the result records; it asked for and got the entry's output length
(the tiny profile sends ignore_eos); its prompt was the entry's input length plus the chat
template's constant (the server's usage says so); the result holds the file's sha256. And a
--duration far shorter than the requests asked for could take ends the level by itself, whatever
the host's speed, as the result says.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.setup.traces import load_trace
from tests.cells.test_open_loop_cells import cellbench, only_result
from tests.support.busy import TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S)]

TRACE_FILE = PROJECT_ROOT / "tests" / "data" / "traces" / "mooncake-small.jsonl"
# What the tiny model's chat template adds to a single user message (role headers and the
# generation prompt), in its tokens: usage.prompt_tokens - the message's own; measured with
# llama-server b11434, 2026-12-03, and the same for every entry.
TEMPLATE_TOKENS = 23


def _measured(path, result) -> list[dict]:
    sidecar = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    return sorted((r for r in sidecar if not r["warmup"]), key=lambda r: r["index"])


def test_a_mooncake_trace_replays_on_its_offsets_with_its_lengths(tmp_path):
    proc, results = cellbench(tmp_path, "--trace-file", str(TRACE_FILE.relative_to(PROJECT_ROOT)), "--warmup", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path, result = only_result(results)
    trace = load_trace(TRACE_FILE)
    sha = hashlib.sha256(TRACE_FILE.read_bytes()).hexdigest()
    (level,) = result["levels"]
    assert result["run_config"]["levels"] == ["trace mooncake-small.jsonl"]
    assert result["servers"][0]["levels"] == ["trace mooncake-small.jsonl"]
    assert result["run_config"]["load"] == {
        "mode": "trace", "trace": {"file": "mooncake-small.jsonl", "sha256": sha, "format": "mooncake",
                                   "entries": 12, "skipped": 0},
        "max_concurrency": None, "seed": 0, "slo": None}
    block = level["open_loop"]
    assert block["arrivals"] == "trace" and block["trace"]["sha256"] == sha and block["trace"]["sent"] == 12
    assert level["num_requests"] == 12 and level["successful"] == 12
    measured = _measured(path, result)
    assert len(measured) == len(trace.entries)
    t0 = measured[0]["t_sched"]
    lags = []
    for r, entry in zip(measured, trace.entries, strict=True):
        assert r["t_sched"] - t0 == pytest.approx(entry.offset_s, abs=1e-6), r["index"]
        assert r["trace"] == {"file": "mooncake-small.jsonl", "sha256": sha}
        assert r["max_tokens"] == entry.output_tokens and r["output_tokens"] == entry.output_tokens
        assert r["usage_completion_tokens"] == entry.output_tokens
        assert r["usage_prompt_tokens"] == entry.input_tokens + TEMPLATE_TOKENS, "the message is its input length"
        lags.append(r["t_send"] - r["t_sched"])
    # How late a send went is the host's doing; that the result records it truly is cellbench's.
    assert all(lag >= 0 for lag in lags) and max(lags) * 1000 <= level["schedule_lag_ms"]["max"] + 1e-6
    assert level["client"]["schedule_lag_p99_ms"] <= level["schedule_lag_ms"]["max"] + 1e-6
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat replaying mooncake-small.jsonl")
    assert "llamacpp-chat " in proc.stdout and ": trace mooncake-small.jsonl " in proc.stdout
    report = (path.parent / "REPORT.md").read_text()
    section = report[report.index("## Trace mooncake-small.jsonl\n"):]  # a trace's own table, not a rate's
    section = section[:section.index("\n## ", 1)]
    assert "| Offered rate (req/s) |" in section and "| Achieved rate (req/s) |" in section, section
    assert "## Request rate" not in report


def test_a_duration_ends_a_level_that_could_not_have_finished_its_requests(tmp_path):
    # 5000 chat requests at c=2 take the tiny model minutes on any host; the duration is 3 s
    proc, results = cellbench(tmp_path, "--concurrency", "2", "--requests", "5000", "--duration", "3s",
                              "--warmup", "0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    path, result = only_result(results)
    (level,) = result["levels"]
    bound = level["duration"]
    assert bound["limit_s"] == 3.0 and bound["ended_by"] == "duration" and bound["asked"] == 5000
    assert 0 < bound["sent"] == level["num_requests"] < 5000
    assert not level["partial"] and level["stop_reason"] is None, "a duration is the level's end, not a cut"
    assert result["run_config"]["load"] == {"mode": "closed", "slo": None, "duration_s": 3.0}
    measured = _measured(path, result)
    t0 = min(r["t_sched"] for r in measured)
    assert all(r["t_send"] <= t0 + 3.0 + level["schedule_lag_ms"]["max"] / 1000 + 0.05 for r in measured)
    assert level["failed"] == 0, "the requests in flight at the duration finished"
    assert result["verdict"]["verdict"] != "capped"
    assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat with --duration 3s")
