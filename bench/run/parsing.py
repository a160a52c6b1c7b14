"""The cell options' texts, parsed: --request-rate and its companions, --duration and --slo into a
`LoadPlan` (`load_plan`), --concurrency's levels, --hang-minutes and --cell-budget per split. Each
raises ValueError in the option's own words; the pytest layer makes it a usage error."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from bench.base.defaults import SPLITS
from bench.core.open_loop import parse_slos
from bench.run.config import LoadPlan, SessionPlan
from bench.run.levels.sweep import SweepPlan
from bench.setup.traces import load_trace
from bench.setup.traces.weka import WekaTrace, is_weka, load_weka

RAMP_SHAPES = ("linear", "exponential")
LOAD_OPTIONS = ("request_rate", "concurrency", "burstiness", "max_concurrency", "arrival_seed", "slo",
                "sweep_levels", "sweep_tolerance", "rounds", "trace_file", "ramp_up", "ramp_up_start",
                "duration", "stop_over_saturated")  # load_plan's arguments, as the options' dests name them


def load_plan(request_rate: str | None, *, concurrency: str | None = None, burstiness: float | None = None,
              max_concurrency: int | None = None, arrival_seed: int | None = None, slo: str | None = None,
              sweep_levels: int | None = None, sweep_tolerance: float | None = None,
              rounds: int | None = None, trace_file: str | None = None, ramp_up: str | None = None,
              ramp_up_start: float | None = None, duration: str | None = None,
              stop_over_saturated: bool = False) -> LoadPlan | None:
    """The options of open-loop levels (--request-rate R[,R2..] | sweep[:START], --trace-file,
    --burstiness, --max-concurrency, --arrival-seed, --sweep-levels, --sweep-tolerance, --ramp-up,
    --ramp-up-start, --stop-over-saturated), --duration and --slo as a LoadPlan; None when none is
    given (closed-loop levels, as always). ValueError says what is wrong, and --rounds with a sweep
    is wrong: a sweep chooses each rate from the level before, so a second round would not repeat
    the first one's levels."""
    plan = _plan(request_rate, concurrency=concurrency, burstiness=burstiness, max_concurrency=max_concurrency,
                 arrival_seed=arrival_seed, slo=slo, sweep_levels=sweep_levels, sweep_tolerance=sweep_tolerance,
                 rounds=rounds, trace_file=trace_file, ramp_up=ramp_up, ramp_up_start=ramp_up_start,
                 duration=duration)
    if not stop_over_saturated:
        return plan
    if plan is None or not plan.open_loop:
        raise ValueError("--stop-over-saturated ends an open-loop level whose queue grows without bound, and "
                         "closed-loop levels have no queue to grow (each slot waits for its last request): give "
                         "--request-rate R or --trace-file")
    return replace(plan, stop_over_saturated=True)


def _plan(request_rate: str | None, *, concurrency: str | None, burstiness: float | None,
          max_concurrency: int | None, arrival_seed: int | None, slo: str | None, sweep_levels: int | None,
          sweep_tolerance: float | None, rounds: int | None, trace_file: str | None, ramp_up: str | None,
          ramp_up_start: float | None, duration: str | None) -> LoadPlan | None:
    duration_s = _duration(duration)
    if trace_file is not None:
        return _trace_plan(trace_file, request_rate, concurrency, burstiness, max_concurrency, arrival_seed, slo,
                           sweep_levels, sweep_tolerance, ramp_up, ramp_up_start, duration_s)
    if ramp_up_start is not None and ramp_up is None:
        raise ValueError("--ramp-up-start is where --ramp-up starts: give --ramp-up linear|exponential too")
    if ramp_up is not None and request_rate is None:
        raise ValueError(f"--ramp-up {ramp_up} raises an arrival rate, and closed-loop levels have none (each slot "
                         "sends when its last request ends): give --request-rate R")
    plan = _rate_plan(request_rate, concurrency, burstiness, max_concurrency, arrival_seed, slo, sweep_levels,
                      sweep_tolerance, rounds)
    if ramp_up is not None:
        plan = replace(_checked_ramp(plan, ramp_up, ramp_up_start), ramp_up=ramp_up, ramp_up_start=ramp_up_start)
    if duration_s is not None:
        plan = replace(plan or LoadPlan(), duration_s=duration_s)
    return plan


def _duration(text: str | None) -> float | None:
    if text is None:
        return None
    takes = f"--duration takes a time more than 0: 90, 90s, 5m or 1.5h, got {text!r}"
    try:
        seconds = _duration_s(text)
    except ValueError:
        raise ValueError(takes) from None
    if not 0 < seconds < float("inf"):
        raise ValueError(takes)
    return seconds


def _checked_ramp(plan: LoadPlan | None, shape: str, start: float | None) -> LoadPlan:
    assert plan is not None, "--ramp-up comes with --request-rate"
    if shape not in RAMP_SHAPES:
        raise ValueError(f"--ramp-up takes {' or '.join(RAMP_SHAPES)}, got {shape!r}")
    if plan.sweep is not None:
        raise ValueError("--ramp-up cannot shape --request-rate sweep's levels: the sweep judges each rate's SLOs at "
                         "that rate, and a ramp spends the level below it")
    if any(r == float("inf") for r in plan.rates):
        raise ValueError("--ramp-up cannot rise to --request-rate inf: every request is sent at once")
    if start is not None and not start > 0:
        raise ValueError(f"--ramp-up-start takes a rate more than 0, got {start:g}")
    if start is not None and any(start >= r for r in plan.rates):
        raise ValueError(f"--ramp-up-start {start:g} is not below every --request-rate "
                         f"({', '.join(f'{r:g}' for r in plan.rates)}): a ramp rises to the level's rate")
    return plan


def _trace_plan(trace_file: str, request_rate: str | None, concurrency: str | None, burstiness: float | None,
                max_concurrency: int | None, arrival_seed: int | None, slo: str | None, sweep_levels: int | None,
                sweep_tolerance: float | None, ramp_up: str | None, ramp_up_start: float | None,
                duration_s: float | None) -> LoadPlan:
    """--trace-file: one open-loop level on the file's own arrival times."""
    clashing = [name for name, value in (("--request-rate", request_rate), ("--concurrency", concurrency),
                                         ("--burstiness", burstiness), ("--sweep-levels", sweep_levels),
                                         ("--sweep-tolerance", sweep_tolerance)) if value is not None]
    if clashing:
        raise ValueError(f"--trace-file's level sends on the file's own arrival times: {', '.join(clashing)} "
                         "would set another schedule; give one of them")
    if ramp_up is not None or ramp_up_start is not None:
        raise ValueError("--ramp-up cannot shape --trace-file's level: its arrival times are the file's own, and a "
                         "ramp would replay another load than the trace recorded")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"--max-concurrency takes a count of 1 or more, got {max_concurrency}")
    trace = load_trace(Path(trace_file))  # TraceError is a ValueError naming the file and the line
    return LoadPlan(max_concurrency=max_concurrency, seed=LoadPlan.seed if arrival_seed is None else arrival_seed,
                    slos=parse_slos(slo) if slo is not None else (), trace=trace, duration_s=duration_s)


def _rate_plan(rates: str | None, concurrency: str | None, burstiness: float | None, max_concurrency: int | None,
               seed: int | None, slo: str | None, sweep_levels: int | None, sweep_tolerance: float | None,
               rounds: int | None) -> LoadPlan | None:
    if rates is not None and concurrency is not None:
        raise ValueError("--concurrency and --request-rate name two kinds of level: give one")
    if rates is None:
        searched = concurrency is not None and _is_sweep(concurrency)
        named = [name for name, value in (("--burstiness", burstiness), ("--max-concurrency", max_concurrency),
                                          ("--arrival-seed", seed)) if value is not None]
        if not searched:
            named += [name for name, value in (("--sweep-levels", sweep_levels),
                                               ("--sweep-tolerance", sweep_tolerance)) if value is not None]
        if named:
            raise ValueError(f"{', '.join(named)} shape open-loop levels: give --request-rate or --trace-file too")
        if searched:
            assert concurrency is not None
            return _concurrency_sweep(concurrency, slo, sweep_levels, sweep_tolerance, rounds)
        return None if slo is None else LoadPlan(slos=parse_slos(slo))
    if burstiness is not None and not burstiness > 0:
        raise ValueError(f"--burstiness takes a gamma shape more than 0 (1: Poisson), got {burstiness:g}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"--max-concurrency takes a count of 1 or more, got {max_concurrency}")
    slos = parse_slos(slo) if slo is not None else ()
    plan = LoadPlan(burstiness=LoadPlan.burstiness if burstiness is None else burstiness,
                    max_concurrency=max_concurrency, seed=LoadPlan.seed if seed is None else seed, slos=slos)
    text = rates.strip().lower()
    if _is_sweep(text):
        if not slos:
            raise ValueError("--request-rate sweep looks for the highest rate meeting an SLO: give --slo too")
        if rounds is not None and rounds > 1:
            raise ValueError(f"--rounds {rounds} cannot repeat --request-rate sweep: a sweep chooses each rate from "
                             "the level before, so its rounds would not measure the same levels; give the rates "
                             "(--request-rate R1,R2,..) to repeat them")
        if text == "sweep:inf":
            raise ValueError("--request-rate sweep:START takes a rate more than 0, not inf")
        start = _rates(text.removeprefix("sweep").removeprefix(":") or f"{SweepPlan.start:g}")
        sweep = SweepPlan(start=start[0], tolerance=SweepPlan.tolerance if sweep_tolerance is None else sweep_tolerance,
                          max_levels=SweepPlan.max_levels if sweep_levels is None else sweep_levels)
        if len(start) != 1 or not sweep.tolerance > 0 or sweep.max_levels < 1:
            raise ValueError(f"--request-rate sweep[:START] takes one start rate, --sweep-tolerance more than 0 "
                             f"and --sweep-levels 1 or more, got {rates!r}")
        return replace(plan, sweep=sweep)
    if sweep_levels is not None or sweep_tolerance is not None:
        raise ValueError("--sweep-levels and --sweep-tolerance bound --request-rate sweep and --concurrency sweep")
    return replace(plan, rates=_rates(text))


def _is_sweep(text: str) -> bool:
    text = text.strip().lower()
    return text == "sweep" or text.startswith("sweep:")


def _concurrency_sweep(text: str, slo: str | None, sweep_levels: int | None, sweep_tolerance: float | None,
                       rounds: int | None) -> LoadPlan:
    """--concurrency sweep[:START]: closed-loop levels searched for the highest concurrency meeting --slo."""
    if slo is None:
        raise ValueError("--concurrency sweep looks for the highest concurrency meeting an SLO: give --slo too")
    if rounds is not None and rounds > 1:
        raise ValueError(f"--rounds {rounds} cannot repeat --concurrency sweep: a sweep chooses each level from the "
                         "one before, so its rounds would not measure the same levels; give the levels "
                         "(--concurrency 1,2,4,..) to repeat them")
    start = text.strip().lower().removeprefix("sweep").removeprefix(":") or "1"
    plan = SweepPlan(start=int(start) if start.isdigit() else 0,
                     tolerance=SweepPlan.tolerance if sweep_tolerance is None else sweep_tolerance,
                     max_levels=SweepPlan.max_levels if sweep_levels is None else sweep_levels)
    if plan.start < 1 or not plan.tolerance > 0 or plan.max_levels < 1:
        raise ValueError(f"--concurrency sweep[:START] takes a whole start of 1 or more, --sweep-tolerance more "
                         f"than 0 and --sweep-levels 1 or more, got {text!r}")
    return LoadPlan(slos=parse_slos(slo), concurrency_sweep=plan)


def _rates(text: str) -> tuple[float, ...]:
    """`4,8.5,inf` -> (4.0, 8.5, inf); ValueError unless every rate is more than 0."""
    takes = f"--request-rate takes comma-separated requests/s (more than 0, or inf), or sweep[:START], got {text!r}"
    try:
        rates = tuple(float(part) for part in comma_list(text))
    except ValueError:
        raise ValueError(takes) from None
    if not all(r > 0 for r in rates):
        raise ValueError(takes)
    return rates


def comma_list(text: str) -> list[str]:
    """`1,8,16` -> ["1", "8", "16"]; ValueError for an empty list or element (`1,,4`, `1,4,`): a
    typo there would otherwise silently drop a level."""
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise ValueError(f"an empty element in {text!r}")
    return parts


def concurrency_levels(text: str) -> tuple[int, ...]:
    """--concurrency `1,8,16` -> (1, 8, 16); ValueError says what it takes."""
    try:
        levels = tuple(int(part) for part in comma_list(text))
    except ValueError:
        raise ValueError(f"--concurrency takes comma-separated integers, got {text!r}") from None
    if min(levels) < 1:
        raise ValueError(f"--concurrency levels must be >= 1, got {text!r}")
    return levels


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _split_pairs(text: str) -> dict[str, str]:
    """`chat=30,agent=45` -> {"chat": "30", "agent": "45"}; ValueError for a malformed pair."""
    pairs = dict(part.split("=", 1) for part in comma_list(text))
    return {split.strip(): value.strip() for split, value in pairs.items()}


def hang_seconds(text: str) -> dict[str, float]:
    """--hang-minutes `chat=30,agent=45` (minutes; fractions allowed) -> seconds per split; 0 turns
    the watchdog off. ValueError says what it takes."""
    try:
        minutes = {split: float(value) for split, value in _split_pairs(text).items()}
    except ValueError:
        raise ValueError(f"--hang-minutes takes split=minutes pairs such as chat=30,agent=45, got {text!r}") from None
    if set(minutes) - set(SPLITS) or any(m < 0 for m in minutes.values()):
        raise ValueError(f"--hang-minutes: splits are {', '.join(SPLITS)} and minutes >= 0, got {text!r}")
    return {split: m * 60.0 for split, m in minutes.items()}


def _duration_s(text: str) -> float:
    """`90`, `90s`, `45m` or `1.5h` -> seconds; ValueError otherwise."""
    text = text.strip().lower()
    scale = _UNITS.get(text[-1:], None)
    return float(text[:-1] if scale else text) * (scale or 1.0)


def cell_budgets(text: str | None) -> dict[str, float]:
    """--cell-budget: `2700` (every split) or `chat=45m,agent=90m` -> seconds per split; ValueError
    says what it takes."""
    if text is None:
        return {}
    takes = f"--cell-budget takes a duration (2700, 45m) or split=duration pairs (chat=45m,agent=90m), got {text!r}"
    try:
        if "=" not in text:
            budgets = dict.fromkeys(SPLITS, _duration_s(text))
        else:
            budgets = {split: _duration_s(value) for split, value in _split_pairs(text).items()}
    except ValueError:
        raise ValueError(takes) from None
    if set(budgets) - set(SPLITS) or not budgets or any(not b > 0 for b in budgets.values()):
        raise ValueError(f"{takes}: splits are {', '.join(SPLITS)}, durations more than 0")
    return budgets


SESSION_OPTIONS = ("sessions", "session_turns", "think_time", "session_header", "sessions_file",
                   "session_rate")  # session_plan's, as dests


def session_plan(sessions: int | None, *, session_turns: int | None = None, think_time: str | None = None,
                 session_header: str | None = None, sessions_file: str | None = None,
                 session_rate: float | None = None, plan: LoadPlan | None = None) -> SessionPlan | None:
    """--sessions N, --sessions-file PATH, --session-turns K, --think-time S|exp:S, --session-rate R
    and --session-header NAME as a SessionPlan; None without --sessions or --sessions-file.
    ValueError says what is wrong (a Weka trace's TraceError names the file and the request)."""
    if sessions is None and sessions_file is None:
        named = [n for n, v in (("--session-turns", session_turns), ("--think-time", think_time),
                                ("--session-header", session_header), ("--session-rate", session_rate))
                 if v is not None]
        if named:
            raise ValueError(f"{', '.join(named)} shape session levels: give --sessions N or --sessions-file PATH too")
        return None
    if (sessions is not None and sessions < 1) or (session_turns is not None and session_turns < 1):
        raise ValueError(f"--sessions and --session-turns take a count of 1 or more, got {sessions}, {session_turns}")
    if session_rate is not None and not 0 < session_rate < float("inf"):
        raise ValueError(f"--session-rate takes sessions per second, more than 0, got {session_rate}")
    if plan is not None and plan.open_loop:
        raise ValueError("--sessions runs conversations on closed-loop levels (--concurrency: sessions at a time); "
                         "--request-rate and --trace-file send on a schedule of their own: give one")
    if plan is not None and plan.concurrency_sweep is not None:
        raise ValueError("--concurrency sweep searches single requests; give --concurrency levels with --sessions")
    path = None if sessions_file is None else Path(sessions_file)
    weka = () if path is None else _weka(path)
    text = (think_time or "0").strip().lower()
    drawn = text.startswith("exp:")
    try:
        think = _duration_s(text.removeprefix("exp:"))
    except ValueError:
        think = -1.0
    if not 0 <= think < float("inf"):
        raise ValueError(f"--think-time takes a time of 0 or more (2, 2s, 1.5m), or exp:MEAN for one drawn per turn, "
                         f"got {think_time!r}")
    if session_header is not None and not re.fullmatch(r"[A-Za-z0-9-]+", session_header):
        raise ValueError(f"--session-header takes a header name (letters, digits, -), got {session_header!r}")
    return SessionPlan(sessions, session_turns, None if weka and think_time is None else think, drawn,
                       session_header, path, weka, session_rate)


def _weka(path: Path) -> tuple[WekaTrace, ...]:
    """--sessions-file's Weka traces (a folder of them, or one file that is one); () for a
    conversation file, which the cell reads as --prompts reads one."""
    if not path.exists():
        raise ValueError(f"--sessions-file {path}: no such file or folder")
    if not path.is_dir():
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return ()  # JSONL, or not JSON: the prompt-file reader says what it is
        if not is_weka(doc):
            return ()
    return load_weka(path)
