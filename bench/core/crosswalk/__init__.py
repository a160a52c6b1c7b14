"""The crosswalk: what other benchmark tools call each of cellbench's figures, and how they compute it.

The same name means different things across tools: vLLM's TPOT is AIPerf's ITL, vLLM's ITL is
AIPerf's ICL, guidellm's TPOT counts the first token. Each peer's module holds one entry
(`PeerMetric`) per cellbench figure, read in that peer's own source (`source`): `vllm` (`vllm bench
serve` 0.32), `aiperf` (AIPerf 0.13.0), `guidellm` (guidellm 0.8.1) and `siliconbench`. docs/metrics.md
(Names in other tools) shows the same table, and tests/core/test_crosswalk.py keeps the two equal.

It imports nothing but the standard library, so a report or a comparison can label its columns
with it without pulling anything else in:

    peer_name("aiperf", "tpot_ms")    -> "Inter Token Latency" (its short header: ITL)
    peer_metric("vllm", "ttft_ms")    -> the whole entry (name, field, formula, likeness, note, source)
    peer_name("guidellm", "itl_ms")   -> None: guidellm has no equivalent
"""

from __future__ import annotations

from types import MappingProxyType

from bench.core.crosswalk import aiperf, guidellm, siliconbench, vllm
from bench.core.crosswalk.entry import TOOLS, Likeness, PeerMetric

__all__ = ["KEYS", "TOOLS", "Likeness", "PeerMetric", "crosswalk", "likeness", "peer_formula", "peer_metric",
           "peer_name", "tool_label"]

_LABELS = {"vllm": f"vLLM {vllm.VERSION}", "aiperf": f"AIPerf {aiperf.VERSION}",
           "guidellm": f"guidellm {guidellm.VERSION}", "siliconbench": "SiliconBench"}
_SHORT = {"vllm": "vLLM", "aiperf": "AIPerf", "guidellm": "guidellm", "siliconbench": "SiliconBench"}
_MODULES = MappingProxyType(dict(zip(TOOLS, (vllm, aiperf, guidellm, siliconbench), strict=True)))


def _entries(tool: str) -> tuple[PeerMetric, ...]:
    """`tool`'s entries: its module's, then each declared level figure's (bench.core.figures, read
    here, at the lookup, so that importing the crosswalk loads nothing but the standard library)."""
    if tool not in _MODULES:
        raise ValueError(f"unknown tool {tool!r}; one of {', '.join(TOOLS)}")
    from bench.core import figures
    return (*_MODULES[tool].ENTRIES, *(e for f in figures.FIGURES for e in f.peers.get(tool, ())))


def _tool(tool: str) -> MappingProxyType[str, PeerMetric]:
    return MappingProxyType({e.key: e for e in _entries(tool)})


def _keys() -> tuple[str, ...]:
    return tuple(e.key for e in _entries("vllm"))


def __getattr__(name: str) -> tuple[str, ...]:
    """`KEYS`: the cellbench figures the crosswalk covers, in its order: the metric table's keys
    (bench.core.metrics.table), then the level-wide throughputs, goodput and wall time, then each
    declared level figure's rows (`prefix_cache.hit_share`)."""
    if name == "KEYS":
        return _keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tool_label(tool: str, *, version: bool = True) -> str:
    """"AIPerf 0.13.0" (or "AIPerf" without the version): the name of the tool and the version read."""
    _tool(tool)
    return _LABELS[tool] if version else _SHORT[tool]


def crosswalk(tool: str) -> tuple[PeerMetric, ...]:
    """Every entry of `tool`, in KEYS' order."""
    entries = _tool(tool)
    return tuple(entries[key] for key in _keys())


def peer_metric(tool: str, key: str) -> PeerMetric:
    """The entry of cellbench's `key` (a level key: "ttft_ms", "output_throughput_tps", "goodput.goodput_rps")
    under `tool`; a KeyError for a key the crosswalk does not cover."""
    entries = _tool(tool)
    if key not in entries:
        raise KeyError(f"{key!r} is not in the crosswalk; its keys: {', '.join(_keys())}")
    return entries[key]


def peer_name(tool: str, key: str) -> str | None:
    """The peer's name for cellbench's `key`; None where the peer has no equivalent."""
    return peer_metric(tool, key).name


def peer_formula(tool: str, key: str) -> str:
    """The peer's definition of it, in the peer's terms ("" without an equivalent)."""
    return peer_metric(tool, key).formula


def likeness(tool: str, key: str) -> Likeness:
    """"same", "close", "different" or "none" (bench.core.crosswalk.entry.Likeness)."""
    return peer_metric(tool, key).likeness
