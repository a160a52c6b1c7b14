"""What `cellbench perf compare` runs a client on (`Workload`) and reads back (`ClientRun`), how a
client's child process is run and timed (`run_child`), and cellbench's own client as that child.

cellbench's client is driven only through its public level API (`bench.load.run_level` with a
`LevelConfig`), so the comparison measures whatever transport is current. The peers' clients
(vLLM's, AIPerf, guidellm) are in `bench.perf.peers`, one module each.

Every child is timed alike: wall from spawn to exit, CPU as the child's user+sys time from
`wait4` (its whole tree that it waited for), so start-up cost is in every client's figure and
cancels between a run of N and one of 3N requests.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.core.level_run import LevelRun

CELLBENCH = "cellbench"
CELLBENCH_KEEP_ALIVE = "cellbench --keep-alive"
HEAD = 32  # characters of output text kept per request


@dataclass(frozen=True)
class Workload:
    """What every client sends: request i is prompts[i % len(prompts)] as one user message, with
    `max_tokens` output tokens and `extra` in the body, `concurrency` in flight, after one
    unmeasured request (cellbench's warm-up, vLLM's initial test run). vLLM's client drops a
    prompt under 4 or over 1024 tokens of `tokenizer`: the comparison checks it sent them all."""

    base_url: str
    model: str
    concurrency: int
    requests: int
    prompts: tuple[str, ...]
    max_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)  # temperature, ignore_eos, ...
    tokenizer: str | None = None  # an HF folder: vLLM's client counts prompt tokens with it
    # Per-request TTFTs and ITLs wanted back. Off for the CPU runs: writing them out costs the
    # harness CPU in proportion to the chunks, which the N-vs-3N difference would count as the client's.
    detail: bool = True
    # cellbench's client only: reuse connections (--keep-alive), as the peers' pooled clients do
    keep_alive: bool = False


@dataclass
class ClientRun:
    """One client's run of one workload, as the comparison reads it (seconds)."""

    client: str
    ok: int
    failed: int
    chunks: int  # token chunks received by the successful requests
    duration_s: float  # the client's own measured phase
    cpu_s: float  # user+sys of the child process (and the children it waited for)
    wall_s: float  # spawn to exit
    # Per successful request: the start of its output text (the null server's first chunk names
    # its stream there), its TTFT and its ITLs, seconds.
    timings: list[tuple[str, float, list[float]]]
    reported: dict[str, float | None]  # the client's own figures: throughput, TTFT/TPOT/ITL medians (ms)
    errors: list[str] = field(default_factory=list)  # up to a few failed requests' messages
    # What cellbench's child saw of its own process over the measured phase (`host_evidence`),
    # for telling a tail the host made from one the client made; empty for the peers.
    evidence: dict[str, float | None] = field(default_factory=dict)


# ------------------------------------------------------------------ running a child


def run_child(argv: list[str], log: Path, cpu: int | None, timeout_s: float,
              env: dict[str, str] | None = None) -> tuple[int, float, float]:
    """Run `argv` (on CPU `cpu` when given, with `env` instead of this process's environment),
    its output into `log`: (exit code, CPU s, wall s).

    CPU = ru_utime + ru_stime from wait4 on the child: its own time and that of the children it
    waited for (a multi-process peer's workers are in it once it has reaped them). A child still
    running after `timeout_s` is killed."""
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    started = time.perf_counter()
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=pin)  # noqa: PLW1509  (sets only this child's CPU mask)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, time.perf_counter() - started


def run_cellbench(work: Workload, folder: Path, cpu: int | None, timeout_s: float = 600.0) -> ClientRun:
    """cellbench's client on `work` in a child (`python -m bench.perf.clients`)."""
    spec, out = folder / "cellbench-spec.json", folder / "cellbench-out.json"
    spec.write_text(json.dumps(asdict(work)))
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "bench.perf.clients", "--spec", str(spec), "--out", str(out)]
    rc, cpu_s, wall_s = run_child(argv, folder / "cellbench.log", cpu, timeout_s)
    if rc != 0 or not out.is_file():
        raise RuntimeError(f"cellbench's client exited {rc}; log: {folder / 'cellbench.log'}")
    return ClientRun(**{**json.loads(out.read_text()), "cpu_s": cpu_s, "wall_s": wall_s})


def requests_of(work: Workload) -> Iterator[str]:
    """The text of each request of `work`, in order: prompts[i % len(prompts)]."""
    return (work.prompts[i % len(work.prompts)] for i in range(work.requests))


# ------------------------------------------------------------------ cellbench's child


def cellbench_child(work: Workload) -> dict[str, Any]:
    """Run `work` with `run_level` in this process; the figures of a ClientRun but CPU and wall."""
    from bench.core.client_settings import ClientSettings
    from bench.core.metrics import itl, summarize_level, ttft
    from bench.load import LevelConfig, run_level
    from bench.setup.prompts import Prompt

    prompts = [Prompt(name=f"p{i}", messages=({"role": "user", "content": text},), max_tokens=work.max_tokens)
               for i, text in enumerate(work.prompts)]
    cfg = LevelConfig(base_url=work.base_url, model=work.model, concurrency=work.concurrency,
                      requests=work.requests, warmup=1,
                      extra_body={**work.extra, "stream_options": {"include_usage": True}},
                      client=ClientSettings(keep_alive=work.keep_alive))
    with collector_pauses() as pauses:
        run = run_level(cfg, prompts, prompts[:1])
    s = summarize_level(run)
    ok = [r for r in run.records if r.ok]
    return {
        "client": CELLBENCH, "ok": len(ok), "failed": len(run.records) - len(ok),
        "chunks": sum(r.n_chunks for r in ok), "duration_s": s["wall_time_s"],
        "timings": [(r.output_text_head[:HEAD], ttft(r), itl(r)) for r in ok] if work.detail else [],
        "reported": {"output_throughput_tps": s["output_throughput_tps"], "ttft_p50_ms": s["ttft_ms"]["p50"],
                     "tpot_p50_ms": s["tpot_ms"]["p50"], "itl_p50_ms": s["itl_ms"]["p50"]},
        "errors": [f"{r.error.type.value}: {r.error.message}" for r in run.records if r.error][:3],
        "evidence": host_evidence(run, pauses),
    }


@contextmanager
def collector_pauses() -> Iterator[list[tuple[float, float]]]:
    """The garbage collector's pauses while the block runs, (perf_counter at its start, seconds),
    timed from its own start and stop callbacks (a few hundred ns each)."""
    pauses: list[tuple[float, float]] = []
    began = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses.append((began[0], time.perf_counter() - began[0]))

    gc.callbacks.append(timed)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(timed)


def host_evidence(run: LevelRun, pauses: list[tuple[float, float]]) -> dict[str, float | None]:
    """What can put a chunk's timestamp late, besides the client's own work: the loop thread
    waiting for a CPU (run-queue wait, its preemptions) and the collector's pauses; and how late
    the loop ran its 10 ms ticker (the sum of all causes), over the measured phase (the
    collection run_level makes before it, and the warm-up's, left out)."""
    host = run.client.host
    pauses_s = [d for t, d in pauses if run.t_start <= t <= run.t_end]
    wall = run.t_end - run.t_start
    wait = None if host is None or host.run_queue_wait_share is None else host.run_queue_wait_share * wall * 1e3
    return {"run_queue_wait_ms": wait,
            "preempted": None if host is None or host.involuntary_switches is None else host.involuntary_switches,
            "loop_lag_p99_ms": run.client.loop_lag_p99_ms,
            "gc_collections": len(pauses_s), "gc_pause_max_ms": max(pauses_s, default=0.0) * 1e3,
            "gc_pause_total_ms": sum(pauses_s) * 1e3}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="cellbench's client on one workload (a child of `cellbench perf compare`)")
    ap.add_argument("--spec", type=Path, required=True, help="the Workload, as JSON")
    ap.add_argument("--out", type=Path, required=True, help="where the figures go, as JSON")
    args = ap.parse_args(argv)
    raw = json.loads(args.spec.read_text())
    work = Workload(**{**raw, "prompts": tuple(raw["prompts"])})
    args.out.write_text(json.dumps(cellbench_child(work)))


if __name__ == "__main__":
    main()
