"""Worker processes' results merged into one `LevelRun`, exactly.

Records are not summarised per process: each worker sends its raw records back, they are
renumbered to the level's request numbers (`Share.indices`) and concatenated, and every metric
is then computed from all samples at once (`bench.core.metrics.summarize_level`), so a p99 is the
p99 of every request, never an average of per-process p99s, and throughput is over the union
wall time (the first send of any worker to the last end of any). The timestamps compare across
processes because `time.perf_counter()` is one system-wide clock (see `bench.load.procs.pool`).
Warm-up records come from the parent's own warm-up and stay apart.

The client's health: every worker's is kept (`ClientHealth.workers`), and the level's is the
worst one's: the highest CPU share and lags of any process, and the host evidence of the worker
that ran latest, so that one saturated process makes the level client-bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from bench.core import metrics
from bench.core.level_run import ClientHealth, LevelConfig, LevelRun
from bench.core.records import RequestRecord
from bench.load.procs.split import Share


@dataclass
class WorkerReport:
    """What a worker sends back when its part of the level is over (plain, picklable data)."""

    worker: int
    pid: int
    records: list[RequestRecord]  # numbered 0.. within the worker
    partial: bool
    stop_reason: str | None
    client: ClientHealth
    interrupted: bool = False  # an interrupt ended it: requests in flight are not in `records`


# The tail the closed loop gives a reason it stops for: "3/50 measured requests sent, 2 in flight cancelled".
_COUNTS = re.compile(r"(\d+)/(\d+) measured requests (sent|done), (\d+) in flight (cancelled|cut off)$")
_RANK = {"client": 3, "host": 2, "unknown": 1, None: 0}


def renumbered(report: WorkerReport, share: Share) -> WorkerReport:
    """The report with its records under the level's request numbers (once, as it arrives)."""
    for record in report.records:
        record.index = share.indices[record.index]
    return report


def merge(cfg: LevelConfig, warm: LevelRun | None, reports: Sequence[WorkerReport], *, started_at: float,
          t_go: float, procs: int, procs_how: str, interrupted: BaseException | None = None) -> LevelRun:
    """One level from the parent's warm-up (`warm`, None without one) and the workers' reports
    (`renumbered`), in the order they arrived (the first to stop names the level's stop reason)."""
    records = sorted((r for rep in reports for r in rep.records), key=lambda r: r.index)
    span = metrics.wall_span(records) or (t_go, t_go)
    if interrupted is not None:
        reason: str | None = f"interrupted ({str(interrupted) or type(interrupted).__name__})"
    elif warm is not None and warm.stop_reason is not None:
        reason = stop_reason([warm.stop_reason], [0], cfg.requests)
    else:
        reason = stop_reason([rep.stop_reason for rep in reports], [len(rep.records) for rep in reports],
                             cfg.requests)
    healths = [rep.client for rep in sorted(reports, key=lambda rep: rep.worker)]
    return LevelRun(
        config=cfg,
        records=records,
        warmup_records=list(warm.warmup_records) if warm is not None else [],
        t_start=span[0],
        t_end=span[1],
        started_at=started_at,
        partial=reason is not None or any(rep.partial for rep in reports),
        stop_reason=reason,
        # A worker's own count ran out or its --duration did; fewer records than asked, with no
        # stop reason, means the duration came first.
        ended_by=None if cfg.duration_s is None else
        "duration" if reason is None and len(records) < cfg.requests else "requests",
        client=merged_health(healths, procs, procs_how, warm),
    )


def stop_reason(reasons: Sequence[str | None], counts: Sequence[int], requests: int) -> str | None:
    """The level's stop reason from its workers' (None: that worker finished): the first one's
    cause with the counts of the whole level, "deadline reached: 61/100 measured requests sent, 8
    in flight cancelled"; the workers' reasons joined when their form is not the closed loop's."""
    stopped = [r for r in reasons if r is not None]
    if not stopped:
        return None
    head = _COUNTS.search(stopped[0])
    if head is None:
        return "; ".join(dict.fromkeys(stopped))
    done = in_flight = 0
    for reason, count in zip(reasons, counts, strict=True):
        match = _COUNTS.search(reason) if reason is not None else None
        done += int(match[1]) if match else count
        in_flight += int(match[4]) if match else 0
    return f"{stopped[0][: head.start()]}{done}/{requests} measured requests {head[3]}, {in_flight} in flight {head[5]}"


def merged_health(healths: Sequence[ClientHealth], procs: int, how: str, warm: LevelRun | None) -> ClientHealth:
    """The level's client health from its workers' (see the module docstring)."""
    if not healths:
        base = warm.client if warm is not None else ClientHealth(0.0, None, None)
        return replace(base, procs=procs, procs_how=how)
    judged = [metrics.client_health(h) for h in healths]
    worst = max(range(len(healths)), key=lambda k: (_RANK.get(judged[k]["limited_by"], 0), healths[k].cpu_share))
    return replace(
        healths[worst],
        cpu_share=max(h.cpu_share for h in healths),
        loop_lag_p99_ms=_max(h.loop_lag_p99_ms for h in healths),
        schedule_lag_p99_ms=_max(h.schedule_lag_p99_ms for h in healths),
        pinned=any(h.pinned for h in healths),
        procs=procs,
        procs_how=how,
        workers=tuple(healths),
        **_summed_counts(healths, warm),
    )


def _max(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _summed_counts(healths: Sequence[ClientHealth], warm: LevelRun | None) -> dict[str, Any]:
    """Counters the health carries as a dataclass of ints (the connections a level opened, where
    the transport counts them): summed over the workers and the parent's warm-up."""
    out: dict[str, Any] = {}
    for f in fields(ClientHealth):
        parts = [getattr(h, f.name) for h in [*healths, *([warm.client] if warm is not None else [])]]
        parts = [p for p in parts if p is not None]
        if not parts or not hasattr(parts[0], "__dataclass_fields__"):
            continue
        if all(isinstance(getattr(parts[0], g.name), int) for g in fields(parts[0])):
            out[f.name] = replace(parts[0], **{g.name: sum(getattr(p, g.name) for p in parts)
                                               for g in fields(parts[0])})
    return out
