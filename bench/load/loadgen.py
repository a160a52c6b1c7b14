"""Closed-loop load at a fixed concurrency over aiohttp (one session per level).

`run_level` owns its event loop (uvloop when importable): sequential warm-up requests first,
kept apart, then `concurrency` slots that each send the next measured request as soon as their
previous one is over. Every request is its own task with a per-request timer; the level deadline
cancels whatever is in flight. Response bodies go read by read into `bench.core.sse.ChatStream`, which
stamps the record; this module adds `t_sched`, `t_send`, HTTP errors, connection errors,
timeouts and cancellations (docs/metrics.md).

Why aiohttp: ~4x cheaper per SSE chunk than httpx, which saturates one core at a few thousand
chunks/s. `bench/perf/client_overhead.py` measures the
client's own cost on this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.host import affinity
from bench.core import metrics
from bench.setup.prompts import Prompt
from bench.core.records import ErrorType, RequestRecord
from bench.core.sse import ChatStream

try:
    import uvloop
except ImportError:  # optional: roughly halves aiohttp's cost per chunk
    uvloop = None

EVENT_LOOP = "uvloop" if uvloop is not None else "asyncio"

_perf = time.perf_counter
_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
_BODY_HEAD = 300  # bytes of an HTTP error body kept in the record
_TICK_S = 0.010  # event-loop lag probe period
_PROGRESS_S = 1.0
_PROBE_S = 0.25  # how often LevelConfig.server_gone is asked
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Progress:
    done: int  # measured requests finished
    total: int
    failed: int
    output_tps: float  # output-bearing events per second over the last interval (≈ tokens/s)
    elapsed_s: float  # since the measured phase started
    output_events: int = 0  # output-bearing events of the measured phase so far (rates over any span)


@dataclass(frozen=True)
class LevelConfig:
    base_url: str  # http://127.0.0.1:PORT
    model: str  # sent in every request (never taken from /v1/models)
    concurrency: int
    requests: int  # measured requests; request i uses prompts[i % len(prompts)]
    warmup: int = 3  # warm-up requests, sequential, from warmup_prompts, kept apart
    request_timeout_s: float = 300.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # stream_options, temperature, ...
    deadline: float | None = None  # perf_counter() value: stop sending, cancel what is in flight
    progress: Callable[[Progress], None] | None = None  # called at most ~once per second
    # The hang watchdog: no output event and no finished request for this long stops the level
    # like a deadline, with the reason "no progress for ..." (a stopped server, a wedged engine).
    stall_timeout_s: float | None = None
    # Why the server cannot answer any more (its process exited), or None while it can; asked
    # about four times a second. A reason stops the level like a deadline.
    server_gone: Callable[[], str | None] | None = None
    client_cpus: tuple[int, ...] | None = None  # the whole process runs the level on these CPUs (Linux)
    # --unique-prompts: a tag unique to this level; request i's first message then opens with
    # "[cellbench r<i> <nonce>] " (warm-up j's: "w<j>"), so no two requests share a prefix to cache.
    nonce: str | None = None
    # Who may have warmed the server's caches before this level ("an earlier level", "unknown:
    # an --endpoint server"); None: a fresh server. Recorded as the level's prompt reuse.
    server_warmed: str | None = None


@dataclass(frozen=True)
class ClientHealth:
    cpu_share: float  # process CPU seconds / wall seconds over the measured phase (1.0 = a core)
    loop_lag_p99_ms: float | None  # oversleep of a 10 ms ticker: how late the loop runs callbacks
    schedule_lag_p99_ms: float | None  # t_send - t_sched over all measured requests
    pinned: bool = False  # the level ran on LevelConfig.client_cpus
    # How the measured phase used the host's CPUs: whether a late client was busy itself or
    # was not let run (host busy, run-queue wait). None when the phase never opened.
    host: affinity.CpuUse | None = None


@dataclass
class LevelRun:
    config: LevelConfig
    records: list[RequestRecord]
    warmup_records: list[RequestRecord]
    t_start: float  # perf_counter: first t_send .. last t_end of the measured requests
    t_end: float
    started_at: float  # time.time() at level start (wall clock, for reports)
    partial: bool
    stop_reason: str | None
    client: ClientHealth


def build_body(cfg: LevelConfig, prompt: Prompt, nonce: str = "") -> dict[str, Any]:
    """`{model, messages, max_tokens, stream: true, **extra_body}`, plus `tools` when the prompt has any;
    `nonce` opens the first message's text."""
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": with_nonce(prompt.messages, nonce),
        "max_tokens": prompt.max_tokens,
        "stream": True,
        **cfg.extra_body,
    }
    if prompt.tools is not None:
        body["tools"] = list(prompt.tools)
    return body


def with_nonce(messages: Sequence[dict], nonce: str) -> list[dict]:
    """`messages` with `nonce` at the very start of the first message's text (a text part put
    first where the content is a list of parts), the other messages as they are."""
    if not nonce or not messages:
        return list(messages)
    first = dict(messages[0])
    content = first.get("content")
    if isinstance(content, list):
        head = content[0] if content else None
        if isinstance(head, dict) and head.get("type") == "text":
            first["content"] = [{**head, "text": nonce + str(head.get("text", ""))}, *content[1:]]
        else:
            first["content"] = [{"type": "text", "text": nonce}, *content]
    else:
        first["content"] = nonce + (content or "")
    return [first, *messages[1:]]


def _encode(cfg: LevelConfig, prompts: Sequence[Prompt], n: int, kind: str = "r") -> list[tuple[Prompt, bytes]]:
    """Request bodies, serialised before the clock starts (a 16 KB agent prompt takes ~0.1 ms to
    encode: client time that would land in schedule lag). Request i sends body i % len(bodies):
    the first min(len(prompts), n) prompts' bodies, or with `cfg.nonce` one body per request,
    prompt i % len(prompts) opened by "[cellbench <kind><i> <nonce>] "."""
    if cfg.nonce is None:
        return [(p, json.dumps(build_body(cfg, p)).encode()) for p in prompts[: min(len(prompts), n)]]
    picked = [prompts[i % len(prompts)] for i in range(n)] if prompts else []
    return [(p, json.dumps(build_body(cfg, p, f"[cellbench {kind}{i} {cfg.nonce}] ")).encode())
            for i, p in enumerate(picked)]


def run_level(cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> LevelRun:
    """Run one level to completion (or its deadline) on a fresh event loop; blocking."""
    if cfg.concurrency < 1 or cfg.requests < 0 or cfg.warmup < 0:
        raise ValueError(f"bad level: concurrency={cfg.concurrency}, requests={cfg.requests}, warmup={cfg.warmup}")
    if cfg.requests and not prompts:
        raise ValueError("no prompts for the measured requests")
    if cfg.warmup and not warmup_prompts:
        raise ValueError("no warm-up prompts")
    level = _Level(cfg, prompts, warmup_prompts)
    try:
        with affinity.pinned(cfg.client_cpus), _unraisable_interrupts(level.interrupt), _quiet_gc():
            runner = getattr(asyncio, "Runner", None)
            if runner is None:  # Python 3.10: no loop_factory; the default loop
                run = asyncio.run(level.run())
            else:
                with runner(loop_factory=uvloop.new_event_loop if uvloop else None) as r:
                    run = r.run(level.run())
        if level.fatal:  # it landed where nothing could raise it (the loop's shutdown, a finalizer)
            raise level.fatal[0]
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP made one (bench.plugins.signals)
        exc.level_run = level.interrupted_run(exc)  # the caller may keep what finished
        raise
    return run


@contextlib.contextmanager
def _unraisable_interrupts(on_interrupt: Callable[[BaseException], None]) -> Iterator[None]:
    """Hand interrupts that Python could only report as unraisable to `on_interrupt`.

    A signal handler's exception raised inside a weakref callback or a finalizer is "ignored":
    the level's GC (`_quiet_gc`'s collection, a dying task leaving asyncio's WeakSet of tasks)
    is where pytest-timeout's signal lands now and then on a loaded machine, and the level would
    then run to its end as if no timeout had fired."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_value is not None and _is_interrupt(unraisable.exc_value):
            on_interrupt(unraisable.exc_value)
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


@contextlib.contextmanager
def _quiet_gc() -> Iterator[None]:
    """Collect once, then freeze what exists, so that the level's full (gen-2) collections
    traverse only the objects the level creates. Measured on the perf server at 5,000 chunks/s:
    a full collection of a pytest-sized heap paused the loop 23 ms, which surfaced as schedule
    lag p99 29 ms instead of 8. Skipped when the caller manages frozen objects itself."""
    if gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@dataclass
class _Phases:
    """What a level's phases produced so far: warm-up records, (CPU, wall) when the measured
    phase opened and closed."""

    warmup_records: list[RequestRecord] = field(default_factory=list)
    opened: tuple[float, float] = (0.0, 0.0)
    closed: tuple[float, float] = (0.0, 0.0)
    cpu_opened: affinity.CpuSample | None = None  # the host's CPUs around the measured phase
    cpu_closed: affinity.CpuSample | None = None


class _Flight:
    """One request in flight: its record, its stream, and why we cancelled it (if we did)."""

    __slots__ = ("record", "stream", "reason", "released_at")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.stream = ChatStream(record)
        self.reason: str | None = None  # "timeout", "deadline", "stall" or "server gone"
        self.released_at = 0.0  # when the connection was given back: the slot is open again


class _Level:
    def __init__(self, cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> None:
        self.cfg = cfg
        self.measured = _encode(cfg, prompts, cfg.requests)
        self.warm = _encode(cfg, warmup_prompts, cfg.warmup, kind="w")
        self.url = cfg.base_url.rstrip("/") + "/v1/chat/completions"
        self.records: list[RequestRecord] = []
        self.warmup_records: list[RequestRecord] = []
        self.started_at = time.time()  # wall clock, for reports
        self.in_flight: dict[asyncio.Task, _Flight] = {}
        self.next_index = 0
        self.stop_reason: str | None = None
        self.chunks = 0  # output events received, for progress
        self.failed = 0
        self.finished = 0  # requests over, warm-up included: the watchdog's sign of life
        self.loop_lags: list[float] = []
        self.progress = cfg.progress
        self.t0 = 0.0  # start of the measured phase
        self.measuring = False
        self.fatal: list[BaseException] = []  # interrupts caught where they could not propagate
        self.main: asyncio.Task | None = None
        self.session: aiohttp.ClientSession

    async def run(self) -> LevelRun:
        """The level, guarded so that an interrupt (pytest-timeout's signal raises a BaseException
        subclass wherever the main thread is) ends it even when it lands in a loop callback or a
        transport, where asyncio would only log it (or, via `run_level`, where Python could only
        report it as unraisable)."""
        loop = asyncio.get_running_loop()
        self.main = asyncio.current_task()
        if self.fatal:  # it landed before the loop ran
            raise self.fatal[0]

        def on_loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if exc is not None and _is_interrupt(exc):
                self.interrupt(exc)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(on_loop_exception)
        try:
            return await self._run()
        except asyncio.CancelledError:
            if self.fatal:
                raise self.fatal[0] from None
            raise

    def interrupt(self, exc: BaseException) -> None:
        """An interrupt that landed where it cannot propagate: end the level, then raise it."""
        self.fatal.append(exc)
        if self.main is not None and not self.main.done():
            self.main.cancel()

    async def _run(self) -> LevelRun:
        cfg = self.cfg
        started_at = self.started_at = time.time()
        loop = asyncio.get_running_loop()
        deadline_timer = None
        if cfg.deadline is not None:
            deadline_timer = loop.call_later(max(0.0, cfg.deadline - _perf()), self._on_deadline)
        timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=None, sock_read=None)
        try:
            # The slots are the only bound on concurrency. One connection per request: servers
            # close idle or much-used keep-alive connections on their own terms (llama-server's
            # HTTP library after 5 requests), and a request sent on a connection the server is
            # closing fails with "server disconnected" before any response: a client artefact.
            connector = aiohttp.TCPConnector(limit=0, force_close=True)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                self.session = session
                phases = _Phases()
                await self._watched(self._phases(phases))
                warmup_records, (cpu0, wall0), (cpu1, wall1) = phases.warmup_records, phases.opened, phases.closed
        finally:
            if deadline_timer is not None:
                deadline_timer.cancel()
        self.records.sort(key=lambda r: r.index)
        self._report(wall1, self.chunks / (wall1 - wall0) if wall1 > wall0 else 0.0)  # the final count
        span = metrics.wall_span(self.records) or (wall0, wall0)
        lags = [lag for lag in map(metrics.schedule_lag, self.records) if lag is not None]
        p99_sched = metrics.percentile(lags, 99)
        p99_loop = metrics.percentile(self.loop_lags, 99)
        return LevelRun(
            config=cfg,
            records=self.records,
            warmup_records=warmup_records,
            t_start=span[0],
            t_end=span[1],
            started_at=started_at,
            partial=self.stop_reason is not None,
            stop_reason=self.stop_reason,
            client=ClientHealth(
                cpu_share=(cpu1 - cpu0) / (wall1 - wall0) if wall1 > wall0 else 0.0,
                loop_lag_p99_ms=None if p99_loop is None else p99_loop * 1000.0,
                schedule_lag_p99_ms=None if p99_sched is None else p99_sched * 1000.0,
                pinned=cfg.client_cpus is not None,
                host=_cpu_use(phases),
            ),
        )

    async def _phases(self, phases: _Phases) -> None:
        """Warm-up, then the measured slots; `phases` keeps what each produced, so a level stopped
        in warm-up (watchdog, deadline, a server gone) still hands back its warm-up records."""
        phases.warmup_records = await self._warmup()
        phases.cpu_opened = affinity.sample()
        cpu0, wall0 = time.process_time(), _perf()
        phases.opened = (cpu0, wall0)
        self.t0, self.measuring = wall0, True
        self.chunks = 0  # progress counts the measured phase only, as its elapsed time does
        await asyncio.gather(*(self._slot(wall0) for _ in range(self.cfg.concurrency)))
        phases.closed = (time.process_time(), _perf())
        phases.cpu_closed = affinity.sample()

    async def _watched(self, coro: Any) -> None:
        """Run the level's phases beside the ticker (watchdog, server probe, lag, progress) from
        the first warm-up request on. The ticker only ever ends by raising (an interrupt can land
        in it), and that must end the level, not sit in a lost task."""
        work = asyncio.ensure_future(coro)
        ticker = asyncio.ensure_future(self._tick())
        try:
            done, _ = await asyncio.wait((work, ticker), return_when=asyncio.FIRST_COMPLETED)
            if ticker in done:
                ticker.result()
            await work
        finally:
            ticker.cancel()
            if not work.done():  # interrupted: the slots go down with their requests, unawaited
                work.cancel()
                work.add_done_callback(_retrieve)

    async def _warmup(self) -> list[RequestRecord]:
        for i in range(self.cfg.warmup):
            if not self._may_send():
                break
            flight = await self._request(i, *self.warm[i % len(self.warm)], warmup=True, t_sched=_perf())
            self.warmup_records.append(flight.record)
        return self.warmup_records

    def interrupted_run(self, why: BaseException) -> LevelRun:
        """What the level finished before an interrupt ended it (requests still in flight are not
        in it), so that a Ctrl-C or SIGTERM keeps the measured part of the level it landed in."""
        self.records.sort(key=lambda r: r.index)
        span = metrics.wall_span(self.records) or (self.t0, self.t0)
        return LevelRun(config=self.cfg, records=list(self.records), warmup_records=list(self.warmup_records),
                        t_start=span[0], t_end=span[1], started_at=self.started_at, partial=True,
                        stop_reason=f"interrupted ({str(why) or type(why).__name__})",
                        client=ClientHealth(cpu_share=0.0, loop_lag_p99_ms=None, schedule_lag_p99_ms=None,
                                            pinned=self.cfg.client_cpus is not None))

    async def _slot(self, t_open: float) -> None:
        """One closed-loop slot: the next request goes out when the previous one is over.

        t_sched = the moment the slot opened: level start for the first request, then the moment
        the previous request released its connection (not its [DONE]: a server that is slow to
        close the response holds the slot, and that is not the client's delay)."""
        t_sched = t_open
        while self.next_index < self.cfg.requests and self._may_send():
            i = self.next_index
            self.next_index += 1
            prompt, body = self.measured[i % len(self.measured)]  # = prompts[i % len(prompts)]
            flight = await self._request(i, prompt, body, warmup=False, t_sched=t_sched)
            self.records.append(flight.record)
            self.failed += not flight.record.ok
            t_sched = flight.released_at

    async def _request(self, index: int, prompt: Prompt, body: bytes, *, warmup: bool, t_sched: float) -> _Flight:
        flight = _Flight(RequestRecord(index=index, prompt_name=prompt.name, warmup=warmup, t_sched=t_sched))
        task = asyncio.ensure_future(self._exchange(flight, body))
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.cfg.request_timeout_s, self._cancel, task, "timeout")
        self.in_flight[task] = flight
        try:
            await task
        finally:
            timer.cancel()
            del self.in_flight[task]
            self.finished += 1
        return flight

    async def _exchange(self, flight: _Flight, body: bytes) -> None:
        rec, stream = flight.record, flight.stream
        headers_seen = False
        try:
            rec.t_send = _perf()
            async with self.session.post(self.url, data=body, headers=_HEADERS) as resp:
                headers_seen = True
                rec.http_status = resp.status
                if resp.status != 200:
                    await self._http_error(resp, stream)
                    return
                before = 0
                async for data in resp.content.iter_any():
                    stream.feed(data, _perf())
                    if len(rec.chunk_times) != before:  # progress counter, off the per-event path
                        self.chunks += len(rec.chunk_times) - before
                        before = len(rec.chunk_times)
                    if rec.error is not None:  # failed (an error event, an overflow): nothing more to learn
                        return
                stream.close(_perf())
        except asyncio.CancelledError:
            if flight.reason is None:  # not ours: pytest's timeout, loop shutdown
                raise
            self._record_cancel(flight, headers_seen)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a typed record
            _reraise_interrupt(exc)
            if flight.reason is not None:  # our cancellation, surfacing as a library error
                self._record_cancel(flight, headers_seen)
                return
            kind = ErrorType.TRUNCATED if headers_seen else ErrorType.CONNECT
            where = f"mid-stream after {rec.n_chunks} output chunks" if headers_seen else "before a response"
            stream.fail(kind, f"{type(exc).__name__} {where}: {exc}", _perf())
            if self.cfg.server_gone is not None:  # a lost connection: ask now, not at the next probe
                self._probe_server()
        finally:
            flight.released_at = _perf()

    async def _http_error(self, resp: aiohttp.ClientResponse, stream: ChatStream) -> None:
        head = bytearray()
        while len(head) < _BODY_HEAD:
            part = await resp.content.readany()
            if not part:
                break
            head += part
        text = bytes(head[:_BODY_HEAD]).decode("utf-8", "replace")
        kind = ErrorType.HTTP_5XX if resp.status >= 500 else ErrorType.HTTP_4XX
        message = f"HTTP {resp.status} {resp.reason or ''}: {text[:120]}".strip()
        stream.fail(kind, message, _perf(), http_status=resp.status, body_head=text)

    def _record_cancel(self, flight: _Flight, headers_seen: bool) -> None:
        """Our own cancellation (timeout or deadline) becomes the record's typed error."""
        _uncancel()
        rec = flight.record
        now = _perf()
        waited = now - rec.t_send if rec.t_send is not None else 0.0
        stage = f"{rec.n_chunks} output chunks received" if headers_seen else "no response headers"
        if flight.reason == "timeout":
            limit = f"request_timeout_s={self.cfg.request_timeout_s:g}"
            flight.stream.fail(ErrorType.TIMEOUT, f"timed out after {waited:.2f} s ({limit}); {stage}", now)
        elif flight.reason == "server gone":  # the server's failure, not ours: typed as what it did
            kind = ErrorType.TRUNCATED if headers_seen else ErrorType.CONNECT
            flight.stream.fail(kind, f"the server went away after {waited:.2f} s in flight; {stage}", now)
        else:
            why = "by the hang watchdog" if flight.reason == "stall" else "at the level deadline"
            flight.stream.fail(ErrorType.CANCELLED, f"cancelled {why} after {waited:.2f} s in flight; {stage}", now)

    def _may_send(self) -> bool:
        """False once the level is stopping (checked here too: the deadline timer may lag)."""
        if self.stop_reason is None and self.cfg.deadline is not None and _perf() >= self.cfg.deadline:
            self._on_deadline()
        return self.stop_reason is None

    def _cancel(self, task: asyncio.Task, reason: str) -> bool:
        flight = self.in_flight.get(task)
        # A request whose record already failed is ending by itself (it may be the task asking).
        if flight is not None and not task.done() and flight.reason is None and flight.record.error is None:
            flight.reason = reason
            task.cancel()
            return True
        return False

    def _on_deadline(self) -> None:
        cfg = self.cfg
        if self.next_index >= cfg.requests and not self.in_flight:
            return  # finished just in time
        phase = "" if self.measuring else " during warm-up"
        self.stop_reason = (
            f"deadline reached{phase}: {self.next_index}/{cfg.requests} measured requests sent, "
            f"{len(self.in_flight)} in flight cancelled"
        )
        for task in list(self.in_flight):
            self._cancel(task, "deadline")

    def _on_stall(self, quiet_s: float) -> None:
        if self.stop_reason is not None:
            return
        span = f"{quiet_s / 60:.0f} min" if quiet_s >= 120 else f"{quiet_s:.0f} s"
        phase = "" if self.measuring else " during warm-up"
        self.stop_reason = (f"no progress for {span}{phase}: no output and no finished request; "
                            f"{len(self.records)}/{self.cfg.requests} measured requests done, "
                            f"{len(self.in_flight)} in flight cancelled")
        for task in list(self.in_flight):
            self._cancel(task, "stall")

    async def _tick(self) -> None:
        """Every 10 ms, from the first warm-up request on: the hang watchdog and the server probe;
        in the measured phase also the loop-lag probe (how late a 10 ms sleep wakes up) and the
        progress callback."""
        start = _perf()
        last_report, last_chunks = start, 0
        seen, seen_at = (self.chunks, self.finished), start
        next_probe = start
        while True:
            expected = _perf() + _TICK_S
            await asyncio.sleep(_TICK_S)
            now = _perf()
            if (self.chunks, self.finished) != seen:
                seen, seen_at = (self.chunks, self.finished), now
            elif self.cfg.stall_timeout_s is not None and now - seen_at >= self.cfg.stall_timeout_s:
                self._on_stall(now - seen_at)
            if self.cfg.server_gone is not None and now >= next_probe:
                next_probe = now + _PROBE_S
                self._probe_server()
            if not self.measuring:
                last_report, last_chunks = now, self.chunks
                continue
            self.loop_lags.append(max(0.0, now - expected))
            if now - last_report >= _PROGRESS_S:
                self._report(now, (self.chunks - last_chunks) / (now - last_report))
                last_report, last_chunks = now, self.chunks

    def _probe_server(self) -> None:
        """A server that is gone ends the level at once: what is in flight cannot finish, and every
        request sent after it would only measure a refused connection."""
        if self.stop_reason is not None:
            return
        gone = self.cfg.server_gone()
        if gone is None:
            return
        done = len(self.records)
        cancelled = sum(self._cancel(task, "server gone") for task in list(self.in_flight))
        self.stop_reason = f"{gone}; {done}/{self.cfg.requests} measured requests done, {cancelled} in flight cut off"

    def _report(self, now: float, output_tps: float) -> None:
        """Call the progress callback; a broken callback is dropped, never fatal to the level."""
        if self.progress is None:
            return
        try:
            self.progress(Progress(len(self.records), self.cfg.requests, self.failed, output_tps, now - self.t0,
                                   self.chunks))
        except Exception:  # noqa: BLE001
            self.progress = None
            _log.exception("progress callback failed; disabled for the rest of the level")


def _cpu_use(phases: _Phases) -> affinity.CpuUse | None:
    """How the measured phase used the CPUs; None when it has no opening or closing sample."""
    if phases.cpu_opened is None or phases.cpu_closed is None:
        return None
    return affinity.between(phases.cpu_opened, phases.cpu_closed)


def _reraise_interrupt(exc: BaseException) -> None:
    """aiohttp's protocol turns anything raised in data_received, BaseException included, into a
    ClientPayloadError caused by it: an interrupt that landed there must still end the level."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if _is_interrupt(cause):
            raise cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__


def _retrieve(fut: asyncio.Future) -> None:
    """Mark an abandoned future's outcome as seen (no "exception was never retrieved" noise)."""
    if not fut.cancelled():
        fut.exception()


def _is_interrupt(exc: BaseException) -> bool:
    """A BaseException that is neither an error nor a cancellation: pytest's Failed, KeyboardInterrupt."""
    return not isinstance(exc, (Exception, asyncio.CancelledError))


def _uncancel() -> None:
    """Python 3.11+: a cancellation we asked for and handled must not count as pending."""
    task = asyncio.current_task()
    if task is not None and hasattr(task, "uncancel"):
        task.uncancel()
