"""The peers' clients `cellbench perf compare` runs beside cellbench's: one module each, each
declaring one `Peer`.

A peer is found, never installed, by the comparison: vLLM's client comes with a vLLM install
(`cellbench install vllm`), AIPerf and guidellm are tools of their own, each pinned and installed
on request into the framework cache (`cellbench install aiperf`, `cellbench install guidellm`),
like a framework and keyed by version. A peer that is not installed, or cannot run here, gets a
row that says why.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.perf.clients import ClientRun, Workload
from bench.setup.installs.cache import Installation, Recipe

# One module per peer, in the order their rows are printed.
PEER_MODULES = ("bench.perf.peers.vllm", "bench.perf.peers.aiperf", "bench.perf.peers.guidellm")


@dataclass(frozen=True)
class Peer:
    """One peer's client: how to find its install and how to run it on a workload."""

    name: str  # the row's label: "vllm", "aiperf", "guidellm"
    install_hint: str  # the command that installs it
    find: Callable[[], Installation | None]  # its cached install; None when there is none (never installs)
    # Run the peer on a workload in a child process: (install, workload, folder for its files, CPU to pin to).
    run: Callable[[Installation, Workload, Path, int | None], ClientRun]
    # What `cellbench install <name>` builds; None when the peer comes with a framework's install (vLLM).
    recipe: Recipe | None = None
    # Why it cannot run on this machine, or None; asked before `find`.
    unavailable: Callable[[], str | None] = lambda: None


def peers() -> list[Peer]:
    """Every peer, in PEER_MODULES' order."""
    return [importlib.import_module(name).PEER for name in PEER_MODULES]


def tool(name: str) -> tuple[Peer, Recipe] | None:
    """The peer `cellbench install NAME` installs, by name, with its recipe; None for a name no peer
    with a recipe of its own has."""
    return next(((p, p.recipe) for p in peers() if p.recipe is not None and p.name == name), None)
