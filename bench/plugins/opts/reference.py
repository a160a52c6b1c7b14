"""docs/options.md, written from the option declarations: `python -m bench.plugins.opts.reference`.

tests/plugins/test_option_reference.py fails when docs/options.md is not what this writes, and when the
flags and defaults of a real `pytest --help` are not the ones it lists.
"""

from __future__ import annotations

import sys

from bench.plugins.opts.build import GROUPS
from bench.plugins.opts.spec import Option

COMMAND = "python -m bench.plugins.opts.reference > docs/options.md"
HEADER = f"""# pytest options

cellbench's own pytest options, each with what it takes, its default and what it does. This
page is generated from the options' declarations (`bench/plugins/opts/settings.py` and
`eval_settings.py`), which `pytest --help` shows too; do not edit it by hand. After changing an
option, regenerate it:

    {COMMAND}

A request trace is `--trace-file PATH`, never `--trace`: pytest owns `--trace` (its debugging
plugin: break to pdb at the start of each test), so `pytest --trace t.jsonl` would start pdb and
take the file for a test path. cellbench stops that session with a usage error, "pytest's own
--trace starts pdb; give a request trace as --trace-file PATH", when `--trace` is given beside a
file that parses as a trace ([Traces, ramps and durations](running-cells.md#traces-ramps-and-durations)).
"""


def _code(text: str) -> str:
    """A table cell's code span: `|` escaped, as GitHub's tables need even there."""
    return f"`{text.replace('|', chr(92) + '|')}`" if text else ""


def _prose(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "\\<")


def row(option: Option) -> str:
    """One option's line: flag, what it takes, its default (as `pytest --help` has it), what it does."""
    return (f"| {_code(option.flag)} | {_code(option.value_text())} | {_code(option.default_text())} "
            f"| {_prose(option.brief or option.help)} |")


def reference() -> str:
    parts = [HEADER.rstrip()]
    for (_, description), options in GROUPS:
        title = description.removeprefix("cellbench ")
        parts += [f"\n## {title[0].upper()}{title[1:]}\n", "| Option | Value | Default | What it does |",
                  "|---|---|---|---|", *map(row, options)]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
