"""A session level's conversations (--sessions; bench.load.sessions), per turn and as units
(docs/metrics.md, Sessions).

Per turn index k (0 = a conversation's first turn): the turns sent, how many succeeded, their TTFT
and E2EL medians, their mean prompt tokens and the share of them the server said it took from its
prefix cache (usage cached_tokens, where sent): a server that reuses a conversation's prefix
answers turn k's growing prompt without computing the history again, and its TTFT stays flat
where one without such reuse climbs with k. As units: the sessions started, those completed
(every turn answered), and the completed ones' duration, first send to last answer, think times
included.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Annotated, TypedDict

from bench.core import metrics
from bench.core.crosswalk.entry import none
from bench.core.figures.declare import Doc, LevelFigure, Row, by_field, median, total
from bench.core.level_run import LevelRun


class TurnFigures(TypedDict):
    turn: Annotated[int, Doc("The turn's index in its conversation, from 0.", minimum=0)]
    sent: Annotated[int, Doc("Turns of that index sent.", minimum=0)]
    ok: Annotated[int, Doc("Of them, answered.", minimum=0)]
    ttft_p50_ms: Annotated[float | None, Doc("Their TTFT's median, ms.")]
    e2el_p50_ms: Annotated[float | None, Doc("Their end-to-end latency's median, ms.")]
    prompt_tokens_mean: Annotated[float | None, Doc("Their usage.prompt_tokens' mean: the history grows with the "
                                                    "turn.")]
    cached_share: Annotated[float | None, Doc("Σ usage cached_tokens / Σ prompt_tokens over those that told it; null "
                                              "where none did.", minimum=0, maximum=1)]


class SessionFigures(TypedDict):
    """A session level's conversations (bench.core.figures.sessions)."""

    sessions: Annotated[int, Doc("Conversations started.", minimum=0)]
    completed: Annotated[int, Doc("Of them, every turn answered.", minimum=0)]
    turns: Annotated[int, Doc("Turns sent.", minimum=0)]
    duration_p50_s: Annotated[float | None, Doc("The completed conversations' duration (first send to last answer, "
                                                "think times included), median.")]
    duration_max_s: Annotated[float | None, Doc("Their longest.")]
    by_turn: Annotated[list[TurnFigures], Doc("Per turn index, in order.")]


def _ms(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) * 1000.0 if known else None


def _turn(k: int, records: list) -> TurnFigures:
    ok = [r for r in records if r.ok]
    prompts = [r.usage_prompt_tokens for r in ok if r.usage_prompt_tokens is not None]
    told = [r for r in ok if r.usage_cached_tokens is not None and r.usage_prompt_tokens]
    asked = sum(r.usage_prompt_tokens for r in told)
    return {"turn": k, "sent": len(records), "ok": len(ok), "ttft_p50_ms": _ms([metrics.ttft(r) for r in ok]),
            "e2el_p50_ms": _ms([metrics.e2el(r) for r in ok]),
            "prompt_tokens_mean": statistics.fmean(prompts) if prompts else None,
            "cached_share": sum(r.usage_cached_tokens for r in told) / asked if asked else None}


def measure(run: LevelRun) -> SessionFigures | None:
    plan = run.config.sessions
    if plan is None:
        return None
    by_session: dict[int, list] = defaultdict(list)
    by_turn: dict[int, list] = defaultdict(list)
    for r in run.records:
        if r.session is not None and r.turn is not None:
            by_session[r.session].append(r)
            by_turn[r.turn].append(r)
    done = [rs for s, rs in by_session.items()
            if len(rs) == len(plan.conversations[s].turns) and all(r.ok for r in rs)]
    durations = [max(r.t_end or 0.0 for r in rs) - min(r.t_send or 0.0 for r in rs) for rs in done]
    return {"sessions": len(by_session), "completed": len(done), "turns": sum(len(rs) for rs in by_session.values()),
            "duration_p50_s": statistics.median(durations) if durations else None,
            "duration_max_s": max(durations) if durations else None,
            "by_turn": [_turn(k, by_turn[k]) for k in sorted(by_turn)]}


def _turns_pooled(lists: list[list[TurnFigures]]) -> list[TurnFigures]:
    """Across rounds, each turn index's medians and means of the rounds', counts summed."""
    found: dict[int, list[TurnFigures]] = defaultdict(list)
    for turns in lists:
        for t in turns:
            found[t["turn"]].append(t)
    return [{"turn": k, "sent": sum(t["sent"] for t in ts), "ok": sum(t["ok"] for t in ts),
             "ttft_p50_ms": median([t["ttft_p50_ms"] for t in ts]),
             "e2el_p50_ms": median([t["e2el_p50_ms"] for t in ts]),
             "prompt_tokens_mean": median([t["prompt_tokens_mean"] for t in ts]),
             "cached_share": median([t["cached_share"] for t in ts])} for k, ts in sorted(found.items())]


_SOURCES = (("vllm", "vllm/benchmarks/serve.py"), ("aiperf", "aiperf/metrics/types/"),
            ("guidellm", "guidellm/benchmark/schemas/metrics.py"), ("siliconbench", "scripts/benchmark.py"))
FIGURE = LevelFigure(
    key="sessions",
    block=SessionFigures,
    description=("--sessions: the level's conversations, each turn with the server's own answers: per turn index "
                 "its TTFT, E2EL, prompt tokens and prefix-cache share; the sessions completed and their duration "
                 "(bench.core.figures.sessions)."),
    measure=measure,
    pool=by_field({"sessions": total, "completed": total, "turns": total, "duration_p50_s": median,
                   "duration_max_s": lambda values: max((v for v in values if v is not None), default=None),
                   "by_turn": _turns_pooled}),
    rows=(Row("completed", "Sessions completed", "sessions", digits=0),
          Row("duration_p50_s", "Session duration p50", "s", digits=2)),
    peers={tool: (none("sessions.completed", "no session figure in the version compared here", source),
                  none("sessions.duration_p50_s", "no session figure in the version compared here", source))
           for tool, source in _SOURCES},
)
