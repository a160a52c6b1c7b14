"""Everything read back from result files: comparison.json, REPORT.md and plots, the journal, the HTML
review, cleanup."""
