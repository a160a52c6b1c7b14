"""How a level figure is declared: everything the suite knows of one block of a level, in one place.

A `LevelFigure` is a level block cellbench measures beside the metric table's distributions
(bench.core.metrics.table): a small record of numbers over the level (a share, a count, a rate).
One declaration says

- its type: a TypedDict whose fields carry their descriptions (`Annotated[float | None,
  Doc("...")]`); the result schema's entry for it is generated from that type
  (bench.core.schema.types, written by `python -m bench.core.schema.generate`);
- how it is measured: `measure(run)` over the level's `LevelRun` (what the client saw),
  `watch(seen)` over what the server's watch sampled while the level ran (`Sampled`: the server's
  memory and the GPUs, once a second; bench.run.scrape.watch calls it once the server has
  stopped), or `derive(level, prices)` from the finished level's other blocks and the run's
  `Prices`, as the result is written; None where the level has nothing to say (then the level
  has no such key);
- how rounds pool it (`pool`: the combined level's block from the rounds' blocks; `by_field`
  pools each field with its own rule: median, total, worst, ...; `median_of_rounds` gives each
  field the rounds' median and its 95% interval across them, in the block's `ci95`);
- how the reports show it: `rows`, each one field of the block, a row of REPORT.md's level table,
  a column of the HTML review's level table and rows of comparison.csv;
- what each peer tool calls each row (`peers`: the crosswalk's entries, bench.core.crosswalk);
- its definition for readers (`description`: the schema's and docs/metrics.md's, generated).

Each module of bench/core/figures/ declares one, as `FIGURE`; nothing else names it. Adding a
figure is that module, the regenerated schema file and the regenerated docs/metrics.md
(docs/metrics.md "Adding a level figure").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from bench.base.doc import Doc as Doc
from bench.core.crosswalk.entry import TOOLS, PeerMetric
from bench.core.level_run import LevelRun
from bench.core.metrics.stats.intervals import rounds_interval
from bench.host.samples import GpuSample, MemorySample

Block = TypeVar("Block", bound=Mapping[str, Any])
FieldRule = Callable[[list[Any]], Any]
"""Pools one field's values, one per round that measured the figure, into the combined level's."""


def median(values: list[Any]) -> float | None:
    """The median of the rounds' known values; None when no round knew it."""
    known = [v for v in values if v is not None]
    return float(statistics.median(known)) if known else None


def median_count(values: list[Any]) -> int | None:
    """The median of counts (bytes, tokens) as a count: of an even number of rounds, the middle two's
    mean rounded; None when no round knew it."""
    found = median(values)
    return None if found is None else round(found)


def total(values: list[Any]) -> Any:
    """The sum; None when a round did not know it (an unknown count is not a zero)."""
    return None if any(v is None for v in values) else sum(values)


def highest(values: list[Any]) -> Any:
    """The largest known value; None when no round knew it."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def lowest(values: list[Any]) -> Any:
    """The smallest known value; None when no round knew it."""
    known = [v for v in values if v is not None]
    return min(known) if known else None


def by_field(rules: Mapping[str, FieldRule]) -> Callable[[list[Any]], Any]:
    """A block's pooling from a rule per field: the combined block holds each field its rule gives."""
    def pool(blocks: list[Any]) -> Any:
        return {name: rule([b[name] for b in blocks if name in b]) for name, rule in rules.items()}
    return pool


def median_of_rounds(fields: Sequence[str], others: Mapping[str, FieldRule], *,
                     rule: FieldRule = median) -> Callable[[list[Any]], Any]:
    """A block's pooling where each of `fields` is a figure to judge: the rounds' median (by `rule`:
    `median_count` for counts), and in the block's `ci95` its 95% interval across the rounds
    (bench.core.metrics.stats.intervals.rounds_interval: a field some round lacks, or that is not
    positive, gets none); `others` pool the rest."""
    def pool(blocks: list[Any]) -> Any:
        combined = by_field({**dict.fromkeys(fields, rule), **others})(blocks)
        intervals = {name: found for name in fields
                     if (found := rounds_interval([b.get(name) for b in blocks])) is not None}
        return {**combined, "ci95": intervals} if intervals else combined
    return pool


@dataclass(frozen=True)
class Sampled:
    """What the server's watch sampled over one level's measured phase (wall times `start` to `end`):
    the resource sampler's readings (bench.host.samples) taken then, or, where the phase was shorter
    than the sampling interval and none fell inside it, the first one after it (`inside` False)."""

    start: float
    end: float
    interval_s: float
    memory: Sequence[MemorySample]
    gpu: Sequence[GpuSample]
    inside: bool = True
    reserved_bytes: int | None = None  # what the server stated it set aside as it started (Reservation)

    @classmethod
    def over(cls, start: float, end: float, interval_s: float, memory: Sequence[MemorySample],
             gpu: Sequence[GpuSample], reserved_bytes: int | None = None) -> Sampled:
        mem = [m for m in memory if start <= m.wall <= end]
        inside = bool(mem)
        if not inside:
            mem = [m for m in memory if m.wall > end][:1]
        walls = {m.wall for m in mem}
        return cls(start, end, interval_s, mem, [g for g in gpu if g.wall in walls], inside, reserved_bytes)


@dataclass(frozen=True)
class Row:
    """One field of a figure's block as the reports show it: "<label> (<unit>)"."""

    field: str  # the block's field
    label: str
    unit: str  # of the value the result holds (comparison.csv's unit): "requests/s", "share"
    digits: int = 1
    scale: float = 1.0  # REPORT.md and the review show value x scale (a share as a percentage: 100)
    shown_unit: str | None = None  # their unit when scaled ("%"); None: `unit`
    # judged by comparisons (`cellbench compare`, the journal, noise floors) as a figure whose
    # "higher" or "lower" value is the better one (bench.core.metrics.stats.change); None: not judged
    better: Literal["higher", "lower"] | None = None

    def title(self) -> str:
        return f"{self.label} ({self.shown_unit or self.unit})"


@dataclass(frozen=True)
class Prices:
    """What a derived figure is given beside the level: the run's prices (--price-kwh, --price-hour),
    None where not given."""

    kwh: float | None = None  # money per kWh of electricity
    hour: float | None = None  # money per hour of the machine

    @property
    def given(self) -> bool:
        return self.kwh is not None or self.hour is not None


@dataclass(frozen=True)
class LevelFigure(Generic[Block]):
    key: str  # the level's key
    block: type[Block]  # a TypedDict, its fields `Annotated[..., Doc(...)]`
    description: str  # the schema's description of the level's key, and docs/metrics.md's definition
    pool: Callable[[list[Block]], Block]
    rows: tuple[Row, ...]
    measure: Callable[[LevelRun], Block | None] | None = None  # from the client's records, or
    watch: Callable[[Sampled], Block | None] | None = None  # from the server's watch, or
    # from the finished level's other blocks and the run's prices, as the result is written (after
    # its rounds are pooled): one of the three
    derive: Callable[[Mapping[str, Any], Prices], Block | None] | None = None
    # per tool of the crosswalk (bench.core.crosswalk.TOOLS), an entry per row, in the rows' order
    # (`none(...)` where the tool has no equivalent)
    peers: Mapping[str, Sequence[PeerMetric]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if [self.measure, self.watch, self.derive].count(None) != 2:
            raise ValueError(f"level figure {self.key}: give `measure`, `watch` or `derive`, one of them")
        fields = set(vars(self.block)["__annotations__"])
        if unknown := [row.field for row in self.rows if row.field not in fields]:
            raise ValueError(f"level figure {self.key}: rows name fields its block lacks: {unknown}")
        if self.rows and set(self.peers) != set(TOOLS):
            raise ValueError(f"level figure {self.key}: say what each of {', '.join(TOOLS)} calls its rows (peers)")
        for tool, entries in self.peers.items():
            if [e.key for e in entries] != [self.path(row) for row in self.rows]:
                raise ValueError(f"level figure {self.key}: {tool}'s entries are not one per row, in order")

    def path(self, row: Row) -> str:
        """The row's dotted key in a level ("prefix_cache.hit_share"), as the crosswalk and CSV name it."""
        return f"{self.key}.{row.field}"
