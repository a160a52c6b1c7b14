"""The report's figures, drawn from comparison.json and the per-request sidecars.

Concurrency levels and open-loop rate levels are never drawn on one axis: throughput against
concurrency is `throughput.png`, against request rate `throughput_rate.png` (a rate of inf, all at
once, has no place on that axis and is in the report's tables only).

Like with like: a figure of frameworks whose runs' request settings differ marks their labels
and names the settings under it (bench.reports.drawing).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from matplotlib.cbook import boxplot_stats
from matplotlib.figure import Figure

from bench.core import metrics
from bench.core.level_run import LevelKey, key_label, level_key, rate_text
from bench.core.records import RequestRecord
from bench.core.result.model import Level, Result, RunConfig, Stats
from bench.reports.comparison import Comparison, standings
from bench.reports.drawing import CONCURRENCY_AXIS, RATE_AXIS, figure, log2_axis, marked, note_unlike, png, save, unlike
from bench.reports.lenses import FRONTIER_PNG, write_frontier
from bench.reports.lenses.latency import LATENCY_FRONTIER_PNG, write_latency_frontier
from bench.reports.standing import shown

PLOTS_DIR = "plots"
THROUGHPUT_PNG = "throughput.png"
THROUGHPUT_RATE_PNG = "throughput_rate.png"
_RECORD_FIELDS = {f.name for f in dataclasses.fields(RequestRecord)} - {"error"}


def latency_png(level: LevelKey | int) -> str:
    """latency_c8.png, or latency_r4.png (latency_r4_b2_m8.png with burstiness 2 and a cap of 8)."""
    key = ("concurrency", level) if isinstance(level, int) else level
    if key[0] == "concurrency":
        return f"latency_c{key[1]}.png"
    cap = f"_m{key[3]}" if key[3] else ""
    if key[0] == "trace":  # latency_trace_mooncake-small_1a2b3c4d.png: the name, and the content it had
        return f"latency_trace_{_file_safe(Path(key[1]).stem)}_{key[2][:8]}{cap}.png"
    ramp = f"_{_file_safe(key[4])}" if len(key) > 4 else ""
    return f"latency_r{rate_text(key[1])}{'_b' + format(key[2], 'g') if key[2] != 1.0 else ''}{cap}{ramp}.png"


def _file_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")

def _run_configs(comparison: Comparison, frameworks: Iterable[str]) -> dict[str, RunConfig]:
    return {fw: comparison["results"][fw]["run_config"] for fw in frameworks}


def _title(comparison: Comparison, what: str) -> str:
    return f"{what} — {comparison['model']} ({comparison['split']}) on {comparison['machine']}"


def _levels(result: Result) -> dict[LevelKey, Level]:
    return {level_key(lv): lv for lv in result["levels"]}


def all_levels(comparison: Comparison) -> list[LevelKey]:
    """The union of the levels of every chosen result: concurrency levels ascending, then rate levels."""
    return sorted({c for r in comparison["results"].values() for c in _levels(r)})


def throughput_figure(series: Mapping[str, Mapping[float, float | None]], title: str,
                      xlabel: str = CONCURRENCY_AXIS) -> Figure:
    """Output tok/s against concurrency (or, with `RATE_AXIS`, request rate), one line per series
    (label -> level -> tok/s); the caller never mixes the two kinds of level in one figure.

    A level with no throughput (no successful request) is drawn as an x on zero, not joined to
    the line: it is a failure, not a throughput."""
    fig = figure(7, 4.5)
    ax = fig.add_subplot()
    for label, by_level in series.items():
        good = sorted((c, tps) for c, tps in by_level.items() if tps is not None)
        (line,) = ax.plot([c for c, _ in good], [tps for _, tps in good], marker="o", label=label)
        failed = sorted(c for c, tps in by_level.items() if tps is None)
        if failed:
            ax.plot(failed, [0] * len(failed), "x", color=line.get_color(), markersize=9)
    log2_axis(ax, sorted({c for by_level in series.values() for c in by_level}), xlabel)
    ax.set_ylabel("output throughput (tok/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(loc="best")
    ax.set_title(title, fontsize=10)
    return fig


def throughput_png(series: Mapping[str, Mapping[float, float | None]], title: str,
                   xlabel: str = CONCURRENCY_AXIS) -> bytes:
    """`throughput_figure` as PNG bytes (the HTML report's summary)."""
    return png(throughput_figure(series, title, xlabel))


def _legend(comparison: Comparison, framework: str) -> str:
    """The framework's name, `imported (SiliconBench)` for a result another tool measured, and its
    result's other marks where it does not stand ok: `vllm (degraded)` (bench.reports.standing)."""
    return shown.column(framework, comparison["results"][framework], standings(comparison)[framework])


def _tps_point(lv: Level) -> float | None:
    return lv["output_throughput_tps"] or 0.0 if lv["successful"] else None


def throughput_vs_concurrency(comparison: Comparison, split_dir: Path) -> Path | None:
    """Output tok/s against concurrency, one line per framework (but one with open-loop levels
    only); writes plots/throughput.png. None when only open-loop levels were measured."""
    keys = {fw: _levels(comparison["results"][fw]) for fw in comparison["frameworks"]}
    drawn = [fw for fw, by in keys.items() if not by or any(key[0] == "concurrency" for key in by)]
    found = unlike(_run_configs(comparison, drawn))
    series = {marked(fw, found, _legend(comparison, fw)): {
        key[1]: _tps_point(lv) for key, lv in keys[fw].items() if key[0] == "concurrency"} for fw in drawn}
    if not any(series.values()) and any(key[0] != "concurrency" for by in keys.values() for key in by):
        return None
    fig = throughput_figure(series, _title(comparison, "Output throughput"))
    note_unlike(fig, found)
    return save(fig, Path(split_dir) / PLOTS_DIR / THROUGHPUT_PNG)


def throughput_vs_rate(comparison: Comparison, split_dir: Path) -> Path | None:
    """Output tok/s against the open-loop request rate, one line per framework and schedule
    (burstiness, cap); writes plots/throughput_rate.png. None without a finite rate level."""
    rated = {fw: {key: lv for key, lv in _levels(comparison["results"][fw]).items()
                  if key[0] == "rate" and key[1] != float("inf")} for fw in comparison["frameworks"]}
    found = unlike(_run_configs(comparison, [fw for fw, by in rated.items() if by]))
    series: dict[str, dict[float, float | None]] = {}
    for fw, by in rated.items():
        for key, lv in by.items():
            shape = key_label(key, full=True).partition(", ")[2]
            label = _legend(comparison, fw) + (f" ({shape})" if shape else "")
            series.setdefault(marked(fw, found, label), {})[key[1]] = _tps_point(lv)
    if not series:
        return None
    fig = throughput_figure(series, _title(comparison, "Output throughput against request rate"), RATE_AXIS)
    note_unlike(fig, found)
    return save(fig, Path(split_dir) / PLOTS_DIR / THROUGHPUT_RATE_PNG)


def _measured_records(sidecar: Path, level: LevelKey) -> Iterator[RequestRecord]:
    """Successful measured (not warm-up) requests of one level, as RequestRecords, so the
    bench.core.metrics formulas apply unchanged."""
    with sidecar.open() as lines:
        for line in lines:
            raw = json.loads(line)
            if not raw.get("warmup") and raw.get("error") is None and level_key(raw) == level:
                yield RequestRecord(**{k: v for k, v in raw.items() if k in _RECORD_FIELDS})


def request_samples(split_dir: Path, result: Result, level: LevelKey | int) -> dict[str, list[float]] | None:
    """TTFT and TPOT in ms of each successful measured request of `level`, from the result's
    per-request sidecar (bench.core.metrics formulas), or None when there is no usable sidecar
    (an imported result has none)."""
    sidecar = split_dir / result.get("requests_file", "")
    if "requests_file" not in result or not sidecar.is_file():
        return None
    key = ("concurrency", level) if isinstance(level, int) else level
    try:
        records = list(_measured_records(sidecar, key))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    per_metric: dict[str, Callable[[RequestRecord], float | None]] = {"ttft_ms": metrics.ttft, "tpot_ms": metrics.tpot}
    out = {key: [v * 1000 for r in records if (v := fn(r)) is not None] for key, fn in per_metric.items()}
    return out if any(out.values()) else None


def _summary_box(block: Stats, label: str) -> dict[str, Any] | None:
    """A box drawn from a stats block when the requests are gone: median line at p50, box from
    p50 to p90, whiskers from min to p99, the max as a point. The quartiles are not recorded, so
    the label marks it as a summary rather than pretending to be a box plot. None without those
    values (an imported result's nearest-rank percentiles are not drawn beside ours)."""
    if not block.get("n") or any(block.get(k) is None for k in ("p50", "p90", "min", "p99", "max")):
        return None
    return {"label": label, "med": block["p50"], "q1": block["p50"], "q3": block["p90"],
            "whislo": block["min"], "whishi": block["p99"], "fliers": [block["max"]]}


def _box(fw: str, samples: dict[str, list[float]] | None, block: Stats | None, key: str) -> dict[str, Any] | None:
    if samples is not None and samples[key]:
        return boxplot_stats(samples[key], labels=[fw])[0]
    return _summary_box(block, f"{fw}*") if block else None


def latency_distributions(comparison: Comparison, level: LevelKey | int, split_dir: Path) -> Path:
    """TTFT and TPOT distributions per framework at one level; writes plots/latency_c<level>.png
    (`latency_png`).

    Box plots of the successful measured requests from `<stem>.requests.jsonl` when it is there;
    otherwise a summary box from the result's stats blocks (x label ends in "*")."""
    split_dir = Path(split_dir)
    level = ("concurrency", level) if isinstance(level, int) else level
    present = {fw: (request_samples(split_dir, result, level), _levels(result)[level])
               for fw in comparison["frameworks"] if level in _levels(result := comparison["results"][fw])}
    found = unlike(_run_configs(comparison, present))  # the frameworks at this level only
    fig = figure(9, 4.5)
    for ax, key, name in zip(fig.subplots(1, 2), ("ttft_ms", "tpot_ms"), ("TTFT (ms)", "TPOT (ms)"), strict=True):
        boxes = [b for fw, (samples, lv) in present.items()  # the ok ones first, as comparison.json lists them
                 if (b := _box(marked(fw, found, _legend(comparison, fw)), samples,
                               lv["ttft_ms"] if key == "ttft_ms" else lv.get("tpot_ms"), key))]
        if boxes:
            ax.bxp(boxes, showfliers=True)
        else:
            ax.text(0.5, 0.5, "no successful requests", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel(name)
        summarized = any(str(b["label"]).endswith("*") for b in boxes)
        ax.set_xlabel("framework" + (" (* = no sidecar: p50-p90 box)" if summarized else ""))
        ax.grid(True, axis="y", alpha=0.3)
    at = {"concurrency": f"concurrency {level[1]}", "trace": key_label(level, full=True)}.get(
        level[0], f"request rate {key_label(level, full=True)}")
    fig.suptitle(_title(comparison, f"Latency at {at}"), fontsize=10)
    note_unlike(fig, found)
    return save(fig, split_dir / PLOTS_DIR / latency_png(level))


RESOURCES_PNG = "resources.png"


def _resource_samples(split_dir: Path, result: Result) -> list[dict[str, Any]]:
    """The result's resource sidecars (one per server), in time order; [] when it has none."""
    samples: list[dict[str, Any]] = []
    for server in result.get("servers", []):
        name = server["resources"]["path"] if "resources" in server else None
        path = split_dir / name if name else None
        if path is None or not path.is_file():
            continue
        for line in path.read_text().splitlines():
            try:
                samples.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a killed run
    return sorted(samples, key=lambda s: s.get("wall", 0.0))


def resources_over_time(comparison: Comparison, split_dir: Path) -> Path | None:
    """Server tree RSS and CPU over the cell's time, one line per framework; plots/resources.png.

    None when no chosen result has a resource sidecar (results written before the sampler)."""
    series = {fw: _resource_samples(split_dir, comparison["results"][fw]) for fw in comparison["frameworks"]}
    series = {fw: s for fw, s in series.items() if s}
    if not series:
        return None
    found = unlike(_run_configs(comparison, series))
    fig = figure(7, 5.5)
    rss_ax, cpu_ax = fig.subplots(2, 1, sharex=True)
    for fw, samples in series.items():
        t0 = samples[0]["wall"]
        t = [s["wall"] - t0 for s in samples]
        name = marked(fw, found, _legend(comparison, fw))
        rss_ax.plot(t, [(s.get("tree") or {}).get("rss_bytes", 0) / 2**30 for s in samples], label=name)
        cpu_ax.plot(t, [(s.get("tree") or {}).get("cpu_percent", 0) for s in samples], label=name)
    rss_ax.set_ylabel("server RSS (GiB)")
    cpu_ax.set_ylabel("server CPU (%)")
    cpu_ax.set_xlabel("seconds since the cell's first server started")
    for ax in (rss_ax, cpu_ax):
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    rss_ax.legend(loc="best")
    rss_ax.set_title(_title(comparison, "Server resources"), fontsize=10)
    note_unlike(fig, found)
    return save(fig, Path(split_dir) / PLOTS_DIR / RESOURCES_PNG)


def write_plots(comparison: Comparison, split_dir: Path) -> list[Path]:
    """Every figure REPORT.md embeds, under `<split_dir>/plots/` (none when nothing is compared).

    Figures of ours that this comparison no longer has (a level dropped, every result ignored)
    are removed, so a stale image is never published beside a new report."""
    split_dir = Path(split_dir)
    written: list[Path] = []
    if comparison["frameworks"]:
        written += [p for p in (throughput_vs_concurrency(comparison, split_dir),
                                throughput_vs_rate(comparison, split_dir)) if p is not None]
        written += [latency_distributions(comparison, level, split_dir) for level in all_levels(comparison)]
        resources = resources_over_time(comparison, split_dir)
        written += [resources] if resources else []
        memory = write_frontier(comparison, split_dir / PLOTS_DIR)
        latency = write_latency_frontier(comparison, split_dir / PLOTS_DIR)
        written += [p for p in (memory, latency) if p]
    for old in (split_dir / PLOTS_DIR).glob("*.png"):
        ours = old.name in (THROUGHPUT_PNG, THROUGHPUT_RATE_PNG, RESOURCES_PNG, FRONTIER_PNG, LATENCY_FRONTIER_PNG) or \
            old.name.startswith("latency_")
        if ours and old not in written:
            old.unlink()
    return written
