"""Accuracy evals: reference tables kept in benchmark docstrings, and the code that refreshes them."""
