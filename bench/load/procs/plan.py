"""How many client processes a level runs on (`--client-procs N|auto`), and on which CPUs.

`resolve` turns the option into a `ProcsChoice` once per session: a fixed count, or `auto` with
the CPUs that are free for the client. Free means: the `--client-cpus` list when the client is
pinned; the CPUs `--server-cpus` leaves when only the server is; with nothing pinned, on a GPU
host, the CPUs less a quarter (at least 2) kept for the server's own processes; with nothing
pinned and no GPU, one: a CPU server computes on every core, so a second client process would
only take a core from the server it measures (this 2-core machine's case).

`plan_level` decides each level. A fixed count is used as given (never more processes than the
level has slots or requests). `auto` adds processes only where the level would be client-bound
on one, by the existing judgement (`bench.core.metrics.client_health`: CPU share above 0.8 of a
core): the level before it in the cell measured the client's CPU share, and the next level's is
that share scaled by the ratio of concurrencies (an upper bound: at a saturated server the chunk
rate, and with it the client's CPU, grows less). Enough processes to keep each near half a core,
at most one per free CPU. A cell's first level has nothing to plan from and runs on one process.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.core.client_settings import ProcsChoice
from bench.host.cpus.placement import Placement, format_cpus, usable_cpus
from bench.host.machine import detect

CLIENT_BOUND_SHARE = 0.8  # bench.core.metrics.client_health's cpu_limit: above it a level is client-bound
TARGET_SHARE = 0.5  # auto gives each process about this much of a core: its loop still answers on time
AUTO = "auto"


@dataclass(frozen=True)
class ProcPlan:
    """One level's processes: how many, each one's CPUs (None: not pinned), and why."""

    procs: int
    cpus: tuple[tuple[int, ...] | None, ...]
    how: str


def parse(text: str) -> int | None:
    """`auto` -> None, `4` -> 4; ValueError for anything else."""
    text = str(text).strip().lower()
    if text == AUTO:
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"--client-procs takes a count of processes, 1 or more, or auto; got {text!r}")
    return count


def resolve(text: str, placement: Placement, *, gpu: bool | None = None,
            usable: tuple[int, ...] | None = None) -> ProcsChoice:
    """The choice `--client-procs TEXT` makes with this placement (see the module docstring);
    `gpu` None: whether this machine has one, asked only when it matters."""
    count = parse(text)
    usable = usable_cpus() if usable is None else usable
    if placement.client is not None:
        cpus: tuple[int, ...] | None = placement.client
        why = f"the client's CPUs {format_cpus(placement.client)} (--client-cpus)"
    elif placement.server is not None:
        cpus = tuple(c for c in usable if c not in placement.server) or None
        why = (f"the CPUs the server leaves, {format_cpus(cpus)} (--server-cpus "
               f"{format_cpus(placement.server)})" if cpus else "none: the server has every CPU")
    else:
        cpus = None
        if gpu if gpu is not None else bool(detect().gpus):
            keep = max(2, len(usable) // 4)
            free = max(1, len(usable) - keep)
            return ProcsChoice(count, free, None, f"{free} of the host's {len(usable)} CPUs, {keep} kept for the "
                                                  f"server's own processes (a GPU host, nothing pinned)")
        why = (f"one: nothing is pinned and a CPU server computes on all {len(usable)} CPUs, so another client "
               f"process would take a core from it (--client-cpus/--server-cpus give the client its own)")
    return ProcsChoice(count, len(cpus) if cpus else 1, cpus, why)


def plan_level(choice: ProcsChoice, concurrency: int, requests: int,
               previous: Mapping[str, Any] | None) -> ProcPlan:
    """The processes for a level of `concurrency` slots and `requests` requests; `previous` is the
    summary (`bench.core.metrics.summarize_level`) of the cell's level before it, if any."""
    ceiling = max(1, min(concurrency, requests or 1))
    if not choice.auto:
        assert choice.count is not None
        procs = min(choice.count, ceiling)
        how = f"--client-procs {choice.count}"
        if procs < choice.count:
            how += f": {procs}, one per {'slot' if concurrency <= requests else 'request'} of c={concurrency}"
        if choice.cpus is not None and procs > len(choice.cpus):
            how += f"; they share the client's {len(choice.cpus)} CPU{'s' if len(choice.cpus) > 1 else ''}"
        return ProcPlan(procs, _cpus(choice, procs), how)
    share, measured_at = _measured_share(previous)
    if share is None:
        return ProcPlan(1, _cpus(choice, 1), "auto: 1 process: no earlier level of the cell measured the client")
    need = share * concurrency / measured_at
    estimate = (f"c={measured_at} used {share:.2f} of a core, so c={concurrency} would need about {need:.2f} "
                f"on one process (client-bound above {CLIENT_BOUND_SHARE:.2f})")
    if need <= CLIENT_BOUND_SHARE:
        return ProcPlan(1, _cpus(choice, 1), f"auto: 1 process: {estimate}")
    wanted = math.ceil(need / TARGET_SHARE)
    procs = max(1, min(wanted, choice.free_cpus, ceiling))
    where = f"; free for the client: {choice.why}" if procs < wanted else ""
    return ProcPlan(procs, _cpus(choice, procs),
                    f"auto: {procs} process{'es' if procs > 1 else ''}: {estimate}{where}")


def _measured_share(previous: Mapping[str, Any] | None) -> tuple[float | None, int]:
    """The client's CPU share over the previous level (every process's, summed) and its concurrency;
    (None, 0) when it measured nothing (no level yet, or one an interrupt or a stop in warm-up ended)."""
    client = (previous or {}).get("client") or {}
    if previous is None or client.get("loop_lag_p99_ms") is None or not previous.get("concurrency"):
        return None, 0  # (an open-loop level has no concurrency to scale from)
    workers: Sequence[Mapping[str, Any]] = client.get("workers") or ()
    share = sum(w.get("cpu_share") or 0.0 for w in workers) if workers else client.get("cpu_share") or 0.0
    return float(share), int(previous["concurrency"])


def _cpus(choice: ProcsChoice, procs: int) -> tuple[tuple[int, ...] | None, ...]:
    """Each worker's CPUs: one of the client's CPUs each when there are enough, else all of them;
    None (the kernel places them) when the client is not pinned."""
    if choice.cpus is None:
        return (None,) * procs
    if len(choice.cpus) >= procs:
        return tuple((cpu,) for cpu in choice.cpus[:procs])
    return (choice.cpus,) * procs
