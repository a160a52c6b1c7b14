"""Request traces read from their files: mooncake's JSONL and BurstGPT's CSV, as one typed `Trace`.

A trace is a list of requests with their arrival times and token lengths, recorded from a
production service, that cellbench replays as an open-loop level (the file's offsets are the
schedule). The two formats, told apart by the content, not the file name:

- mooncake (JSONL): one object per line, `{"timestamp": ms, "input_length": n, "output_length": m,
  "hash_ids": [...]}`; `timestamp` is milliseconds, `hash_ids` (optional) one id per 512-token
  block of the input, so two requests whose lists open with the same ids share that prefix;
- BurstGPT (CSV): the header `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`,
  `Timestamp` in seconds; a row with 0 response tokens is a request that failed in the original log,
  and no replay can ask for max_tokens 0, so it is skipped and counted.

Every entry is checked: a bad one raises `TraceError` naming the file and the line, since a wrong
trace silently replayed would measure a load nobody asked for.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MOONCAKE, BURSTGPT = "mooncake", "burstgpt"
BURSTGPT_HEADER = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
HASH_BLOCK_TOKENS = 512  # mooncake: the tokens each hash id stands for
TRACE_SUFFIXES = (".jsonl", ".csv")


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message names the file and the line."""


@dataclass(frozen=True)
class TraceEntry:
    """One request of a trace."""

    offset_s: float  # arrival, seconds after the trace's first entry
    input_tokens: int  # the user message's length in the model's tokens
    output_tokens: int  # sent as max_tokens
    hash_ids: tuple[int, ...] = ()  # mooncake: one id per 512-token block of the input
    line: int = 0  # 1-based line of the file, for messages


@dataclass(frozen=True)
class Trace:
    path: Path
    format: str  # MOONCAKE or BURSTGPT
    sha256: str  # of the file's bytes
    entries: tuple[TraceEntry, ...]
    skipped: int = 0  # BurstGPT rows with 0 response tokens (failed in the original log)

    @property
    def name(self) -> str:
        return self.path.name


def load_trace(path: Path) -> Trace:
    """The trace in `path`, of either format; TraceError for anything that cannot be replayed."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise TraceError(f"{path}: empty: a trace has one request per line")
    if first.startswith("{"):
        fmt, entries, skipped = MOONCAKE, _mooncake(path, text), 0
    elif tuple(c.strip() for c in first.split(",")) == BURSTGPT_HEADER:
        fmt, (entries, skipped) = BURSTGPT, _burstgpt(path, text)
    else:
        raise TraceError(f"{path}: line 1 is neither a mooncake JSON object nor BurstGPT's CSV header "
                         f"({','.join(BURSTGPT_HEADER)})")
    if not entries:
        raise TraceError(f"{path}: no request to replay" + (f" ({skipped} rows with 0 response tokens skipped)"
                                                           if skipped else ""))
    start = entries[0][0]
    timed = tuple(TraceEntry(t - start, n_in, n_out, ids, line) for t, n_in, n_out, ids, line in entries)
    return Trace(path, fmt, hashlib.sha256(data).hexdigest(), timed, skipped)


def looks_like_trace(path: Path) -> bool:
    """Whether `path` is a file that parses as a trace (for the --trace mix-up check)."""
    if Path(path).suffix.lower() not in TRACE_SUFFIXES or not Path(path).is_file():
        return False
    try:
        load_trace(path)
    except TraceError:
        return False
    return True


_Raw = tuple[float, int, int, tuple[int, ...], int]  # time in the file's unit as seconds, in, out, ids, line


def _mooncake(path: Path, text: str) -> list[_Raw]:
    out: list[_Raw] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}: line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise TraceError(f"{where}: a mooncake line is a JSON object, got {type(obj).__name__}")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in obj]
        if missing:
            raise TraceError(f"{where}: missing {', '.join(missing)}")
        ms = _number(obj["timestamp"], f"{where}: timestamp (milliseconds)")
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise TraceError(f"{where}: hash_ids is a list of integers, got {ids!r}")
        n_in = _count(obj["input_length"], f"{where}: input_length")
        if len(ids) > math.ceil(n_in / HASH_BLOCK_TOKENS):
            raise TraceError(f"{where}: {len(ids)} hash_ids of {HASH_BLOCK_TOKENS} tokens each are more blocks than "
                             f"input_length {n_in} fills")
        out.append((ms / 1000.0, n_in, _count(obj["output_length"], f"{where}: output_length"), tuple(ids), n))
        _in_order(out, where, "timestamp")
    return out


def _burstgpt(path: Path, text: str) -> tuple[list[_Raw], int]:
    out: list[_Raw] = []
    skipped = 0
    rows = csv.reader(io.StringIO(text))
    next(rows)  # the header, checked by the caller
    for row in rows:
        n = rows.line_num
        if not any(cell.strip() for cell in row):
            continue
        where = f"{path}: line {n}"
        if len(row) != len(BURSTGPT_HEADER):
            raise TraceError(f"{where}: {len(row)} columns, BurstGPT has {len(BURSTGPT_HEADER)}")
        seconds = _number(row[0], f"{where}: Timestamp (seconds)")
        n_out = _count(row[3], f"{where}: Response tokens", least=0)
        n_in = _count(row[2], f"{where}: Request tokens")
        if n_out == 0:  # failed in the original log: nothing to ask max_tokens for
            skipped += 1
            continue
        out.append((seconds, n_in, n_out, (), n))
        _in_order(out, where, "Timestamp")
    return out, skipped


def _in_order(out: list[_Raw], where: str, field: str) -> None:
    """Arrivals must not go back in time: the file's order is the replay's (equal times are fine)."""
    if len(out) > 1 and out[-1][0] < out[-2][0]:
        raise TraceError(f"{where}: {field} goes back in time (before line {out[-2][4]}'s): a trace's requests are "
                         "in arrival order")


def _number(value: Any, what: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise TraceError(f"{what} is a number of 0 or more, got {value!r}")
    return number


def _count(value: Any, what: str, *, least: int = 1) -> int:
    if isinstance(value, str):
        value = value.strip()
        value = int(value) if value.isdigit() else value
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise TraceError(f"{what} is a whole number of {least} or more, got {value!r}")
    return value
