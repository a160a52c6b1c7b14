"""One meaning per flag across the whole CLI: an option renamed because its old spelling meant
something else elsewhere keeps that spelling for one release, as an alias that says so.

`--rounds` is rounds per level in a pytest session, so the perf tools' requests per stream are
`--requests-per-stream`; `--model` is a model profile in the commands that start servers, so the
commands that read results folders take `--results-name`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class _Renamed(argparse.Action):
    """The old spelling: stores into the new option's field, with a one-line warning on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, meaning: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new, self.meaning = new, meaning

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: warning: {option_string} is deprecated here and goes in the next release; "
              f"use {self.new} ({option_string} {self.meaning})", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed(parser: argparse.ArgumentParser, new: str, old: str, *, meaning: str, **kwargs: Any) -> None:
    """Declare option `new` (with argparse's `kwargs`) and `old` as its deprecated alias: `old`
    sets the same field and warns that it means `meaning` elsewhere. The alias is left out of --help."""
    action = parser.add_argument(new, **kwargs)
    typed = {"type": kwargs["type"]} if "type" in kwargs else {}
    parser.add_argument(old, dest=action.dest, action=_Renamed, new=new, meaning=meaning, metavar=action.metavar,
                        help=argparse.SUPPRESS, **typed)


def add_requests_per_stream(parser: argparse.ArgumentParser, *, default: int, help: str, type: Any) -> None:
    """The perf tools' requests per stream (or per paced stream), once `--rounds`."""
    add_renamed(parser, "--requests-per-stream", "--rounds", meaning="is rounds per level in a pytest session",
                type=type, default=default, help=help)


def add_results_name(parser: argparse.ArgumentParser, *, help: str) -> None:
    """The results folder name of a model, in a command that reads or writes results; once `--model`."""
    add_renamed(parser, "--results-name", "--model", meaning="is a model profile where a command starts servers",
                help=help)
