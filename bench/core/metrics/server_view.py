"""A level as the machine and the server saw it, declared: its energy (bench.core.lenses.energy) and the
server's own metrics over it (bench.run.scrape), each field with its description, from which the
schema's `energy` and `server_metrics` entries are generated."""

from __future__ import annotations

from typing import Annotated, TypedDict

from bench.base.doc import Doc
from bench.host.power import Device


class _EnergySourceRequired(TypedDict):
    device: Annotated[Device, Doc("gpu: the GPUs' power, summed; cpu: the CPU packages' energy counters (RAPL).")]
    source: Annotated[str, Doc("How it was read: nvml, nvidia-smi, metalstat, rapl.")]
    interval_s: Annotated[float, Doc("The sampling interval.", exclusiveMinimum=0)]
    samples: Annotated[int, Doc("Samples inside the level's window (its ends are interpolated from the samples around "
                                "them).", minimum=0)]


class _EnergySourceMeasured(_EnergySourceRequired):
    wall_s: Annotated[float, Doc("The level's measured wall time the joules are over.", minimum=0)]
    joules: Annotated[float, Doc("Energy over the level: GPU power integrated (trapezoids), or the RAPL counters' "
                                 "difference.")]
    avg_w: Annotated[float | None, Doc("joules / wall_s.")]
    output_tokens: Annotated[int, Doc("The level's output tokens (output_tokens_total).", minimum=0)]
    j_per_output_token: Annotated[float | None, Doc("joules / output_tokens.")]


class EnergySource(_EnergySourceMeasured, total=False):
    """One power source over a level (bench.core.lenses.energy)."""

    idle_w: Annotated[float, Doc("The source's power with the machine idle, read for a few seconds before the server "
                                 "started (servers[].idle_power); absent where it was not read.", minimum=0)]
    joules_above_idle: Annotated[float, Doc("joules less idle_w x wall_s: the energy the level added to the idle "
                                            "machine's (negative where the machine drew less than idle).")]
    j_per_output_token_above_idle: Annotated[float | None, Doc("joules_above_idle / output_tokens.")]


class _EnergyRequired(TypedDict):
    sources: Annotated[list[EnergySource], Doc("One entry per power source the sampler read: the GPUs (nvml, "
                                               "nvidia-smi, metalstat) and the CPU packages (rapl).")]


class Energy(_EnergyRequired, total=False):
    """A level's energy (bench.core.lenses.energy): an entry per power source the resource sampler read over the
    level's measured phase, or no entry and a note saying why."""

    note: Annotated[str, Doc("Why there is no entry: no power source on this machine.")]


class GaugeFigures(TypedDict):
    mean: float  # over the scrapes while the level ran, its two ends left out
    max: float
    samples: Annotated[int, Doc("The scrapes the mean and max are over.", minimum=1)]


class HistogramFigures(TypedDict):
    count: float  # the increase of its _count over the level
    mean_ms: float | None  # increase of _sum / increase of _count, in ms; None: no observation


class _ServerMetricsRequired(TypedDict):
    path: Annotated[str, Doc("The server's metrics endpoint.")]
    interval_s: Annotated[float, Doc("Seconds between scrapes while the level ran.", exclusiveMinimum=0)]
    includes_warmup: Annotated[bool, Doc("True: the scrapes bracket the level's warm-up requests too.")]
    sidecar: Annotated[str, Doc("The server's .server-metrics.jsonl (beside the result): every scrape's values.")]
    errors: Annotated[list[str], Doc("The server's failed scrapes, once per kind.")]


class ServerMetricsBlock(_ServerMetricsRequired, total=False):
    """A level as the server saw it: its Prometheus metrics scraped as the level started, while it ran and as it
    ended (bench.run.scrape), under cellbench's names (bench.setup.server_metrics)."""

    note: Annotated[str, Doc("Why there are no figures: no scrape as the level started or as it ended.")]
    scrapes: Annotated[int, Doc("Scrapes while the level ran, between the scrapes as it started and as it ended (those"
                                " two left out).", minimum=0)]
    counters: Annotated[dict[str, float], Doc("Each counter's increase over the level: generated_tokens, "
                                              "prompt_tokens, prefix_cache_hits, prefix_cache_queries.")]
    gauges: Annotated[dict[str, GaugeFigures], Doc("Each gauge's mean, max and samples over the scrapes while the "
                                                   "level ran (none for a level shorter than the scrape interval): "
                                                   "running, waiting, kv_cache_usage, prefix_cache_hit_rate.")]
    histograms: Annotated[dict[str, HistogramFigures], Doc("Each histogram's count and mean over the level, in ms: "
                                                           "ttft, itl, queue, e2e.")]
