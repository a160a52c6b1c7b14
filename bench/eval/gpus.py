"""GPU leases: one lock file per GPU, so rows on xdist workers run on disjoint GPUs.

A row needing N GPUs takes the first N free ones of the pool (`--gpu-pool 0,1`, default every
GPU nvidia-smi lists) and holds their locks until its server is gone. Locks are flocks, so a
killed session releases them with its process. Nothing here looks at what other users run on
the GPUs: the pool is the user's statement of which GPUs this run may use.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class GpuProcess:
    """A process another user (or an earlier run) has on a GPU: listed, never killed."""

    gpu: int
    pid: int
    user: str
    memory_mb: int
    name: str


def _smi(*query: str) -> list[list[str]]:
    done = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                          timeout=30, check=True)
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines() if line.strip()]


def busy_gpus() -> tuple[list[int], list[GpuProcess], str | None]:
    """This machine's GPU indices and the compute processes on them (nvidia-smi), or why not known."""
    try:
        gpus = {uuid: int(index) for index, uuid in _smi("--query-gpu=index,uuid")}
        apps = _smi("--query-compute-apps=gpu_uuid,pid,used_memory,process_name")
    except FileNotFoundError:
        return [], [], "nvidia-smi not found: no NVIDIA GPU here"
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return [], [], f"nvidia-smi failed: {exc}"
    busy = []
    for uuid, pid, memory, *name in apps:
        if uuid in gpus and pid.isdigit():
            try:
                user = psutil.Process(int(pid)).username()
            except psutil.Error:
                user = "unknown user"
            busy.append(GpuProcess(gpus[uuid], int(pid), user, int(memory) if memory.isdigit() else 0,
                                   ",".join(name)))
    return sorted(gpus.values()), busy, None


def parse_pool(text: str) -> tuple[int, ...]:
    try:
        pool = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--gpu-pool takes comma-separated GPU indices, got {text!r}") from None
    if not pool or min(pool) < 0 or len(set(pool)) != len(pool):
        raise ValueError(f"--gpu-pool takes distinct GPU indices >= 0, got {text!r}")
    return pool


def _try_lock(path: Path):
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle


@contextmanager
def lease(pool: Sequence[int], count: int, lock_dir: Path, timeout_s: float,
          poll_s: float = 0.5) -> Iterator[tuple[int, ...]]:
    """Hold `count` GPUs of `pool` for the block; raises TimeoutError naming the pool when none free up."""
    if count > len(pool):
        raise ValueError(f"needs {count} GPU(s), the pool has {len(pool)}: {list(pool)}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        with ExitStack() as held:
            taken: list[int] = []
            for gpu in pool:
                handle = _try_lock(lock_dir / f"gpu{gpu}.lock")
                if handle is not None:
                    held.callback(handle.close)  # closing the file releases its flock
                    taken.append(gpu)
                    if len(taken) == count:
                        break
            if len(taken) == count:
                yield tuple(taken)
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {count} free GPU(s) in pool {list(pool)} within {timeout_s:g} s")
        time.sleep(poll_s)
