"""A server's /metrics, scraped on a thread of its own: every `interval_s`, and at once when the
cell marks a level's start or end (`mark`).

The thread only fetches and reads the concepts the adapter declared (bench.setup.server_metrics);
each scrape is a `Scrape` kept in memory (a few numbers) and a line of the server's
`.server-metrics.jsonl` sidecar. A scrape that fails (a timeout, a refused connection, text that
is not the exposition format) is skipped and its error kept once per kind: the scraper never
raises into the cell and never holds a level up for longer than its timeout.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bench.run.scrape import exposition
from bench.setup.server_metrics import ServerMetrics

INTERVAL_S = 2.0
TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Scrape:
    """One scrape: its wall time, and each declared concept's value (counters and gauges summed
    over their label sets; a histogram as its (_sum, _count)); a concept the text lacks is absent."""

    wall: float  # when its request was sent
    counters: dict[str, float]
    gauges: dict[str, float]
    histograms: dict[str, tuple[float, float]]


def read(text: str, declared: ServerMetrics, wall: float) -> Scrape:
    """The declared concepts in one exposition text."""
    names = {*declared.counters.values(), *declared.gauges.values(),
             *(f"{n}{suffix}" for n in declared.histograms.values() for suffix in ("_sum", "_count"))}
    totals = exposition.totals(text, names)
    hist = {c: (totals[f"{n}_sum"], totals[f"{n}_count"]) for c, n in declared.histograms.items()
            if f"{n}_sum" in totals and f"{n}_count" in totals}
    return Scrape(wall, {c: totals[n] for c, n in declared.counters.items() if n in totals},
                  {c: totals[n] for c, n in declared.gauges.items() if n in totals}, hist)


class Scraper:
    def __init__(self, url: str, declared: ServerMetrics, sidecar: Path, *, headers: dict[str, str] | None = None,
                 interval_s: float = INTERVAL_S, timeout_s: float = TIMEOUT_S) -> None:
        self.url, self.declared, self.sidecar = url, declared, sidecar
        self.headers = headers or {}
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self.scrapes: list[Scrape] = []
        self.errors: list[str] = []
        self._kinds: set[str] = set()
        self._wake = threading.Event()
        self._stop = False
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # a scrape ended, kept or failed
        self._last_failure = 0.0  # when the latest failed scrape began
        self._out: IO[str] | None = None
        self._thread = threading.Thread(target=self._run, name="server-metrics", daemon=True)

    def __enter__(self) -> Scraper:
        self._out = self.sidecar.open("w", buffering=1)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(self.timeout_s + 1.0)
        with self._lock, contextlib.suppress(OSError):
            if self._out is not None:
                self._out.close()
                self._out = None

    def mark(self) -> Scrape | None:
        """Scrape now (on the scraper's thread) and return the first scrape begun after this call;
        None when it failed or took longer than the timeout."""
        asked = time.time()
        deadline = time.monotonic() + self.timeout_s + 0.5
        with self._ready:
            self._wake.set()
            while not self._stop_now():
                found = next((s for s in reversed(self.scrapes) if s.wall >= asked), None)
                left = deadline - time.monotonic()
                if found is not None or left <= 0 or self._failed_since(asked):
                    return found
                self._ready.wait(left)
        return None

    def _stop_now(self) -> bool:
        return self._stop and not self._thread.is_alive()

    def _failed_since(self, asked: float) -> bool:
        return self._last_failure >= asked

    def _run(self) -> None:
        """A scrape every interval, and at once when marked. None as the thread starts: a level's
        first scrape is its mark (each one costs the process about 0.7 ms of CPU, docs/metrics.md)."""
        while True:
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop:
                return
            self._scrape_once()

    def _scrape_once(self) -> None:
        began = time.time()
        try:
            request = urllib.request.Request(self.url, headers=self.headers)
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - our own server
                text = response.read().decode("utf-8", "replace")
            scrape = read(text, self.declared, began)
        except Exception as exc:  # noqa: BLE001 - never into the cell: kept once per kind, and on
            kind = type(exc).__name__
            with self._ready:
                if kind not in self._kinds:
                    self._kinds.add(kind)
                    self.errors.append(f"{kind}: {exc}"[:300])
                self._last_failure = began
                self._ready.notify_all()
            return
        with self._ready:
            self.scrapes.append(scrape)
            self._ready.notify_all()
            if self._out is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._out.write(json.dumps({"wall": round(scrape.wall, 3), "counters": scrape.counters,
                                                "gauges": scrape.gauges, "histograms": scrape.histograms}) + "\n")
