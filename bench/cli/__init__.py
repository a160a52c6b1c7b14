"""The `cellbench` command: install, doctor, clean, report, weekly."""

from bench.cli.main import main

__all__ = ["main"]
