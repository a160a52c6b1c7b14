"""A level on several client processes (`--client-procs`, bench.load.procs).

The integration tests drive the zero-work paced SSE server of bench/perf/client_overhead.py (its
own process) with real worker processes, and check what holds however busy the host is: records
merged exactly (every metric from all samples, request numbers unique, warm-up apart), every
worker stopped by a deadline, a server gone and an interrupt, what finished kept, and no worker
left once the level is over, even when its parent is killed. How much faster several processes
are depends on an idle host: that is `test_client_procs_perf.py`, marked `perf`.
"""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import psutil
import pytest

from bench.core import metrics
from bench.core.level_run import ClientHealth, LevelConfig, LevelInterrupted, OpenLoop, Progress
from bench.core.records import ErrorType
from bench.core.result.files import result_schema
from bench.core.verdicts import Evidence, classify
from bench.host.cpus import placement
from bench.load.procs import ProcPlan, WorkerError, plan_level, resolve, run_level_procs
from bench.load.procs.merge import merged_health, stop_reason
from bench.load.procs.plan import CLIENT_BOUND_SHARE
from bench.load.procs.split import split
from bench.perf.null_server.server import MODEL, paced_server
from tests.support.procs_driver import failing_level, prompts

ROOT = Path(__file__).resolve().parents[2]


def workers_of(pid: int | None = None) -> list[psutil.Process]:
    """The client worker processes among a process's children (multiprocessing's spawned
    interpreters; its resource tracker, a helper of the parent's lifetime, is not one)."""
    out = []
    for child in psutil.Process(pid).children():
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                out.append(child)
        except psutil.NoSuchProcess:
            continue
    return out


def schema_of(block: str) -> dict:
    """The result schema's definition of one block (`client`, `level`), its references resolvable."""
    schema = result_schema()
    return {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{block}"}


def plan(procs: int) -> ProcPlan:
    return ProcPlan(procs, (None,) * procs, f"test: {procs}")


def level(base_url: str, **kw) -> LevelConfig:
    defaults = {"base_url": base_url, "model": MODEL, "concurrency": 4, "requests": 8, "warmup": 0,
                "extra_body": {"stream_options": {"include_usage": True}}}
    return LevelConfig(**{**defaults, **kw})


@pytest.fixture(scope="module")
def paced() -> Iterator[str]:
    with paced_server(5.0) as (base_url, _):
        yield base_url


# ------------------------------------------------------------------ splitting and planning


@pytest.mark.parametrize("concurrency, requests, procs", [(8, 100, 2), (7, 30, 3), (16, 5, 4), (3, 40, 8),
                                                         (5, 4, 4), (64, 1000, 6), (2, 1, 2)])
def test_a_split_covers_every_slot_and_request_once(concurrency, requests, procs):
    shares = split(concurrency, requests, procs)
    assert len(shares) == min(procs, concurrency, requests)
    assert sum(s.concurrency for s in shares) == concurrency
    assert sorted(i for s in shares for i in s.indices) == list(range(requests))
    assert all(s.concurrency >= 1 and s.indices for s in shares)
    assert max(s.concurrency for s in shares) - min(s.concurrency for s in shares) <= 1
    for s in shares:  # requests in proportion to slots, and each worker's in the order they go out
        assert abs(len(s.indices) - requests * s.concurrency / concurrency) < 1
        assert list(s.indices) == sorted(s.indices)


def test_auto_never_takes_the_servers_core_on_two_unpinned_cpus():
    choice = resolve("auto", placement.Placement(how="auto: off with 2 CPUs"), gpu=False, usable=(0, 1))
    assert choice.auto and choice.free_cpus == 1 and "computes on all 2 CPUs" in choice.why
    saturated = {"concurrency": 8, "client": {"cpu_share": 0.95, "loop_lag_p99_ms": 30.0}}
    chosen = plan_level(choice, 16, 100, saturated)
    assert chosen.procs == 1
    assert chosen.how == ("auto: 1 process: c=8 used 0.95 of a core, so c=16 would need about 1.90 on one process "
                          f"(client-bound above 0.80); free for the client: {choice.why}")


def test_auto_adds_processes_only_where_a_level_would_be_client_bound():
    choice = resolve("auto", placement.Placement(client=(2, 3, 4, 5), server=(0, 1), how="explicit"), gpu=False,
                     usable=tuple(range(6)))
    assert (choice.free_cpus, choice.cpus) == (4, (2, 3, 4, 5))
    first = plan_level(choice, 8, 100, None)
    assert first.procs == 1 and "no earlier level" in first.how
    light = plan_level(choice, 16, 100, {"concurrency": 8, "client": {"cpu_share": 0.3, "loop_lag_p99_ms": 1.0}})
    assert light.procs == 1 and "would need about 0.60" in light.how
    heavy = plan_level(choice, 16, 100, {"concurrency": 8, "client": {"cpu_share": 0.7, "loop_lag_p99_ms": 4.0}})
    assert heavy.procs == 3 and heavy.cpus == ((2,), (3,), (4,)) and heavy.how.startswith("auto: 3 processes: ")
    # a level already on several processes is measured by all of them together
    split_before = {"concurrency": 16, "client": {"cpu_share": 0.6, "loop_lag_p99_ms": 4.0, "procs": 2,
                                                  "workers": [{"cpu_share": 0.6}, {"cpu_share": 0.55}]}}
    more = plan_level(choice, 32, 100, split_before)
    assert more.procs == 4 and "c=16 used 1.15 of a core" in more.how and "free for the client" in more.how
    assert plan_level(choice, 2, 100, split_before).procs == 1  # 0.14 on one process
    interrupted = {"concurrency": 8, "client": {"cpu_share": 0.0, "loop_lag_p99_ms": None}}
    assert plan_level(choice, 16, 100, interrupted).procs == 1
    open_loop = {"request_rate": 4.0, "client": {"cpu_share": 0.9, "loop_lag_p99_ms": 4.0}}
    assert plan_level(choice, 16, 100, open_loop).procs == 1


def test_a_given_count_is_used_up_to_the_levels_slots():
    choice = resolve("3", placement.Placement(), gpu=False, usable=(0, 1))
    assert plan_level(choice, 8, 100, None) == ProcPlan(3, (None,) * 3, "--client-procs 3")
    assert plan_level(choice, 2, 100, None).procs == 2
    on_one = resolve("2", placement.Placement(client=(1,), server=(0,), how="explicit"), gpu=False, usable=(0, 1))
    assert plan_level(on_one, 8, 100, None).how == "--client-procs 2; they share the client's 1 CPU"
    with pytest.raises(ValueError, match="1 or more, or auto"):
        resolve("0", placement.Placement(), gpu=False)


def test_a_gpu_host_leaves_cpus_to_the_server_and_a_pinned_server_its_own():
    gpu = resolve("auto", placement.Placement(how="auto: off on a GPU host"), gpu=True, usable=tuple(range(16)))
    assert gpu.free_cpus == 12 and gpu.cpus is None and "4 kept for the server" in gpu.why
    server = resolve("auto", placement.Placement(server=(0, 1), how="explicit"), gpu=False, usable=(0, 1, 2, 3))
    assert server.cpus == (2, 3) and "--server-cpus 0-1" in server.why


def test_auto_judges_client_bound_as_the_client_health_does():
    limit = inspect.signature(metrics.client_health).parameters["cpu_limit"].default
    assert CLIENT_BOUND_SHARE == limit


# ------------------------------------------------------------------ merging


def test_the_level_stop_reason_counts_the_whole_level():
    reasons = ["deadline reached: 30/50 measured requests sent, 4 in flight cancelled",
               "deadline reached: 29/50 measured requests sent, 3 in flight cancelled"]
    assert stop_reason(reasons, [30, 29], 100) == \
        "deadline reached: 59/100 measured requests sent, 7 in flight cancelled"
    gone = ["server exited with code 3; 10/50 measured requests done, 2 in flight cut off", None]
    assert stop_reason(gone, [10, 50], 100) == \
        "server exited with code 3; 60/100 measured requests done, 2 in flight cut off"
    assert stop_reason([None, None], [50, 50], 100) is None
    assert stop_reason(["something new", "something new"], [1, 2], 100) == "something new"


def test_the_busiest_process_makes_the_level_client_bound():
    easy = ClientHealth(cpu_share=0.40, loop_lag_p99_ms=2.0, schedule_lag_p99_ms=1.0)
    busy = ClientHealth(cpu_share=0.93, loop_lag_p99_ms=9.0, schedule_lag_p99_ms=60.0)
    health = merged_health([easy, busy], 2, "--client-procs 2", None)
    assert (health.cpu_share, health.loop_lag_p99_ms, health.schedule_lag_p99_ms) == (0.93, 9.0, 60.0)
    assert health.workers == (easy, busy) and health.procs == 2
    block = metrics.client_health(health)
    assert block["client_bound"] and block["procs"] == 2 and block["procs_how"] == "--client-procs 2"
    assert [w["client_bound"] for w in block["workers"]] == [False, True]
    jsonschema.validate(block, schema_of("client"))
    level_block = {"concurrency": 16, "successful": 10, "failed": 0, "client": block}
    verdict = classify(Evidence(levels=(level_block,)))
    assert verdict.reason == ("client-bound at c=16: client CPU 0.93 of a core in the busiest of 2 client "
                              "processes: numbers measure the client")


def test_perf_counter_is_one_clock_across_processes():
    """The shared start and every record's timestamps compare across processes only because
    perf_counter reads one system-wide clock: a child's reading lies between two of ours."""
    if sys.platform.startswith("linux"):
        assert time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        pool.apply(time.perf_counter)  # the child is up
        before = time.perf_counter()
        theirs = pool.apply(time.perf_counter)
        after = time.perf_counter()
    assert before <= theirs <= after


# ------------------------------------------------------------------ against the paced server


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_records_merge_exactly_across_processes(paced):
    reports: list[Progress] = []
    cfg = level(paced, concurrency=6, requests=30, warmup=2, progress=reports.append)
    run = run_level_procs(cfg, prompts(7, 20), prompts(1, 3, "w"), plan(2))
    records = run.records
    assert [r.index for r in records] == list(range(30))  # every request number once
    assert all(r.ok and not r.warmup for r in records), [r.error for r in records if not r.ok]
    assert [r.prompt_name for r in records] == [f"p{i % 7}" for i in range(30)]  # request i sends prompt i % 7
    assert [(r.index, r.warmup, r.prompt_name) for r in run.warmup_records] == [(0, True, "w0"), (1, True, "w0")]
    assert not run.partial and run.stop_reason is None

    shares = split(6, 30, 2)
    assert [len(s.indices) for s in shares] == [15, 15]
    by_worker = [[records[i] for i in s.indices] for s in shares]
    # the workers ran side by side from one start: each began before the other's last request ended
    assert all(min(r.t_sched for r in mine) < max(r.t_end for r in other)
               for mine, other in (by_worker, by_worker[::-1]))

    summary = metrics.summarize_level(run)
    ttfts = [metrics.ttft(r) for r in records]
    gaps = [g for r in records for g in metrics.itl(r)]
    for q in (50, 90, 99):  # from all samples, not per process
        assert summary["ttft_ms"][f"p{q}"] == pytest.approx(metrics.percentile(ttfts, q) * 1000)
        assert summary["itl_ms"][f"p{q}"] == pytest.approx(metrics.percentile(gaps, q) * 1000)
    assert summary["itl_ms"]["n"] == len(gaps) == 30 * 19
    wall = max(r.t_end for r in records) - min(r.t_send for r in records)  # the union of the workers' spans
    assert summary["wall_time_s"] == pytest.approx(wall)
    assert summary["output_throughput_tps"] == pytest.approx(30 * 20 / wall)
    assert summary["warmup"]["requests"] == 2 and summary["num_requests"] == 30

    client = summary["client"]
    assert client["procs"] == 2 and client["procs_how"] == "test: 2" and len(client["workers"]) == 2
    assert client["cpu_share"] == max(w["cpu_share"] for w in client["workers"])
    jsonschema.validate(summary, schema_of("level"))

    assert reports and reports[-1].done == 30 and all(p.total == 30 for p in reports)
    assert reports[-1].output_events == 30 * 20
    assert [p.elapsed_s for p in reports] == sorted(p.elapsed_s for p in reports)
    assert workers_of() == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_deadline_stops_every_worker_and_keeps_what_finished(paced):
    t0 = time.perf_counter()
    # 20 s per request, and 10 s before the deadline for the warm-up and both workers' first sends:
    # a worker started late on a loaded host still has requests in flight when it comes
    cfg = level(paced, concurrency=4, requests=40, warmup=1, deadline=t0 + 10.0)
    run = run_level_procs(cfg, prompts(4, 4000), prompts(1, 2, "w"), plan(2))
    assert time.perf_counter() - t0 < 40
    assert run.partial and len(run.warmup_records) == 1 and run.warmup_records[0].ok
    cancelled = [r for r in run.records if r.error is not None]
    assert cancelled and all(r.error.type is ErrorType.CANCELLED and "deadline" in r.error.message
                             for r in cancelled)
    assert run.stop_reason == (f"deadline reached: {len(run.records)}/40 measured requests sent, "
                               f"{len(cancelled)} in flight cancelled")
    shares = split(4, 40, 2)
    sent = {r.index for r in run.records}
    assert all(sent & set(s.indices) for s in shares)  # both workers' requests, each stopped at the deadline
    assert len(run.client.workers) == 2
    assert workers_of() == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_level_stopped_in_warm_up_starts_no_worker(paced):
    cfg = level(paced, concurrency=4, requests=40, warmup=2, deadline=time.perf_counter() + 5.0)
    run = run_level_procs(cfg, prompts(4, 20), prompts(1, 4000, "w"), plan(2))  # a 20 s warm-up request
    assert run.records == [] and [r.error.type for r in run.warmup_records] == [ErrorType.CANCELLED]
    assert run.stop_reason == "deadline reached during warm-up: 0/40 measured requests sent, 1 in flight cancelled"
    assert run.client.procs == 2 and run.client.workers == ()
    assert workers_of() == []


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("pid_known", [True, False])
def test_a_server_gone_stops_every_worker_at_once(pid_known):
    with paced_server(5.0) as (base_url, server):
        def gone() -> str | None:
            try:
                return "server exited with signal SIGKILL" if server.status() == psutil.STATUS_ZOMBIE else None
            except psutil.NoSuchProcess:
                return "server exited with signal SIGKILL"

        def progress(p: Progress) -> None:
            if p.output_events > 0 and server.is_running():
                server.kill()

        cfg = level(base_url, concurrency=4, requests=400, server_gone=gone, progress=progress)
        t0 = time.perf_counter()
        run = run_level_procs(cfg, prompts(4, 800), [], plan(2), server_pid=server.pid if pid_known else None)
    assert time.perf_counter() - t0 < 30
    assert run.partial and run.stop_reason.startswith("server exited with signal SIGKILL; ")
    assert len(run.records) < 40, "the workers went on sending to a server known gone"
    assert all(r.error is not None and r.error.type in (ErrorType.CONNECT, ErrorType.TRUNCATED) for r in run.records)
    assert workers_of() == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_hang_watchdog_stops_every_worker():
    """A server that stops answering (SIGSTOP: no byte, no closed connection): each worker's
    watchdog ends its part, and the level says how far the whole of it got."""
    with paced_server(5.0) as (base_url, server):
        def freeze(p: Progress) -> None:
            if p.output_events > 0 and server.status() != psutil.STATUS_STOPPED:
                server.suspend()

        cfg = level(base_url, concurrency=4, requests=400, hang_s=1.0, progress=freeze)
        t0 = time.perf_counter()
        try:
            run = run_level_procs(cfg, prompts(4, 800), [], plan(2))
        finally:
            server.resume()
    assert time.perf_counter() - t0 < 30
    stalled = [r for r in run.records if r.error is not None]
    assert stalled and all(r.error.type is ErrorType.CANCELLED and "hang watchdog" in r.error.message
                           for r in stalled)
    done = len(run.records) - len(stalled)  # finished before the watchdog fired, as a single process counts
    expected = (rf"no progress for \d s: no output and no finished request; {done}/400 measured requests done, "
                rf"{len(stalled)} in flight cancelled")
    assert re.fullmatch(expected, run.stop_reason), run.stop_reason
    assert {r.index for r in stalled} & set(split(4, 400, 2)[0].indices)
    assert {r.index for r in stalled} & set(split(4, 400, 2)[1].indices)
    assert workers_of() == []


class _Timeout(BaseException):
    """Stands in for pytest-timeout's `Failed`, which derives from BaseException."""


@pytest.mark.integration
@pytest.mark.timeout(0)  # this test arms SIGALRM itself
@pytest.mark.parametrize("interrupt, warmup", [(KeyboardInterrupt, 1), (KeyboardInterrupt, 0), (_Timeout, 1)])
def test_an_interrupt_stops_every_worker_and_keeps_what_finished(paced, interrupt, warmup):
    def handler(signum, frame):
        raise interrupt("received SIGALRM")

    previous = signal.signal(signal.SIGALRM, handler)
    t0 = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, 4.0)  # spawn, warm-up, then about 2 s of 0.1 s requests
        with pytest.raises(interrupt) as caught:
            run_level_procs(level(paced, concurrency=4, requests=4000, warmup=warmup), prompts(4, 20),
                            prompts(1, 2, "w"), plan(2))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - t0 < 40
    assert workers_of() == []
    if interrupt is KeyboardInterrupt:  # as a single process, it carries what finished
        assert isinstance(caught.value, LevelInterrupted)
        kept = caught.value.level_run
        assert kept.partial and kept.stop_reason == "interrupted (received SIGALRM)"
        assert len(kept.warmup_records) == warmup and kept.records and all(r.ok for r in kept.records)
        assert len({r.index for r in kept.records}) == len(kept.records) < 4000


def _driver(base_url: str, requests: int, tokens: int) -> subprocess.Popen:
    """The driver in a process group of its own, as a shell starts a command."""
    return subprocess.Popen([sys.executable, "-m", "tests.support.procs_driver", base_url, "2", str(requests),
                             str(tokens)], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)


def _pids(proc: subprocess.Popen) -> list[int]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PIDS "), line
    return [int(p) for p in line.split()[1:]]


def _gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """The pids still running (not a zombie) after `within_s`."""
    limit = time.monotonic() + within_s
    while True:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > limit:
            return alive
        time.sleep(0.1)


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig, group", [(signal.SIGTERM, False), (signal.SIGINT, True), (signal.SIGHUP, True)],
                         ids=["SIGTERM to the parent", "Ctrl-C to the group", "SIGHUP to the group"])
def test_a_level_whose_process_is_terminated_keeps_what_finished_and_leaves_no_worker(paced, sig, group):
    """The parent alone (a CI runner's cancel), or every process of the command at once (Ctrl-C in
    a terminal, a closed terminal): the workers' records come back either way."""
    proc = _driver(paced, 4000, 20)
    try:
        pids = _pids(proc)
        assert len(pids) >= 2
        time.sleep(1.0)
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2, out
    kept = json.loads(out.split("KEPT ", 1)[1])
    name = {signal.SIGINT: "KeyboardInterrupt"}.get(sig, f"received {signal.Signals(sig).name}")
    assert kept["stop_reason"] == f"interrupted ({name})" and kept["procs"] == 2 and kept["warmup"] == 1
    assert kept["records"] > 0 and kept["ok"] == kept["records"] and len(set(kept["indices"])) == kept["records"]
    assert _gone(pids) == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_killed_parent_leaves_no_worker(paced):
    proc = _driver(paced, 4000, 20)
    try:
        pids = _pids(proc)
        proc.kill()  # SIGKILL: no handler, no cleanup of its own
        proc.wait(10)
    finally:
        proc.kill()
    assert _gone(pids) == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_failing_worker_fails_the_level_and_leaves_no_worker(paced):
    with pytest.raises(WorkerError, match="a bug in the level function") as caught:
        run_level_procs(level(paced, concurrency=4, requests=8), prompts(4, 5), [], plan(2), level_fn=failing_level)
    assert "client process" in str(caught.value)
    assert workers_of() == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_worker_killed_mid_level_fails_the_level_at_once(paced):
    def kill_one(p: Progress) -> None:
        if p.output_events > 0 and len(workers_of()) == 2:
            workers_of()[0].kill()

    t0 = time.perf_counter()
    with pytest.raises(WorkerError, match=r"ended with exit code -9 before it reported its requests"):
        run_level_procs(level(paced, concurrency=4, requests=4000, progress=kill_one), prompts(4, 20), [], plan(2))
    assert time.perf_counter() - t0 < 30
    assert workers_of() == []


@pytest.mark.integration
def test_one_process_runs_in_this_process_and_says_how_it_was_chosen(paced):
    run = run_level_procs(level(paced, concurrency=2, requests=4), prompts(2, 5), [], plan(1))
    assert run.client.procs == 1 and run.client.procs_how == "test: 1" and run.client.workers == ()
    assert [r.index for r in run.records] == [0, 1, 2, 3] and all(r.ok for r in run.records)
    assert workers_of() == []


@pytest.mark.parametrize("procs", [1, 2])
def test_an_open_loop_level_runs_its_one_schedule_on_one_process(paced, procs):
    cfg = level(paced, concurrency=0, requests=4, open_loop=OpenLoop(rate=50.0))
    run = run_level_procs(cfg, prompts(2, 5), [], plan(procs))
    assert run.client.procs == 1 and run.client.workers == ()
    assert run.client.procs_how == ("test: 1" if procs == 1 else "test: 2; an open-loop level runs on one process")
    assert [r.index for r in run.records] == [0, 1, 2, 3] and all(r.ok for r in run.records)
    assert len(run.schedule) == 4 and workers_of() == []


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_duration_ends_a_level_on_several_processes_as_on_one(paced):
    # 1000 requests of 0.5 s each on 4 slots take over 2 minutes; the duration is 0.8 s
    run = run_level_procs(level(paced, concurrency=4, requests=1000, duration_s=0.8), prompts(3, 100), [], plan(2))
    assert run.ended_by == "duration" and not run.partial and run.stop_reason is None
    assert 0 < len(run.records) < 1000 and all(r.ok for r in run.records), "what was in flight finished"
    assert metrics.summarize_level(run)["duration"]["ended_by"] == "duration"
