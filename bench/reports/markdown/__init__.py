"""REPORT.md for one split directory, rendered from its comparison.json alone.

One table per level (metrics as rows, frameworks as columns; the per-request metrics' rows are
those of the metric table, bench.core.metrics.table) over the union of the levels every
framework measured, so a level only one framework ran still shows, with "—" for the others.
Concurrency levels ("## Concurrency 8") and open-loop rate levels ("## Request rate 4 req/s", with
their offered and achieved rates and queueing delay) are levels of different kinds and always get
tables of their own; goodput rows appear where a level was judged against SLOs (--slo), TTFA and
reasoning rows beside TTFT where a level's model reasoned (bench.core.metrics.reasoning), and an
*SLO sweep* section gives each framework's highest rate meeting them. Above the tables: the run ids
that won, each verdict with its reason; under each, what its intervals rest on; below them, *Between
frameworks* (bench.reports.between), methodology differences, the levels' audits (token accounting,
output length), suspicious changes, the files left out, and the plots.

A result imported from another benchmark's file has its column headed `<framework>, imported
(<tool>)`, and each of its values that the tool derived differently from cellbench (its
`imported.methods`, bench.core.result.imported) is marked `(<tool>)`; an *Imported results* section says
where each came from and what is not comparable.
"""

from bench.reports.between import INTERVALS_NOTE
from bench.reports.markdown.report import REPORT_FILE, render_report, write_report
from bench.reports.markdown.rows import GOODPUT_ROWS, ROWS, level_rows, metric_rows, row_metrics
from bench.reports.markdown.sections import UNLIKE_ROW, section_title, suite_overhead
from bench.reports.markdown.text import MISSING_LEVEL, NULL, bullets, cell, table

__all__ = ["GOODPUT_ROWS", "INTERVALS_NOTE", "MISSING_LEVEL", "NULL", "REPORT_FILE", "ROWS", "UNLIKE_ROW", "bullets",
           "cell", "level_rows", "metric_rows", "render_report", "row_metrics", "section_title", "suite_overhead",
           "table", "write_report"]
