"""The report's figures, drawn from comparison.json and the per-request sidecars.

Figures use matplotlib's object API on an Agg canvas: no pyplot global state and no display, so
a report can be rebuilt on a headless machine or inside a pytest session. Every figure has a fixed
size and dpi (no tight bounding box), so the same data gives images of the same pixel size.

Concurrency levels and open-loop rate levels are never drawn on one axis: throughput against
concurrency is `throughput.png`, against request rate `throughput_rate.png` (a rate of inf, all at
once, has no place on that axis and is in the report's tables only).

Like with like (docs/results.md): a figure that puts frameworks side by side whose runs' request
settings differ (bench.reports.comparison.setting_differences, over the frameworks that figure
draws) marks each framework's label with the mark of its settings (†, ‡, ...: the same mark, the
same settings) and names the differing settings under the figure (`unlike`, `note_unlike`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cbook import boxplot_stats
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from bench.base.files import atomic_write
from bench.core import metrics
from bench.core.level_run import LevelKey, key_label, level_key, rate_text, rate_value
from bench.core.records import RequestRecord
from bench.core.result_model import Level, Result, RunConfig, Stats
from bench.reports.comparison import Comparison, setting_differences, standings
from bench.reports.standing import shown

PLOTS_DIR = "plots"
DPI = 100
THROUGHPUT_PNG = "throughput.png"
THROUGHPUT_RATE_PNG = "throughput_rate.png"
_RECORD_FIELDS = {f.name for f in dataclasses.fields(RequestRecord)} - {"error"}
CONCURRENCY_AXIS = "concurrency (requests in flight)"
RATE_AXIS = "request rate (requests/s, open loop)"


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

MARKS = ("†", "‡", "§", "¶", "‖", "#")  # then [7], [8], ...; never "*", which marks a summary box


@dataclasses.dataclass(frozen=True)
class Unlike:
    """How the runs a figure puts side by side differ: each name's mark, and the figure's note."""

    marks: dict[str, str]  # name -> its mark; empty when every run had the same settings
    note: str | None


def unlike(run_configs: Mapping[str, RunConfig]) -> Unlike:
    """The marks and note of the runs `run_configs` names (a name -> its result's run_config):
    names with the same values of the differing settings share a mark."""
    differing = setting_differences(run_configs)
    if not differing:
        return Unlike({}, None)
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in sorted(run_configs):
        groups.setdefault(tuple(values[name] for values in differing.values()), []).append(name)
    marks: dict[str, str] = {}
    parts = []
    for i, (values, names) in enumerate(groups.items()):
        mark = MARKS[i] if i < len(MARKS) else f"[{i + 1}]"
        marks.update(dict.fromkeys(names, mark))
        parts.append(f"{mark} {', '.join(names)}: " + "; ".join(f"{k}={v}" for k, v in zip(differing, values,
                                                                                            strict=True)))
    return Unlike(marks, f"Not like with like: {', '.join(differing)} differ. " + " · ".join(parts))


def marked(name: str, found: Unlike, shown: str | None = None) -> str:
    """`shown` (default: the name) with the name's mark after it, if it has one."""
    mark = found.marks.get(name)
    return f"{shown or name} {mark}" if mark else shown or name


def note_unlike(fig: Figure, found: Unlike) -> None:
    """The note under the whole figure, wrapped to its width; nothing when the runs were alike."""
    if found.note:
        fig.supxlabel(textwrap.fill(found.note, int(fig.get_figwidth() * 17)), fontsize=7)


def _run_configs(comparison: Comparison, frameworks: Iterable[str]) -> dict[str, RunConfig]:
    return {fw: comparison["results"][fw].get("run_config") or cast(RunConfig, {}) for fw in frameworks}


def _figure(width_in: float, height_in: float) -> Figure:
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _save(fig: Figure, path: Path) -> Path:
    atomic_write(path, _png(fig))
    return path


def _title(comparison: Comparison, what: str) -> str:
    return f"{what} — {comparison['model']} ({comparison['split']}) on {comparison['machine']}"


def _levels(result: Result) -> dict[LevelKey, Level]:
    return {level_key(lv): lv for lv in result["levels"]}


def all_levels(comparison: Comparison) -> list[LevelKey]:
    """The union of the levels of every chosen result: concurrency levels ascending, then rate levels."""
    return sorted({c for r in comparison["results"].values() for c in _levels(r)})


def _log2_axis(ax: Any, levels: list[float], xlabel: str = CONCURRENCY_AXIS) -> None:
    """A log-2 axis that labels the levels actually measured, not powers of two."""
    ax.set_xscale("log", base=2)
    if levels:
        ax.set_xticks(levels, [f"{c:g}" for c in levels])
        ax.set_xlim(min(levels) / 1.4, max(levels) * 1.4)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)


def throughput_figure(series: Mapping[str, Mapping[float, float | None]], title: str,
                      xlabel: str = CONCURRENCY_AXIS) -> Figure:
    """Output tok/s against concurrency (or, with `RATE_AXIS`, request rate), one line per series
    (label -> level -> tok/s); the caller never mixes the two kinds of level in one figure.

    A level with no throughput (no successful request) is drawn as an x on zero, not joined to
    the line: it is a failure, not a throughput."""
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    for label, by_level in series.items():
        good = sorted((c, tps) for c, tps in by_level.items() if tps is not None)
        (line,) = ax.plot([c for c, _ in good], [tps for _, tps in good], marker="o", label=label)
        failed = sorted(c for c, tps in by_level.items() if tps is None)
        if failed:
            ax.plot(failed, [0] * len(failed), "x", color=line.get_color(), markersize=9)
    _log2_axis(ax, sorted({c for by_level in series.values() for c in by_level}), xlabel)
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
    return _png(throughput_figure(series, title, xlabel))


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
    return _save(fig, Path(split_dir) / PLOTS_DIR / THROUGHPUT_PNG)


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
    return _save(fig, Path(split_dir) / PLOTS_DIR / THROUGHPUT_RATE_PNG)


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
    fig = _figure(9, 4.5)
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
    return _save(fig, split_dir / PLOTS_DIR / latency_png(level))


def cell_plot(result: Result) -> bytes:
    """A small PNG of one cell: output tok/s and TTFT p50 per level (an HTML report extra), against
    concurrency or, for an open-loop cell, request rate (a rate of inf is left out)."""
    # A trace level stands at the rate its offsets offered, as its request_rate says.
    by_level = {key[1] if key[0] != "trace" else rate_value(lv["request_rate"]): lv
                for key, lv in _levels(result).items()}
    by_level = {x: lv for x, lv in by_level.items() if x != float("inf")}
    open_loop = any(key[0] != "concurrency" for key in _levels(result))
    levels = sorted(by_level)
    fig = _figure(6, 2.6)
    panels: tuple[tuple[str, Callable[[Level], float | None]], ...] = (
        ("output (tok/s)", lambda lv: lv["output_throughput_tps"]),
        ("TTFT p50 (ms)", lambda lv: lv["ttft_ms"]["p50"]),
    )
    for ax, (label, read) in zip(fig.subplots(1, 2), panels, strict=True):
        points = [(c, read(by_level[c])) for c in levels if by_level[c]["successful"]]
        ax.plot([c for c, _ in points], [v for _, v in points], marker="o")
        _log2_axis(ax, levels, RATE_AXIS if open_loop else CONCURRENCY_AXIS)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    machine = result["machine"]["slug"]
    fig.suptitle(f"{result['framework']['name']} — {result['model']['results_name']} ({result['split']}) on {machine}",
                 fontsize=9)
    return _png(fig)


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
    fig = _figure(7, 5.5)
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
    return _save(fig, Path(split_dir) / PLOTS_DIR / RESOURCES_PNG)


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
    for old in (split_dir / PLOTS_DIR).glob("*.png"):
        ours = old.name in (THROUGHPUT_PNG, THROUGHPUT_RATE_PNG, RESOURCES_PNG) or old.name.startswith("latency_")
        if ours and old not in written:
            old.unlink()
    return written
