"""A level on several client processes, in a process of its own, for tests that end that process.

    python -m tests.support.procs_driver BASE_URL PROCS REQUESTS TOKENS [SERVER_PID]

Runs one closed-loop level of 2 x PROCS slots against the paced server of
bench/perf/client_overhead.py with SIGTERM and SIGHUP handled as a cell's pytest session handles
them (bench.plugins.signals), and, given the server's pid, asking whether it is gone as a
cell asks its server. Prints `PIDS <pid> ...` (this process's children: the workers and
multiprocessing's helper) at the first progress report after a request finished; when an interrupt ends the level, `KEPT
<json>` (what it kept) and exits 2; otherwise `DONE <json>`.

`failing_level` is a level function that fails in the worker, as a bug in the load generator would.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import psutil

from bench.core.level_run import LevelConfig, LevelInterrupted, LevelRun, Progress
from bench.load.procs import ProcPlan, run_level_procs
from bench.plugins.signals import install
from bench.setup.prompts import Prompt


def prompts(n: int, tokens: int, prefix: str = "p") -> list[Prompt]:
    return [Prompt(name=f"{prefix}{i}", messages=({"role": "user", "content": "go"},), max_tokens=tokens)
            for i in range(n)]


def failing_level(cfg: LevelConfig, prompts: Sequence[Prompt], warmup_prompts: Sequence[Prompt]) -> LevelRun:
    raise RuntimeError(f"a bug in the level function (c={cfg.concurrency})")


def _summary(run: LevelRun) -> str:
    return json.dumps({"records": len(run.records), "ok": sum(r.ok for r in run.records),
                       "indices": [r.index for r in run.records], "warmup": len(run.warmup_records),
                       "stop_reason": run.stop_reason, "procs": run.client.procs})


def main() -> None:
    base_url, procs, requests, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    server = psutil.Process(int(sys.argv[5])) if len(sys.argv) > 5 else None
    install()

    def gone() -> str | None:
        try:
            return "server exited" if server is not None and server.status() == psutil.STATUS_ZOMBIE else None
        except psutil.NoSuchProcess:
            return "server exited"

    told: list[bool] = []

    def progress(p: Progress) -> None:
        if not told and p.done > 0:  # a finished request: what an interrupt then keeps is never nothing
            told.append(True)
            print("PIDS", *(c.pid for c in psutil.Process().children()), flush=True)

    cfg = LevelConfig(base_url=base_url, model="perf-model", concurrency=2 * procs, requests=requests, warmup=1,
                      extra_body={"stream_options": {"include_usage": True}}, progress=progress,
                      server_gone=gone if server is not None else None)
    try:
        run = run_level_procs(cfg, prompts(4, tokens), prompts(1, 2, "w"), ProcPlan(procs, (None,) * procs, "test"),
                              server_pid=server.pid if server is not None else None)
    except LevelInterrupted as exc:
        print("KEPT", _summary(exc.level_run), flush=True)
        sys.exit(2)
    print("DONE", _summary(run), flush=True)


if __name__ == "__main__":
    main()
