"""A level's slots and requests, split across worker processes, and each worker's own config.

Worker k gets about concurrency/N slots and a share of the measured requests in proportion to
its slots (largest remainders, so the counts add up exactly). Request numbers stay the level's
own: worker k's j-th request is global request `Share.indices[j]`, interleaved with the other
workers' in the order the requests will roughly go out, so that request i still sends prompt
i % len(prompts) and every record keeps a number no other record has. Warm-up is not split: the
parent process runs it, sequentially, before any worker starts its measured phase.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from bench.core.level_run import LevelConfig
from bench.setup.prompts import Prompt


@dataclass(frozen=True)
class Share:
    """One worker's part of a level."""

    worker: int  # 0-based
    concurrency: int  # its slots
    indices: tuple[int, ...]  # the level's request numbers it sends, in its own order


def split(concurrency: int, requests: int, procs: int) -> list[Share]:
    """`procs` shares of `concurrency` slots and `requests` requests (fewer shares when there are
    fewer slots or requests than processes: each share has at least one of both)."""
    procs = max(1, min(procs, concurrency, max(requests, 1)))
    slots = [concurrency // procs + (k < concurrency % procs) for k in range(procs)]
    exact = [requests * s / concurrency for s in slots]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(procs), key=lambda k: (-(exact[k] - counts[k]), k))
    for k in by_remainder[: requests - sum(counts)]:
        counts[k] += 1
    kept = [k for k in range(procs) if counts[k] > 0 or requests == 0]
    # Global numbers in the order the requests go out: worker k's j-th at about (j + 0.5) / count.
    order = sorted(((j + 0.5) / counts[k], k) for k in kept for j in range(counts[k]))
    indices: dict[int, list[int]] = {k: [] for k in kept}
    for number, (_, k) in enumerate(order):
        indices[k].append(number)
    return [Share(worker=n, concurrency=slots[k], indices=tuple(indices[k])) for n, k in enumerate(kept)]


def worker_config(cfg: LevelConfig, share: Share, cpus: tuple[int, ...] | None) -> LevelConfig:
    """The level as worker `share.worker` runs it: its slots and requests, no warm-up, pinned to
    `cpus`, and the callables (progress, server probe) left for the worker to fill in (they do not
    cross a process boundary). With --unique-prompts each worker's nonce differs too: request
    openings are numbered per worker, and no two may match."""
    return replace(
        cfg,
        concurrency=share.concurrency,
        requests=len(share.indices),
        warmup=0,
        progress=None,
        server_gone=None,
        client_cpus=cpus,
        nonce=None if cfg.nonce is None else f"{cfg.nonce} p{share.worker}",
    )


def worker_prompts(prompts: Sequence[Prompt], share: Share) -> list[Prompt]:
    """The prompts of the worker's requests, one per request: its j-th sends the prompt the level's
    request `share.indices[j]` sends in a single process."""
    return [prompts[i % len(prompts)] for i in share.indices] if prompts else []
