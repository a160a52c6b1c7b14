"""One option's declaration: its flag, parser, default, check, help and the field it fills.

A cell option is an `Option` of bench.plugins.opts.settings.OPTIONS, its `into` naming the
Settings field it fills (`"load.requests"`); an eval row's is a field of `EvalSettings` whose
metadata holds its `Option`s (`option()`: one, or two for a flag and its negation). Either way the
one declaration registers the flag (`pytest_addoption`), checks its value (a usage error in the
option's own words), parses it into its field (bench.plugins.opts.build), writes its line of
docs/options.md (bench.plugins.opts.reference) and, where a `cellbench` command takes the same
option, declares it there (`add_argument`). The help's `[default]` is made from the declared
default, so the two cannot disagree.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any

import pytest

META = "cellbench_options"  # a field's metadata key: its Options


@dataclass(frozen=True)
class Option:
    flag: str  # `--requests`
    help: str  # what it does, without the default: `[default]` is added from `default` or `shown`
    default: Any = None  # argparse's default (None: not given)
    type: Callable[[str], Any] | None = None
    shown: str | None = None  # the help's [default] where the declared default does not say it (None: not given)
    note: str = ""  # after the default, inside the brackets: `[auto: the CPUs --client-cpus leaves]`
    takes: str = ""  # with `valid`: the usage error `--flag takes <takes>, got <value>`
    valid: Callable[[Any], bool] | None = None
    parse: Callable[[Any], Any] | None = None  # the value as its field holds it; raises pytest.UsageError
    brief: str = ""  # docs/options.md's shorter text, where the help is long
    action: str | None = None
    dest: str | None = None  # where argparse keeps it (default: from the flag)
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    const: Any = None
    into: str = ""  # a cell option's Settings field: `load.requests` (bench.plugins.opts.settings)

    @property
    def name(self) -> str:
        """argparse's dest: `--request-timeout` -> `request_timeout`."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    def default_text(self) -> str:
        """What the help's brackets hold: the default (`100`, `300`, `1,8,16`, `off`) and its note."""
        if self.shown is not None:
            text = self.shown
        elif self.action == "store_true":
            text = "off"
        elif isinstance(self.default, float):
            text = f"{self.default:g}"
        elif isinstance(self.default, tuple):
            text = ",".join(map(str, self.default))
        elif self.default is None or self.default == "":
            raise ValueError(f"{self.flag}: a default of {self.default!r} needs `shown`, the words for it")
        else:
            text = str(self.default)
        return text + self.note

    def help_text(self) -> str:
        return f"{self.help} [{self.default_text()}]"

    def value_text(self) -> str:
        """What the option takes, in docs/options.md: its metavar, choices or type; '' for a switch."""
        if self.action in ("store_true", "store_false"):
            return ""
        if self.metavar:
            return self.metavar
        if self.choices:
            return "|".join(self.choices)
        names: dict[object, str] = {int: "int", float: "number", None: "text"}
        return names.get(self.type) or getattr(self.type, "__name__", "text").lower()

    def _declared(self) -> dict[str, Any]:
        """What argparse is given besides the flag and its help."""
        given = {"type": self.type, "metavar": self.metavar, "choices": self.choices, "nargs": self.nargs,
                 "const": self.const, "action": self.action, "dest": self.dest}
        declared = {key: value for key, value in given.items() if value is not None}
        if self.action not in ("store_true", "store_false"):  # a switch keeps argparse's default (pytest
            declared["default"] = self.default  # keeps a dest's first: --keep-alive's False)
        return declared

    def add_to(self, group: Any) -> None:
        """Register the flag with a pytest option group."""
        group.addoption(self.flag, help=self.help_text(), **self._declared())

    def add_argument(self, parser: argparse.ArgumentParser, **changes: Any) -> argparse.Action:
        """The option as an argument of a `cellbench` command: its flag, help, type and check as pytest
        has them. `changes` (`shown`, `default`, ...) where the command's default is another (its help
        says which). Not for an option with a `parse`: those raise pytest's usage errors."""
        option = replace(self, **changes) if changes else self
        if option.parse is not None:
            raise ValueError(f"{option.flag} is parsed into pytest's usage errors; declare the command's own")
        declared = option._declared()
        if option.valid is not None:
            declared["type"] = option._checked_type()
        return parser.add_argument(option.flag, help=option.help_text(), **declared)

    def _checked_type(self) -> Callable[[str], Any]:
        """argparse's `type`: the value converted, and refused in the option's words when not `valid`."""
        convert: Callable[[str], Any] = self.type or str
        valid = self.valid
        assert valid is not None

        def checked(text: str) -> Any:
            value = convert(text)
            if not valid(value):
                raise argparse.ArgumentTypeError(f"takes {self.takes}, got {value:g}")
            return value

        checked.__name__ = getattr(convert, "__name__", "value")  # argparse's "invalid int value: 'x'"
        return checked

    def check(self, value: Any) -> None:
        """A value its `valid` refuses is a usage error, in the words the option has always used."""
        if value is not None and self.valid is not None and not self.valid(value):
            raise pytest.UsageError(f"{self.flag} takes {self.takes}, got {value:g}")


def option(flag: str, help: str, *, also: tuple[Option, ...] = (), **declared: Any) -> Any:
    """A Settings field declared by its option (and `also` the flags that set the same dest)."""
    return field(metadata={META: (Option(flag, help, **declared), *also)})


def declared(cls: type) -> Iterator[tuple[str, tuple[Option, ...]]]:
    """(field name, its options) for each field of `cls` an option declares, in declaration order."""
    for f in fields(cls):
        if META in f.metadata:
            yield f.name, f.metadata[META]


def flags(cls: type) -> Iterator[Option]:
    for _, options in declared(cls):
        yield from options
