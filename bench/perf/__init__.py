"""Measurements of cellbench's own cost (the client), run as scripts: `python -m bench.perf.<name>`."""
