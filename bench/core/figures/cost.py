"""What a level's output cost: money per million output tokens at the run's prices
(--price-kwh, --price-hour; docs/metrics.md, Cost per million output tokens).

Two parts, each where its price is given:

- energy: `price_kwh` x the level's energy in kWh / its output tokens x 10^6. The energy is the
  level's `energy` block summed over its sources (the GPUs' power, the CPU packages' counters):
  above idle where every source's idle power was read before the server started (what serving
  added to the idle machine's draw: `energy_basis` "above idle"), else their whole draw ("total").
  A machine with no power source has no energy figure, and this part is unknown, saying why.
- time: `price_hour` x the level's wall time in hours / its output tokens x 10^6: the machine's
  hourly cost (a cloud instance's price, or a bought machine's cost spread over its hours) for
  the time the level held it.

`per_mtok` is the sum of the parts whose price is given, and unknown (null) where one of them is.
Figures in the prices' own currency. Derived as the result is written, from the level as pooled
over its rounds; the result holds the prices beside the figures, so a reader can redo the sums.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict

from bench.core.crosswalk.entry import none
from bench.core.figures.declare import Doc, LevelFigure, Prices, Row, by_field, median

J_PER_KWH = 3.6e6
PER = 1e6  # a million output tokens


class Cost(TypedDict):
    """Money per million output tokens at the run's prices (bench.core.figures.cost)."""

    price_kwh: Annotated[float | None, Doc("--price-kwh: the electricity's price per kWh; null: not given.", minimum=0)]
    price_hour: Annotated[float | None, Doc("--price-hour: the machine's price per hour; null: not given.", minimum=0)]
    energy_basis: Annotated[Literal["above idle", "total"] | None, Doc(
        "Which energy the energy part is of: above idle (every source's idle power was read) or the sources' total "
        "draw; null without an energy figure.")]
    energy_per_mtok: Annotated[float | None, Doc("price_kwh x the level's energy (kWh) / its output tokens x 10^6; "
                                                 "null where no price or no energy figure.")]
    time_per_mtok: Annotated[float | None, Doc("price_hour x the level's wall time (h) / its output tokens x 10^6; "
                                               "null without the price.")]
    per_mtok: Annotated[float | None, Doc("The parts whose price is given, summed; null where one of them is "
                                          "unknown.")]
    unknown: Annotated[list[str], Doc("Why a part asked for is unknown, one line each; empty when none is.")]


def _energy_joules(level: Mapping[str, Any]) -> tuple[float | None, Literal["above idle", "total"] | None, str]:
    """The level's joules, their basis, and why there are none."""
    energy = level.get("energy")
    sources = (energy or {}).get("sources") or []
    if not sources:
        why = (energy or {}).get("note") or "the level has no energy figure"
        return None, None, f"energy: {why}"
    if all("joules_above_idle" in s for s in sources):
        return sum(s["joules_above_idle"] for s in sources), "above idle", ""
    return sum(s["joules"] for s in sources), "total", ""


def derive(level: Mapping[str, Any], prices: Prices) -> Cost | None:
    if not prices.given:
        return None
    tokens = level.get("output_tokens_total") or 0
    unknown: list[str] = []
    energy_part = time_part = None
    joules, basis, why = _energy_joules(level)
    if prices.kwh is not None:
        if joules is None:
            unknown.append(why)
        elif tokens:
            energy_part = prices.kwh * joules / J_PER_KWH / tokens * PER
    if prices.hour is not None and tokens:
        time_part = prices.hour * level["wall_time_s"] / 3600.0 / tokens * PER
    if not tokens:
        unknown.append("no output tokens: no cost per token")
    asked = [part for part, price in ((energy_part, prices.kwh), (time_part, prices.hour)) if price is not None]
    total = None if any(part is None for part in asked) else sum(p for p in asked if p is not None)
    return {"price_kwh": prices.kwh, "price_hour": prices.hour, "energy_basis": basis,
            "energy_per_mtok": energy_part, "time_per_mtok": time_part, "per_mtok": total, "unknown": unknown}


def _first(values: list[Any]) -> Any:
    return values[0] if values else None


FIGURE = LevelFigure(
    key="cost",
    block=Cost,
    description=("--price-kwh, --price-hour: the level's output cost per million tokens, from its energy (above idle "
                 "where known) and its wall time at those prices; absent without a price "
                 "(bench.core.figures.cost)."),
    derive=derive,
    pool=by_field({"price_kwh": _first, "price_hour": _first, "energy_basis": _first, "energy_per_mtok": median,
                   "time_per_mtok": median, "per_mtok": median, "unknown": lambda lists: sorted(set(sum(lists, [])))}),
    rows=(Row("per_mtok", "Cost per million output tokens", "currency", digits=2),
          Row("energy_per_mtok", "Of it, energy", "currency", digits=2),
          Row("time_per_mtok", "Of it, the machine's time", "currency", digits=2)),
    peers={tool: tuple(none(f"cost.{field}", "no cost figure" + more, source)
                       for field in ("per_mtok", "energy_per_mtok", "time_per_mtok"))
           for tool, more, source in (("vllm", "", "vllm/benchmarks/serve.py"),
                                      ("aiperf", "; its metrics are AIPerf's metric classes", "aiperf/metrics/types/"),
                                      ("guidellm", "", "guidellm/benchmark/schemas/metrics.py"),
                                      ("siliconbench", "", "scripts/benchmark.py"))},
)
