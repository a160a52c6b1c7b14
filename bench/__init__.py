"""cellbench's engine: framework-agnostic load generation, metrics, verdicts and result files.

PYTEST_DONT_REWRITE: cellbench is an installed pytest plugin, not test code; the marker keeps
pytest from rewriting its asserts (and from warning that it could not, in nested sessions).
"""
