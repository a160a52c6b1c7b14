"""Every request of a cell on a timeline, from its request log (`<framework>_<run id>.requests.jsonl`).

A request is a bar in up to three parts: *queued* (scheduled to sent: an open-loop arrival waiting
for a place, or a client that fell behind), *to first token* (sent to the first output chunk) and
*decoding* (first chunk to the end). A gap between two output chunks of more than SLOW_GAP_FACTOR
times the level's median gap, and at least SLOW_GAP_MIN_S, is a *slow gap*, marked inside the
decoding part; a failed request is marked with its error type and message. The log does not say
which client slot sent a request, so the requests of a level are laid on *lanes*: the fewest rows
on which no two of them overlap, which for a closed-loop level is at most its concurrency.

`trace.chrome_trace` writes a cell's timelines as a Chrome trace event file (the JSON object form of
Google's Trace Event Format: complete `X` events with microsecond `ts` and `dur`, `i` instants,
`M` metadata naming each process and thread), which Perfetto (ui.perfetto.dev) and
chrome://tracing open: one process per level (and round), one thread per lane, each request's
parts nested inside its bar. `cellbench report --timeline-trace` writes one beside each request
log (bench.reports.rebuild). `svg.timelines_html` draws them in the HTML review's expanded row.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.level_run import level_key
from bench.reports.csv_export import level_text

SLOW_GAP_FACTOR = 5.0  # a gap this many times the level's median inter-chunk gap is slow ...
SLOW_GAP_MIN_S = 0.05  # ... and never one under 50 ms, however fast the level's median


@dataclass(frozen=True)
class Part:
    """One stretch of a request: "queued", "to first token", "decoding" or a "slow gap"."""
    name: str
    start: float
    end: float


@dataclass(frozen=True)
class Bar:
    """One request on its lane: its parts in time order, slow gaps among them, and its error."""
    index: int
    prompt: str
    warmup: bool
    lane: int
    start: float
    end: float
    parts: tuple[Part, ...]
    error: str | None
    output_tokens: int | None


@dataclass(frozen=True)
class LevelTimeline:
    """The bars of one level (and round), with the slow-gap threshold its median gap gave."""
    label: str
    bars: tuple[Bar, ...]
    slow_gap_s: float | None  # None: no request of the level had two chunks

    @property
    def lanes(self) -> int:
        return 1 + max((b.lane for b in self.bars), default=-1)


def _label(raw: dict[str, Any]) -> str:
    text = level_text(level_key(raw))
    return text if raw.get("round") is None else f"{text}, round {raw['round']}"


def _gaps(raw: dict[str, Any]) -> list[tuple[float, float]]:
    times = raw.get("chunk_times") or []
    return list(zip(times, times[1:], strict=False))


def _parts(raw: dict[str, Any], slow_gap_s: float | None) -> tuple[float, float, tuple[Part, ...]]:
    sched, send, first, end = raw.get("t_sched"), raw.get("t_send"), raw.get("t_first_token"), raw.get("t_end")
    send = send if send is not None else sched
    start = sched if sched is not None else send
    if start is None:
        raise ValueError(f"request {raw.get('index')} has no t_sched or t_send")
    stop = max(x for x in (start, send, first, end) if x is not None)
    parts = []
    if send is not None and send > start:
        parts.append(Part("queued", start, send))
    if send is not None:
        parts.append(Part("to first token", send, first if first is not None else stop))
    if first is not None and stop > first:
        parts.append(Part("decoding", first, stop))
        if slow_gap_s is not None:
            parts += [Part("slow gap", a, b) for a, b in _gaps(raw) if b - a > slow_gap_s]
    return start, stop, tuple(parts)


def _lanes(spans: list[tuple[float, float]]) -> list[int]:
    """The lane of each span: the lowest-numbered one free at its start (spans sorted by start)."""
    free_at: list[float] = []
    lanes = []
    for start, end in spans:
        lane = next((k for k, t in enumerate(free_at) if t <= start), len(free_at))
        if lane == len(free_at):
            free_at.append(end)
        else:
            free_at[lane] = end
        lanes.append(lane)
    return lanes


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('message', '')}".rstrip(": ")
    return str(error)


def level_timelines(records: Iterable[dict[str, Any]]) -> list[LevelTimeline]:
    """The timelines of a request log's lines, one per level (and round), in the order the log holds them."""
    by_level: dict[str, list[dict[str, Any]]] = {}
    for raw in records:
        by_level.setdefault(_label(raw), []).append(raw)
    timelines = []
    for label, raws in by_level.items():
        gaps = [b - a for raw in raws if raw.get("error") is None and not raw.get("warmup") for a, b in _gaps(raw)]
        slow = max(SLOW_GAP_FACTOR * statistics.median(gaps), SLOW_GAP_MIN_S) if gaps else None
        made = sorted(((_parts(raw, slow), raw) for raw in raws
                       if raw.get("t_sched") is not None or raw.get("t_send") is not None), key=lambda m: m[0][:2])
        lanes = _lanes([(start, stop) for (start, stop, _), _ in made])
        bars = tuple(Bar(index=int(raw["index"]), prompt=str(raw.get("prompt_name") or ""),
                         warmup=bool(raw.get("warmup")), lane=lane, start=start, end=stop, parts=parts,
                         error=_error_text(raw.get("error")),
                         output_tokens=raw.get("usage_completion_tokens") or raw.get("output_tokens"))
                     for ((start, stop, parts), raw), lane in zip(made, lanes, strict=True))
        timelines.append(LevelTimeline(label, bars, slow))
    return timelines


def read_timelines(sidecar: Path) -> list[LevelTimeline]:
    with sidecar.open() as lines:
        return level_timelines(json.loads(line) for line in lines if line.strip())
