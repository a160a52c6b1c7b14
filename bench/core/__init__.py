"""What a benchmark measures: per-request records, SSE parsing, metrics, verdicts and the result model."""
