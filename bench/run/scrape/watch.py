"""What a cell watches of one started server while its levels run: its process tree and the
machine (ResourceSampler), the energy of each level from the power it read (bench.core.lenses.energy),
the level figures its readings give (bench.core.figures `watch`: memory, GPU), and the server's
own metrics (Scraper), each level's from the scrapes that bracket it.

    with ServerWatch.start(...) as watch:
        with watch.level():
            run = run_level_procs(...)
        watch.keep(summary, run)
    watch.finish(server_info)   # after the server stopped: the resources block, each level's energy,
                                # memory, GPU and metrics, and its client block's `limited_by` "server"
                                # where the server queued

The scrapes bracket the whole level, warm-up included (the load generator runs its warm-up in the
level), so a level's counters hold its warm-up requests too; `server_metrics.includes_warmup` says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.core import figures
from bench.core.figures.declare import Sampled
from bench.core.lenses.energy import wall_span, with_energy
from bench.core.level_run import LevelRun
from bench.core.metrics.client import with_server_queue
from bench.core.metrics.server_view import GaugeFigures, HistogramFigures, ServerMetricsBlock
from bench.core.result.model import Level, Server
from bench.core.result.server import Reserved
from bench.host.power import IdlePower
from bench.host.resources import ResourceSampler
from bench.run.scrape.scraper import Scrape, Scraper
from bench.setup.adapter import Reservation
from bench.setup.profiles import ApiKey
from bench.setup.server_metrics import ServerMetrics


class ServerWatch:
    def __init__(self, sampler: ResourceSampler | None, scraper: Scraper | None,
                 idle: list[IdlePower] | None = None, reserved: Reserved | None = None) -> None:
        self.sampler, self.scraper = sampler, scraper
        self.idle = idle or []  # the machine's power before the server started (bench.host.power.idle_power)
        self.reserved = reserved  # the memory the server stated it set aside (Reservation), read once ready
        self._windows: list[tuple[Level, float, float]] = []  # each level and its measured phase's wall span
        self._brackets: list[tuple[Level, Scrape | None, Scrape | None]] = []
        self._last: tuple[Scrape | None, Scrape | None] = (None, None)

    @classmethod
    def start(cls, pid: int | None, files: Path, server: Any, declared: ServerMetrics | None,
              interval_s: float | None, api_key: ApiKey | None, idle: list[IdlePower] | None = None,
              reservation: Reservation | None = None) -> ServerWatch:
        """The watch of a server whose files are `files`.* (`.resources.jsonl`, `.server-metrics.jsonl`),
        its metrics scraped every `interval_s` where declared (None: not scraped), with the API key
        its chat requests carry, the machine's `idle` power read before it started, for each level's
        energy above it, and the memory its log states it set aside (`reservation`, read now: the
        server is ready); nothing is watched of a server that is not ours (an endpoint: no `pid`)."""
        if pid is None:
            return cls(None, None)
        reserved = _reserved(reservation, getattr(server, "log_path", None))
        sampler = ResourceSampler(pid, files.with_name(files.name + ".resources.jsonl"),
                                  cgroup=getattr(server, "cgroup", None), on_tree=getattr(server, "note_tree", None))
        scraper = None if declared is None or interval_s is None else Scraper(
            server.base_url.rstrip("/") + declared.path, declared,
            files.with_name(files.name + ".server-metrics.jsonl"), headers=api_key.headers if api_key else {},
            interval_s=interval_s)
        return cls(sampler, scraper, idle, reserved)

    def __enter__(self) -> ServerWatch:
        for part in (self.sampler, self.scraper):
            if part is not None:
                part.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for part in (self.scraper, self.sampler):
            if part is not None:
                part.__exit__(None, None, None)

    @contextlib.contextmanager
    def level(self) -> Iterator[None]:
        """Scrape as the level starts and as it ends, however it ends."""
        before = self.scraper.mark() if self.scraper else None
        try:
            yield
        finally:
            self._last = (before, self.scraper.mark() if self.scraper else None)

    def keep(self, summary: Level, run: LevelRun) -> None:
        """The level just measured, for its energy and metrics once the server has stopped."""
        if run.records:
            self._windows.append((summary, *wall_span(run)))
        if self.scraper is not None:
            self._brackets.append((summary, *self._last))

    def finish(self, server_info: Server) -> None:
        if self.reserved is not None:
            server_info["reserved"] = self.reserved
        if self.sampler is not None:  # the file name, not the path: results stay valid when moved or committed
            server_info["resources"] = {**self.sampler.summary(), "path": self.sampler.path.name}
            with_energy(self._windows, self.sampler.power, self.sampler.summary()["gpu_source"],
                        self.sampler.interval_s, self.idle)
            reserved_bytes = self.reserved["bytes"] if self.reserved is not None else None
            for level, start, end in self._windows:
                seen = Sampled.over(start, end, self.sampler.interval_s, self.sampler.memory, self.sampler.gpu,
                                    reserved_bytes)
                figures.attach(level, figures.watched(seen))
        if self.scraper is not None:
            for level, before, after in self._brackets:
                level["server_metrics"] = level_metrics(self.scraper, before, after)
                if "client" in level:
                    level["client"] = with_server_queue(level["client"], level["server_metrics"])


def _reserved(reservation: Reservation | None, log_path: Path | None) -> Reserved | None:
    """What the server's log states it set aside, where its adapter declares how it says so."""
    if reservation is None or log_path is None:
        return None
    try:
        found = reservation.read(Path(log_path).read_text(errors="replace"))
    except OSError:
        return None
    return None if found is None else {"what": reservation.what, "bytes": found[0], "said": found[1]}


def level_metrics(scraper: Scraper, before: Scrape | None, after: Scrape | None) -> ServerMetricsBlock:
    """A level's `server_metrics`: each counter's increase from its start to its end, each gauge's
    mean and maximum over the scrapes in between (the two ends left out: they see the server
    before the level's first request and after its last, idle; a level shorter than the interval
    has none, so no gauge), each histogram's count and mean."""
    block: ServerMetricsBlock = {"path": scraper.declared.path, "interval_s": scraper.interval_s,
                                 "includes_warmup": True, "sidecar": scraper.sidecar.name,
                                 "errors": list(scraper.errors)}
    if before is None or after is None:
        block["note"] = "no scrape " + ("as the level started" if before is None else "as the level ended")
        return block
    during = [s for s in scraper.scrapes if before.wall < s.wall < after.wall]
    block["scrapes"] = len(during)
    block["counters"] = {c: after.counters[c] - v for c, v in before.counters.items() if c in after.counters}
    gauges: dict[str, GaugeFigures] = {}
    for concept in scraper.declared.gauges:
        values = [s.gauges[concept] for s in during if concept in s.gauges]
        if values:
            gauges[concept] = {"mean": sum(values) / len(values), "max": max(values), "samples": len(values)}
    block["gauges"] = gauges
    histograms: dict[str, HistogramFigures] = {}
    for concept, (total, count) in after.histograms.items():
        if concept in before.histograms:
            d_sum, d_count = total - before.histograms[concept][0], count - before.histograms[concept][1]
            histograms[concept] = {"count": d_count, "mean_ms": d_sum / d_count * 1e3 if d_count else None}
    block["histograms"] = histograms
    return block
