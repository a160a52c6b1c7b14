"""The HTML pages a report ends in, beside the pytest-html rows' cells and extras
(bench.reports.html_review): the summary above the review's rows (`summary`) and the merged
report's self-contained index.html (`merged_index`)."""
