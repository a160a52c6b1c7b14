"""The load generator against scripted SSE servers on 127.0.0.1.

`ScriptServer` is a protocol fixture, not a stand-in for an inference server: each request's
last message is a script (`stream 5 0.01`, `until_released 0.15`, `status 404`, `stall`, `cut`,
`nofinish`) that decides what the server writes and when. It runs in a background thread with its own loop
because `run_level` owns the main thread's loop.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import signal
import socket
import threading
import time
import traceback
from collections import Counter
from dataclasses import replace

import pytest
from aiohttp import web

from bench.core.client_settings import ClientSettings
from bench.core.records import ErrorType
from bench.host.cpus import placement
from bench.load import LevelConfig, Progress, run_level
from bench.load.bodies import encode_bodies, with_nonce
from bench.setup.prompts import Prompt

pytestmark = pytest.mark.timeout(60)


def sse(obj: dict | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def delta(d: dict, finish: str | None = None) -> bytes:
    return sse(
        {
            "object": "chat.completion.chunk",
            "model": "served-m",
            "choices": [{"index": 0, "delta": d, "finish_reason": finish}],
        }
    )


class ScriptServer:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.content_chunks = 0  # written, over every request
        self.release = threading.Event()  # ends the `until_released` streams
        self.in_flight = 0
        self.max_in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ScriptServer:
        self._thread.start()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        script = body["messages"][-1]["content"].split()
        if script[0] == "status":
            status = int(script[1])
            return web.Response(status=status, text=f"error {status} " + "x" * 1000)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        counted = True
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(delta({"role": "assistant", "content": ""}))
            if script[0] in ("stream", "until_released"):
                # stream N DELAY: N content chunks DELAY s apart; until_released DELAY: content chunks
                # DELAY s apart, at least one, until the test sets `release` (at most 200)
                n, pause = (int(script[1]), float(script[2])) if script[0] == "stream" else (200, float(script[1]))
                for i in range(n):
                    await asyncio.sleep(pause)
                    await resp.write(delta({"content": f"t{i}"}))
                    self.content_chunks += 1
                    if script[0] == "until_released" and self.release.is_set():
                        n = i + 1
                        break
                await resp.write(
                    delta({}, "stop") + sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": n}})
                )
                self.in_flight -= 1  # before [DONE]: the client's next send can only follow it
                counted = False
                await resp.write(sse("[DONE]"))
            elif script[0] == "stall":  # role chunk, then nothing
                await asyncio.sleep(30)
            elif script[0] == "cut":  # two tokens, then the connection drops mid-response
                await resp.write(delta({"content": "a"}) + delta({"content": "b"}))
                await asyncio.sleep(0.05)
                assert request.transport is not None  # the handler runs on an open connection
                request.transport.abort()
                return resp
            elif script[0] == "nofinish":  # a clean HTTP end without finish_reason or [DONE]
                await resp.write(delta({"content": "a"}))
            await resp.write_eof()
            return resp
        finally:
            if counted:
                self.in_flight -= 1


@pytest.fixture
def server():
    with ScriptServer() as srv:
        yield srv


def prompts(script: str, n: int = 1, prefix: str = "p", tools=None) -> list[Prompt]:
    return [
        Prompt(name=f"{prefix}{i}", messages=({"role": "user", "content": script},), max_tokens=16, tools=tools)
        for i in range(n)
    ]


def level(base_url: str, **kw) -> LevelConfig:
    defaults = {"base_url": base_url, "model": "req-model", "concurrency": 1, "requests": 1, "warmup": 0}
    return LevelConfig(**{**defaults, **kw})


def test_closed_loop_bounds_concurrency_and_counts_requests(server):
    calls: list[Progress] = []
    cfg = level(server.base_url, concurrency=4, requests=16, progress=calls.append)
    run = run_level(cfg, prompts("stream 10 0.03", 5), [])
    assert server.max_in_flight == 4  # never more than 4, and the slots did overlap
    assert len(server.bodies) == 16 and len(run.records) == 16
    assert [r.index for r in run.records] == list(range(16))
    assert [r.prompt_name for r in run.records[:6]] == ["p0", "p1", "p2", "p3", "p4", "p0"]
    assert all(r.ok for r in run.records), [r.error for r in run.records if not r.ok]
    r = run.records[0]
    assert r.t_sched <= r.t_send < r.t_first_byte < r.t_first_token <= r.t_end
    assert r.n_chunks == 10 and r.usage_completion_tokens == 10 and r.usage_prompt_tokens == 7
    assert r.served_model == "served-m" and r.done_marker
    assert run.t_start == min(x.t_send for x in run.records) and run.t_end == max(x.t_end for x in run.records)
    assert not run.partial and run.stop_reason is None
    assert run.client.cpu_share > 0.0 and run.client.loop_lag_p99_ms is not None
    assert run.client.schedule_lag_p99_ms is not None and run.client.schedule_lag_p99_ms >= 0.0
    assert calls and calls[-1].done == 16 and calls[-1].total == 16 and calls[-1].failed == 0
    assert calls[-1].output_tps > 0


def test_progress_arrives_at_most_once_a_second_with_growing_elapsed(server):
    """What bench.load.watch.progress.ProgressLine relies on: reports during the level, never less than
    a second apart, elapsed and output events counted from the measured phase's start (warm-up
    apart) and growing, and a last report when done. No upper bound on the gaps: a loaded host
    may run the ticker late, so the level lasts until two reports came (the server streams until
    the test releases it), not for a length guessed to hold them."""
    calls: list[Progress] = []

    def report(progress: Progress) -> None:
        calls.append(progress)
        if len(calls) >= 2:
            server.release.set()

    cfg = level(server.base_url, concurrency=1, requests=4, warmup=1, progress=report)
    run = run_level(cfg, prompts("until_released 0.15"), prompts("stream 5 0", prefix="w"))
    *during, last = calls
    assert len(during) >= 2 and last.done == last.total == 4
    elapsed = [p.elapsed_s for p in calls]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 1.0
    gaps = [b.elapsed_s - a.elapsed_s for a, b in itertools.pairwise(during)]
    assert all(g >= 1.0 - 1e-9 for g in gaps), gaps  # float rounding of the differences
    assert [p.done for p in calls] == sorted(p.done for p in calls) and all(p.output_tps > 0 for p in during)
    events = [p.output_events for p in calls]
    assert events == sorted(events) and events[-1] == sum(r.n_chunks for r in run.records) == server.content_chunks - 5


def test_a_broken_progress_callback_does_not_break_the_level(server, caplog):
    def broken(progress: Progress) -> None:
        raise RuntimeError("display gone")

    run = run_level(level(server.base_url, requests=3, progress=broken), prompts("stream 2 0"), [])
    assert all(r.ok for r in run.records) and len(run.records) == 3
    assert "progress callback failed" in caplog.text


def test_warmup_runs_first_sequentially_with_its_own_prompts(server):
    cfg = level(server.base_url, concurrency=2, requests=4, warmup=3)
    run = run_level(cfg, prompts("stream 2 0.01 measured", 2, "m"), prompts("stream 2 0.01 warm", 2, "w"))
    assert [r.prompt_name for r in run.warmup_records] == ["w0", "w1", "w0"]
    assert all(r.warmup and r.ok for r in run.warmup_records)
    assert all(not r.warmup for r in run.records) and len(run.records) == 4
    assert [b["messages"][0]["content"].split()[-1] for b in server.bodies[:3]] == ["warm"] * 3
    w = run.warmup_records
    assert w[0].t_end <= w[1].t_send and w[1].t_end <= w[2].t_send  # one at a time
    assert max(r.t_end for r in w) <= run.t_start  # and all before the measured phase


def test_request_body_model_tools_and_extra_body(server):
    tools = ({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},)
    extra = {"stream_options": {"include_usage": True}, "temperature": 0.5}
    run_level(level(server.base_url, extra_body=extra), prompts("stream 1 0", tools=tools), [])
    run_level(level(server.base_url), prompts("stream 1 0"), [])
    with_tools, plain = server.bodies
    assert with_tools == {
        "model": "req-model",
        "messages": [{"role": "user", "content": "stream 1 0"}],
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.5,
        "tools": [tools[0]],
    }
    assert "tools" not in plain and "temperature" not in plain
    assert gc.get_freeze_count() == 0  # the level's GC freeze is undone


@pytest.mark.parametrize("status, kind", [(404, ErrorType.HTTP_4XX), (500, ErrorType.HTTP_5XX)])
def test_http_errors_are_typed_with_status_and_body_head(server, status, kind):
    run = run_level(level(server.base_url, requests=2), prompts(f"status {status}"), [])
    for r in run.records:
        assert r.error.type is kind and r.error.http_status == status == r.http_status
        assert r.error.body_head.startswith(f"error {status} xxx") and len(r.error.body_head) == 300
        assert str(status) in r.error.message


def test_connection_refused_is_connect():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    run = run_level(
        level(f"http://127.0.0.1:{port}", requests=2, warmup=1), prompts("stream 1 0"), prompts("stream 1 0")
    )
    assert [r.error.type for r in run.warmup_records + run.records] == [ErrorType.CONNECT] * 3
    assert run.records[0].error.message


def test_per_request_timeout_names_the_limit(server):
    t0 = time.perf_counter()
    run = run_level(level(server.base_url, client=ClientSettings(request_timeout_s=0.3)), prompts("stall"), [])
    assert time.perf_counter() - t0 < 15  # ended by the timeout, not by the server's 30 s stall
    err = run.records[0].error
    assert err.type is ErrorType.TIMEOUT and "request_timeout_s=0.3" in err.message
    assert 0.2 <= run.records[0].t_end - run.records[0].t_send < 15


@pytest.mark.parametrize("script", ["cut", "nofinish"])
def test_stream_cut_midway_is_truncated(server, script):
    run = run_level(level(server.base_url), prompts(script), [])
    r = run.records[0]
    assert r.error.type is ErrorType.TRUNCATED, r.error
    assert r.n_chunks >= 1 and r.t_end is not None


def test_deadline_stops_the_level_and_cancels_in_flight(server):
    t0 = time.perf_counter()
    # 5 s: time for the warm-up and both first chunks (~0.1 s idle) even on a loaded host, and the
    # 60 s streams are still going at the deadline however fast the host
    cfg = level(server.base_url, concurrency=2, requests=10, warmup=1, deadline=t0 + 5.0)
    run = run_level(cfg, prompts("stream 1200 0.05"), prompts("stream 1 0"))
    assert time.perf_counter() - t0 < 30  # promptly, not after 60 s streams
    assert run.partial and "deadline" in run.stop_reason and "2/10" in run.stop_reason
    assert len(run.warmup_records) == 1 and run.warmup_records[0].ok
    assert [r.error.type for r in run.records] == [ErrorType.CANCELLED] * 2
    assert all(r.n_chunks > 0 and "deadline" in r.error.message for r in run.records)
    assert all(r.t_end < t0 + 30 for r in run.records)


def test_deadline_already_past_sends_nothing(server):
    cfg = level(server.base_url, requests=5, warmup=2, deadline=time.perf_counter() - 1)
    run = run_level(cfg, prompts("stream 1 0"), prompts("stream 1 0"))
    assert run.partial and run.records == [] and run.warmup_records == [] and server.bodies == []


class _Interrupt(BaseException):
    """Stands in for pytest-timeout's `Failed`, which derives from BaseException."""


@pytest.mark.timeout(0)  # this test arms SIGALRM itself, as pytest-timeout's signal method does
@pytest.mark.parametrize("after_s", [0.15, 0.2, 0.25, 0.3, 0.35])
def test_signal_interrupt_propagates_out_of_the_level(server, after_s):
    """Wherever the signal lands (a task, a timer callback, a transport's data_received), the
    BaseException ends run_level promptly instead of being logged by the loop."""

    landed: list[str] = []  # where the handler ran: the one clue if the interrupt is ever lost

    def interrupt(signum, frame):
        landed.append("".join(traceback.format_stack(frame)[-12:]))
        raise _Interrupt("timeout")

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, after_s)
        t0 = time.perf_counter()
        try:
            run = run_level(level(server.base_url, concurrency=8, requests=16), prompts("stream 5000 0.002"), [])
        except _Interrupt:
            assert time.perf_counter() - t0 < after_s + 8  # the level would take 20 s and more
        else:
            errors = Counter(r.error.type.value if r.error else "ok" for r in run.records)
            pytest.fail(f"run_level returned after {time.perf_counter() - t0:.2f} s: stop_reason="
                        f"{run.stop_reason!r}, records {dict(errors)}; the handler ran "
                        f"{len(landed)} time(s)" + "".join(f"\n--- at:\n{stack}" for stack in landed))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_interrupt_python_could_only_report_as_unraisable_still_ends_the_level(server):
    """A signal can land in a weakref callback or a finalizer (a dying task leaves asyncio's
    WeakSet of tasks; `gc.collect` runs callbacks), where Python only prints "Exception ignored".
    Here a finalizer raises it, deterministically, from the progress callback ~1 s in."""

    class Doomed:
        def __del__(self):
            raise _Interrupt("timeout")

    t0 = time.perf_counter()
    with pytest.raises(_Interrupt):
        run_level(level(server.base_url, concurrency=2, requests=8, progress=lambda p: Doomed()),
                  prompts("stream 5000 0.002"), [])  # 40 s and more without the interrupt
    assert time.perf_counter() - t0 < 15


def test_an_interrupt_that_ends_a_task_nobody_awaits_still_ends_the_level(server):
    """aiohttp writes each request body from a task of its own, referenced by the request and
    awaited only at its release: an interrupt landing there must end the level at once, not when
    the task is collected after the level has run to its end. Here such a task is started,
    deterministically, from the progress callback ~1 s in."""
    kept: list[asyncio.Task] = []  # referenced, as the request references its writer task

    async def body_writer() -> None:
        raise _Interrupt("timeout")

    def progress(p: Progress) -> None:
        if not kept:
            kept.append(asyncio.ensure_future(body_writer()))

    t0 = time.perf_counter()
    with pytest.raises(_Interrupt):
        run_level(level(server.base_url, concurrency=2, requests=8, progress=progress),
                  prompts("stream 5000 0.002"), [])  # 40 s and more without the interrupt
    assert time.perf_counter() - t0 < 15 and kept


def test_the_hang_watchdog_covers_warm_up_and_keeps_its_records(server):
    """A server that sends headers and then nothing during warm-up: the level stops after the
    stall timeout, not after the request timeout, and the warm-up request stays on record."""
    t0 = time.perf_counter()
    cfg = level(server.base_url, requests=4, warmup=2, hang_s=0.5, client=ClientSettings(request_timeout_s=20))
    run = run_level(cfg, prompts("stream 1 0"), prompts("stall"))
    assert time.perf_counter() - t0 < 15  # the watchdog's 0.5 s, not the request timeout's 20 s
    assert run.partial and run.stop_reason.startswith("no progress for") and "during warm-up" in run.stop_reason
    assert run.records == [] and len(run.warmup_records) == 1
    (warm,) = run.warmup_records
    assert warm.error.type is ErrorType.CANCELLED and "hang watchdog" in warm.error.message


def test_a_server_gone_ends_the_level_at_once_and_types_what_was_in_flight(server):
    """`server_gone` answering a reason stops the level within a probe period; requests that were
    in flight are the server's failures (truncated once headers came), not our cancellations.

    The server "exits" once both streams have sent output, whenever that is on a loaded host: a
    progress report counting more output events than one stream paced at 50 ms could have sent."""
    gone_at: list[float] = []

    def watch(p: Progress) -> None:
        if not gone_at and p.output_events > p.elapsed_s / 0.05 + 1:
            gone_at.append(time.perf_counter())

    cfg = level(server.base_url, concurrency=2, requests=50, client=ClientSettings(request_timeout_s=60),
                progress=watch, server_gone=lambda: "server exited with code 3" if gone_at else None)
    run = run_level(cfg, prompts("stream 600 0.05"), [])
    assert gone_at and time.perf_counter() - gone_at[0] < 10  # within probes, not after 30 s streams
    assert run.partial and run.stop_reason.startswith("server exited with code 3; 0/50 measured requests done")
    assert [r.error.type for r in run.records] == [ErrorType.TRUNCATED] * 2
    assert all("went away" in r.error.message for r in run.records)


def chat(script: str, n: int) -> list[Prompt]:
    """Prompts whose first message is a system prompt that every one of them shares."""
    return [Prompt(name=f"q{i}", messages=({"role": "system", "content": "You are terse."},
                                          {"role": "user", "content": script}), max_tokens=8) for i in range(n)]


def test_unique_prompts_give_every_request_its_own_opening(server):
    """--unique-prompts: 5 requests over 2 prompts and 2 warm-ups over 1 reach the server with
    seven different first messages, each opened by its nonce; the rest of each body is the prompt's."""
    cfg = level(server.base_url, requests=5, warmup=2, concurrency=2, nonce="RUN c2 ab12")
    run = run_level(cfg, chat("stream 2 0", 2), chat("stream 1 0", 1))
    assert all(r.ok for r in [*run.warmup_records, *run.records])
    firsts = [b["messages"][0]["content"] for b in server.bodies]
    assert sorted(firsts) == sorted([f"[cellbench w{j} RUN c2 ab12] You are terse." for j in range(2)]
                                    + [f"[cellbench r{i} RUN c2 ab12] You are terse." for i in range(5)])
    assert sorted(b["messages"][1]["content"] for b in server.bodies) == ["stream 1 0"] * 2 + ["stream 2 0"] * 5
    assert [r.prompt_name for r in run.records] == ["q0", "q1", "q0", "q1", "q0"]


def test_without_a_nonce_the_prompts_go_as_they_are(server):
    run_level(level(server.base_url, requests=3), chat("stream 1 0", 2), [])
    assert [b["messages"][0]["content"] for b in server.bodies] == ["You are terse."] * 3


def test_encoded_bodies_one_per_request_only_with_a_nonce():
    prompts_ = chat("x", 2)
    plain = level("http://127.0.0.1:1", requests=6)
    assert len(encode_bodies(plain, prompts_, 6)) == 2  # request i sends body i % 2
    bodies = encode_bodies(replace(plain, nonce="t"), prompts_, 6)
    assert [p.name for p, _ in bodies] == ["q0", "q1"] * 3
    assert len({body for _, body in bodies}) == 6


@pytest.mark.parametrize(
    "content, expected",
    [
        ("hello", "[n] hello"),
        (None, "[n] "),
        ([{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "u"}}],
         [{"type": "text", "text": "[n] hello"}, {"type": "image_url", "image_url": {"url": "u"}}]),
        ([{"type": "image_url", "image_url": {"url": "u"}}],  # the nonce still comes first
         [{"type": "text", "text": "[n] "}, {"type": "image_url", "image_url": {"url": "u"}}]),
    ],
)
def test_the_nonce_opens_the_first_message_whatever_its_content(content, expected):
    messages = ({"role": "user", "content": content}, {"role": "user", "content": "rest"})
    out = with_nonce(messages, "[n] ")
    assert out == [{"role": "user", "content": expected}, {"role": "user", "content": "rest"}]
    assert messages[0]["content"] == content  # the prompt itself is untouched


@pytest.mark.skipif(not placement.supported(), reason="CPU affinity is a Linux API")
def test_client_cpus_pin_the_level_and_are_given_back(server):
    """The whole level (its loop thread) runs on client_cpus, the level records where, and the
    process has its own mask back afterwards."""
    usable = placement.usable_cpus()
    if len(usable) < 2:
        pytest.skip("pinning needs two usable CPUs to be visible")
    before = os.sched_getaffinity(0)
    during: list[set[int]] = []
    cfg = level(server.base_url, requests=2, client_cpus=(usable[-1],),
                progress=lambda p: during.append(os.sched_getaffinity(0)))
    run = run_level(cfg, prompts("stream 2 0"), [])
    assert during and all(mask == {usable[-1]} for mask in during)
    assert run.client.pinned and run.client.host is not None and run.client.host.client_cpus == (usable[-1],)
    assert os.sched_getaffinity(0) == before
