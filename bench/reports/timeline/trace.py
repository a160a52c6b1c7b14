"""A cell's timelines as a Chrome trace event file (bench.reports.timeline says what they hold)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.reports.timeline import Bar, LevelTimeline, read_timelines

TRACE_SUFFIX = ".trace.json"


def _span(start: float, end: float, t0: float) -> dict[str, int]:
    """`ts` and `dur` in whole microseconds from t0, both from rounded ends: integers, so a part inside
    its bar stays inside however a viewer adds them."""
    ts = round((start - t0) * 1e6)
    return {"ts": ts, "dur": round((end - t0) * 1e6) - ts}


def _bar_events(bar: Bar, pid: int, t0: float) -> Iterator[dict[str, Any]]:
    tid = bar.lane + 1
    what = "warm-up request" if bar.warmup else "request"
    name = f"{what} {bar.index}" + (" failed" if bar.error else "")
    args: dict[str, Any] = {"prompt": bar.prompt, "output_tokens": bar.output_tokens}
    if bar.error:
        args["error"] = bar.error
    yield {"name": name, "cat": "request", "ph": "X", **_span(bar.start, bar.end, t0),
           "pid": pid, "tid": tid, "args": args, **({"cname": "terrible"} if bar.error else {})}
    for part in bar.parts:
        yield {"name": part.name, "cat": "slow" if part.name == "slow gap" else "phase", "ph": "X",
               **_span(part.start, part.end, t0), "pid": pid, "tid": tid,
               "args": {"ms": round((part.end - part.start) * 1e3, 3)},
               **({"cname": "bad"} if part.name == "slow gap" else {})}
    if bar.error:
        yield {"name": "failed", "cat": "error", "ph": "i", "s": "t", "ts": _span(bar.end, bar.end, t0)["ts"],
               "pid": pid, "tid": tid, "args": {"error": bar.error}}


def _meta(kind: str, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    """A metadata event: `kind` is process_name, thread_name, a sort index or process_labels."""
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": args}


def chrome_trace(cell: str, timelines: list[LevelTimeline], about: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Chrome trace event file (JSON object form) of one cell's timelines: a process per level,
    a thread per lane; times in microseconds from the cell's first request."""
    t0 = min((b.start for tl in timelines for b in tl.bars), default=0.0)
    events: list[dict[str, Any]] = []
    for pid, tl in enumerate(timelines, start=1):
        gap = f"slow gap > {tl.slow_gap_s * 1e3:.0f} ms" if tl.slow_gap_s is not None else "no chunk gaps"
        events += [_meta("process_name", pid, 0, name=f"{cell} {tl.label}"),
                   _meta("process_labels", pid, 0, labels=gap), _meta("process_sort_index", pid, 0, sort_index=pid)]
        for tid in range(1, tl.lanes + 1):
            events += [_meta("thread_name", pid, tid, name=f"lane {tid}"),
                       _meta("thread_sort_index", pid, tid, sort_index=tid)]
        for bar in tl.bars:
            events.extend(_bar_events(bar, pid, t0))
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"cell": cell, **(about or {})}}


def write_trace(sidecar: Path, cell: str, about: dict[str, Any] | None = None) -> Path:
    """`<stem>.trace.json` beside `sidecar` (`<stem>.requests.jsonl`); its path."""
    path = sidecar.with_name(sidecar.name.removesuffix(".requests.jsonl") + TRACE_SUFFIX)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(chrome_trace(cell, read_timelines(sidecar), about), separators=(",", ":")) + "\n")
    tmp.replace(path)
    return path
