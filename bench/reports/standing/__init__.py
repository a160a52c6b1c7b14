"""A result's standing in a report, decided in one place (`rule.standing_of`) and shown the same
way everywhere (`shown`): REPORT.md, comparison.json and .csv, the HTML review, the plots, the
journal's comparison with the previous run, the merged report and `cellbench compare`.

A figure is set beside another's, ordered or judged "faster", only when both results stand `ok`
(verdict ok or fixed, from this run); any other result's figures carry their marks at the number
and sort after the ok ones (docs/results.md, Standing)."""

from bench.reports.standing.rule import (
    IMPORTED,
    INTERRUPTED,
    NOT_THIS_RUN,
    OK,
    ChosenRun,
    Mark,
    Standing,
    StandingBlock,
    ThisRunIds,
    facts,
    order,
    run_ids,
    run_text,
    runs_text,
    served_model,
    standing_of,
    this_run_of,
    writer_gone,
)

__all__ = ["IMPORTED", "INTERRUPTED", "NOT_THIS_RUN", "OK", "ChosenRun", "Mark", "Standing", "StandingBlock",
           "ThisRunIds", "facts", "order", "run_ids", "run_text", "runs_text", "served_model", "standing_of",
           "this_run_of", "writer_gone"]
