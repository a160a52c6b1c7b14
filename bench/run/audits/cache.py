"""The caching audit (--cache-audit; docs/metrics.md, Audits): after a cell's last level, on the
server that served it, whether a prompt sent a second time is answered faster than the first.

8 of the cell's prompts, each opened by a fresh nonce so that no earlier request can have cached
it, go once at concurrency 1 ("first"); then the same 8 bodies, byte for byte and in the same
order, go again ("repeat"). Each prompt's repeat TTFT against its own first is one pair; the
decision is bench.core.metrics.audits.cache_audit's. The requests are the cell's own (its
max_tokens, ignore_eos, sampling, keep-alive, client CPUs); they are not measured requests and go
to neither the level's figures nor the requests sidecar: the block keeps each TTFT.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from bench.core.level_run import LevelConfig
from bench.core.metrics.audits import CACHE_PROMPTS, CacheAudit, cache_audit, cache_not_run
from bench.core.metrics.requests import ttft
from bench.core.result.model import Level
from bench.load import run_level
from bench.run.config import CellConfig
from bench.run.levels.plan import LevelPlan
from bench.setup.prompts import Prompt

SWEEP_APART = ("a rate sweep on a fresh server per level knows its last level only once that level's server has "
               "stopped (--share-server lets the audit run)")


class AuditedServer(Protocol):
    """The server the last level ran on (bench.run.server.process.ServerProcess, bench.run.server.probes.Endpoint)."""

    @property
    def base_url(self) -> str: ...

    def exit_reason(self) -> str | None: ...


class AuditedCell(Protocol):
    """What the audit reads of the cell (bench.run.levels.cell_run.CellRun)."""

    cfg: CellConfig
    summaries: list[Level]
    extra_body: dict[str, Any]
    deadline: float | None
    shared: bool
    capped: str | None
    server_exit: str | None
    oom: dict | None

    plan: LevelPlan  # its steps: (level, round) pairs, in the order they run


def after_group(cell: AuditedCell, server: AuditedServer, model_id: str, prompts: Sequence[Prompt], *, last_point: Any,
                sweep: bool) -> None:
    """With --cache-audit, the audit into the cell's last level's `audits`, once the group of levels
    on `server` is done: run when that group held the cell's last level, `not run` (and why) when
    the cell stopped early or cannot know its last level yet; nothing before then."""
    if not cell.cfg.load.cache_audit or not cell.summaries or "audits" not in cell.summaries[-1]:
        return
    stopped = cell.capped or cell.server_exit or (cell.oom and "the server was killed for memory")
    if stopped:
        block = cache_not_run(f"the cell stopped before its last level ended: {stopped}")
    elif sweep and not cell.shared:
        block = cache_not_run(SWEEP_APART)
    elif not sweep and not cell.shared and last_point != cell.plan.steps()[-1]:
        return  # a later level, on a server of its own, is the cell's last
    else:
        block = audit(cell.cfg, server, model_id, prompts, cell.extra_body, cell.deadline)
    for earlier in cell.summaries[:-1]:  # a sweep's earlier level, when it was the last one so far
        earlier.get("audits", {}).pop("cache", None)
    cell.summaries[-1]["audits"]["cache"] = block


def audit(cfg: CellConfig, server: AuditedServer, model_id: str, prompts: Sequence[Prompt],
          extra_body: Mapping[str, Any], deadline: float | None, n: int = CACHE_PROMPTS) -> CacheAudit:
    """Send the n nonce-opened prompts twice, in order, and decide on their TTFTs."""
    if not prompts:
        return cache_not_run("the cell has no prompts to repeat", n)
    level = LevelConfig(base_url=server.base_url, model=model_id, concurrency=1, requests=n, warmup=0,
                        client=cfg.client, extra_body=extra_body, deadline=deadline,
                        hang_s=cfg.hang_s, server_gone=server.exit_reason,
                        client_cpus=cfg.client.cpus.client, nonce=f"{cfg.run_id} cache-audit {secrets.token_hex(4)}",
                        server_warmed="the cell's last level",
                        headers=cfg.server.api_key.headers if cfg.server.api_key else {})
    first = _ttfts(level, prompts, n)
    if isinstance(first, str):
        return cache_not_run(f"the first pass stopped: {first}", n)
    repeat = _ttfts(level, prompts, n)  # the same config, so the same nonce: the same bodies
    if isinstance(repeat, str):
        return cache_not_run(f"the repeat pass stopped: {repeat}", n)
    return cache_audit(first, repeat)


def _ttfts(level: LevelConfig, prompts: Sequence[Prompt], n: int) -> list[float | None] | str:
    """Each request's TTFT by its index (None where it failed), or why the pass stopped."""
    done = run_level(level, prompts, ())
    if done.stop_reason is not None:
        return str(done.stop_reason)
    by_index = {r.index: ttft(r) if r.ok else None for r in done.records}
    return [by_index.get(i) for i in range(n)]
