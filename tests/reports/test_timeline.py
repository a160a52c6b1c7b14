"""Request timelines (bench.reports.timeline): lanes, parts, slow gaps and failures right by hand, and
the Chrome trace `cellbench report --timeline-trace` writes valid against the Trace Event Format
(its JSON object form, as Perfetto and chrome://tracing read it) with every slice of a thread
nested, as a viewer's parser requires; on a real llamacpp cell's request log too."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.reports.timeline import SLOW_GAP_MIN_S, level_timelines
from bench.reports.timeline.trace import chrome_trace
from tests.cells.test_open_loop_cells import cellbench

# The Trace Event Format's JSON object form, for the phases a timeline uses: complete events (X)
# with a duration, instants (i) with a scope, and metadata (M) naming processes and threads.
TRACE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {"type": "array", "items": {"$ref": "#/$defs/event"}},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
    },
    "$defs": {
        "event": {
            "type": "object",
            "required": ["name", "ph", "pid", "tid"],
            "properties": {"name": {"type": "string"}, "cat": {"type": "string"}, "ph": {"enum": ["X", "i", "M"]},
                           "pid": {"type": "integer"}, "tid": {"type": "integer"}, "args": {"type": "object"},
                           "cname": {"enum": ["good", "bad", "terrible", "grey", "yellow", "olive"]}},
            "allOf": [
                {"if": {"properties": {"ph": {"const": "X"}}},
                 "then": {"required": ["ts", "dur"], "properties": {"ts": {"type": "number", "minimum": 0},
                                                                   "dur": {"type": "number", "minimum": 0}}}},
                {"if": {"properties": {"ph": {"const": "i"}}},
                 "then": {"required": ["ts", "s"], "properties": {"ts": {"type": "number", "minimum": 0},
                                                                 "s": {"enum": ["g", "p", "t"]}}}},
                {"if": {"properties": {"ph": {"const": "M"}}},
                 "then": {"required": ["args"], "properties": {
                     "name": {"enum": ["process_name", "process_labels", "process_sort_index", "thread_name",
                                       "thread_sort_index"]}}}},
            ],
        },
    },
}


def check_trace(trace: dict[str, Any]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Fail unless `trace` is a valid trace event file whose complete events nest on every thread
    (a slice ends inside the one it starts in); returns the X events per (pid, tid)."""
    trace = json.loads(json.dumps(trace))  # what a viewer reads: plain JSON
    jsonschema.validate(trace, TRACE_SCHEMA)
    threads: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    named = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    for event in trace["traceEvents"]:
        if event["ph"] == "X":
            threads[(event["pid"], event["tid"])].append(event)
    for thread, events in threads.items():
        assert thread in named, f"thread {thread} has no name"
        open_ends: list[float] = []
        for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            end = e["ts"] + e["dur"]
            assert not open_ends or end <= open_ends[-1], f"{e} overlaps the slice it starts in on {thread}"
            open_ends.append(end)
    return threads


def record(index: int, send: float, first: float | None, end: float, *, gaps: list[float] | None = None,
           sched: float | None = None, error: dict | None = None, warmup: bool = False, c: int | None = 2) -> dict:
    chunks = [] if first is None else [first + sum((gaps or [])[:k]) for k in range(len(gaps or []) + 1)]
    return {"concurrency": c, "index": index, "prompt_name": f"p{index}", "warmup": warmup,
            "t_sched": send if sched is None else sched, "t_send": send, "t_first_token": first, "t_end": end,
            "chunk_times": chunks, "error": error, "usage_completion_tokens": len(chunks) or None}


STEADY = [0.01] * 9  # ten chunks 10 ms apart: a median gap of 10 ms


def test_a_closed_loop_level_on_its_lanes_with_its_slow_gap_and_its_failure():
    records = [
        record(0, 100.0, 100.2, 100.29, gaps=STEADY, warmup=True),
        record(0, 100.3, 100.5, 100.59, gaps=STEADY),
        record(1, 100.3, 100.4, 100.9, gaps=[0.01] * 4 + [0.4] + [0.01] * 4),  # one gap of 400 ms
        record(2, 100.6, None, 100.65, error={"type": "http_error", "message": "HTTP 500"}),
        record(3, 100.66, 100.7, 100.79, gaps=STEADY),
    ]
    (level,) = level_timelines(records)
    assert level.label == "c=2" and level.slow_gap_s == pytest.approx(max(5 * 0.01, SLOW_GAP_MIN_S))
    assert level.lanes == 2, "two at a time need two lanes"
    by_index = {(b.index, b.warmup): b for b in level.bars}
    assert [p.name for p in by_index[(1, False)].parts] == ["to first token", "decoding", "slow gap"]
    gap = by_index[(1, False)].parts[-1]
    assert (gap.start, gap.end) == pytest.approx((100.44, 100.84))
    assert [p.name for p in by_index[(0, False)].parts] == ["to first token", "decoding"], "10 ms gaps are not slow"
    failed = by_index[(2, False)]
    assert failed.error == "http_error: HTTP 500" and [p.name for p in failed.parts] == ["to first token"]
    assert by_index[(0, True)].warmup and by_index[(0, True)].lane == 0

    threads = check_trace(chrome_trace("llamacpp chat", [level]))
    bars = [e for events in threads.values() for e in events if e["cat"] == "request"]
    assert sorted(e["name"] for e in bars) == ["request 0", "request 1", "request 2 failed", "request 3",
                                               "warm-up request 0"]
    (failed_bar,) = [e for e in bars if e["name"] == "request 2 failed"]
    assert failed_bar["args"]["error"] == "http_error: HTTP 500" and failed_bar["cname"] == "terrible"
    (slow,) = [e for events in threads.values() for e in events if e["name"] == "slow gap"]
    assert slow["dur"] == pytest.approx(400_000, abs=1) and slow["args"]["ms"] == pytest.approx(400)


def test_an_open_loop_arrival_that_waited_for_a_place_shows_its_queue():
    late = record(1, 10.5, 10.6, 10.7, sched=10.1, gaps=STEADY, c=None)
    first = record(0, 10.0, 10.1, 10.5, gaps=STEADY, c=None)
    for r in (late, first):
        r.update(request_rate=5.0, burstiness=1.0, max_concurrency=1)
        del r["concurrency"]
    (level,) = level_timelines([first, late])
    assert level.label == "rate=5"
    queued = [b for b in level.bars if b.index == 1][0].parts[0]
    assert (queued.name, queued.start, queued.end) == ("queued", 10.1, 10.5)
    assert level.lanes == 2, "the arrival waiting for the one place is a second row"
    check_trace(chrome_trace("x chat", [level]))


def test_rounds_are_levels_of_their_own_in_the_order_the_log_holds_them():
    rows = [{**record(0, 1.0, 1.1, 1.2, gaps=STEADY, c=1), "round": 1},
            {**record(0, 5.0, 5.1, 5.2, gaps=STEADY, c=1), "round": 2}]
    assert [tl.label for tl in level_timelines(rows)] == ["c=1, round 1", "c=1, round 2"]
    trace = chrome_trace("x chat", level_timelines(rows))
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert names == ["x chat c=1, round 1", "x chat c=1, round 2"]


@pytest.mark.integration
@pytest.mark.session
def test_cellbench_report_writes_a_valid_trace_of_a_real_cells_every_request(tmp_path):
    proc, results = cellbench(tmp_path, "--requests", "6", "--concurrency", "1,3", "--warmup", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    cmd = [sys.executable, "-m", "bench.cli", "report", "--results-dir", str(results), "--timeline-trace"]
    done = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = [Path(line) for line in done.stdout.splitlines() if line.endswith(".trace.json")]
    sidecar = path.with_name(path.name.replace(".trace.json", ".requests.jsonl"))
    logged = [json.loads(line) for line in sidecar.read_text().splitlines()]
    trace = json.loads(path.read_text())
    threads = check_trace(trace)
    assert trace["otherData"]["cell"] == "llamacpp chat" and trace["otherData"]["run_id"]
    bars = [e for events in threads.values() for e in events if e["cat"] == "request"]
    assert len(bars) == len(logged) == 2 * (6 + 1), "every request, warm-ups included, is a bar"
    levels = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert sorted(levels.values()) == ["llamacpp chat c=1", "llamacpp chat c=3"]
    for pid, name in levels.items():
        lanes = {tid for (p, tid) in threads if p == pid}
        assert 1 <= len(lanes) <= int(name.rsplit("=", 1)[1]), (name, lanes)  # at most its concurrency at once
