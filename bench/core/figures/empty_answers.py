"""Empty answers: successful requests that streamed no output token (a scratch figure: the proof
that a level figure is one module)."""

from __future__ import annotations

from typing import Annotated, TypedDict

from bench.core.crosswalk.entry import none
from bench.core.declare import Doc, LevelFigure, Row, by_field, median, total
from bench.core.level_run import LevelRun


class EmptyAnswers(TypedDict):
    count: Annotated[int, Doc("Successful requests whose answer had no output token.")]
    share: Annotated[float | None, Doc("count / successful requests; null without a successful request.")]


def empty_answers(run: LevelRun) -> EmptyAnswers:
    ok = [r for r in run.records if r.ok]
    empty = sum(1 for r in ok if r.output_tokens == 0)
    return {"count": empty, "share": empty / len(ok) if ok else None}


_NOTE = "no count of successful requests without output"
FIGURE = LevelFigure(
    "empty_answers", EmptyAnswers,
    "Successful requests that streamed no output token: a server that answers with nothing is fast for nothing.",
    measure=empty_answers, pool=by_field({"count": total, "share": median}),
    rows=(Row("share", "Empty answers", "share", scale=100, shown_unit="%"),),
    peers={"vllm": (none("empty_answers.share", _NOTE, "vllm/benchmarks/serve.py"),),
           "aiperf": (none("empty_answers.share", _NOTE, "aiperf/metrics/types/output_sequence_length_metric.py"),),
           "guidellm": (none("empty_answers.share", _NOTE, "guidellm/benchmark/schemas/metrics.py"),),
           "siliconbench": (none("empty_answers.share", _NOTE, "scripts/benchmark.py"),)},
)
