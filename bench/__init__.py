"""cellbench's engine: framework-agnostic load generation, metrics, verdicts and result files."""
