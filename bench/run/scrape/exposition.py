"""Prometheus's text exposition format (version 0.0.4, and the OpenMetrics lines prometheus_client
adds), as llama-server, vLLM and SGLang serve it on /metrics.

    # HELP vllm:num_requests_running Number of requests in model execution batches.
    # TYPE vllm:num_requests_running gauge
    vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
    vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="tiny"} 0.0

`parse(text)` gives each family by its name: its TYPE (untyped when none is declared) and its
samples, each with its own name (a histogram's `_bucket`, `_sum`, `_count`), its labels and its
value. Label values may hold escaped `\\`, `\"` and `\n`; values may be `+Inf`, `-Inf` or `NaN`;
a trailing timestamp is dropped. A line that is none of these raises ValueError naming it.
`totals(text, names)` reads only the named samples, summed over their label sets: what a scrape needs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

SUFFIXES = {"histogram": ("_bucket", "_sum", "_count", "_created"), "summary": ("_sum", "_count", "_created"),
            "counter": ("_total", "_created"), "gauge": ()}
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"({_NAME})(?:\{{(.*)\}})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Family:
    name: str
    type: str = "untyped"
    samples: list[Sample] = field(default_factory=list)

    def total(self, suffix: str = "") -> float | None:
        """The sum over every label set of the samples named `name + suffix` (a counter's value,
        a histogram's `_sum` or `_count`), None when there is none."""
        values = [s.value for s in self.samples if s.name == self.name + suffix]
        return math.fsum(values) if values else None


def parse(text: str) -> dict[str, Family]:
    families: dict[str, Family] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                families.setdefault(parts[2], Family(parts[2])).type = parts[3].strip()
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"line {number} is not a sample: {raw[:120]!r}")
        name, labels, value = match.groups()
        family = families.get(name) or _owner(families, name) or families.setdefault(name, Family(name))
        family.samples.append(Sample(name, _labels(labels or "", number), _value(value, number)))
    return families


def totals(text: str, wanted: set[str]) -> dict[str, float]:
    """Each sample name of `wanted` that the text has, summed over its label sets. Only the wanted
    lines are read, each found by a search for its name at a line's start (a vLLM scrape is 600
    lines, a dozen of them wanted), so that a scrape holds the interpreter for a fraction of a ms."""
    text = "\n" + text
    found: dict[str, float] = {}
    for name in wanted:
        at = text.find("\n" + name)
        while at >= 0:
            end = text.find("\n", at + 1)
            line = text[at + 1:end if end >= 0 else len(text)]
            if line[len(name):len(name) + 1] in ("{", " "):
                match = _SAMPLE.match(line.strip())
                if match is None:
                    raise ValueError(f"not a sample: {line[:120]!r}")
                found[name] = found.get(name, 0.0) + _value(match.group(3), 0)
            at = text.find("\n" + name, at + 1)
    return found


def _owner(families: dict[str, Family], name: str) -> Family | None:
    """The declared family a suffixed sample belongs to (`x_bucket` to histogram `x`)."""
    for family in families.values():
        if any(name == family.name + suffix for suffix in SUFFIXES.get(family.type, ())):
            return family
    return None


def _labels(text: str, number: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    at = 0
    while at < len(text.rstrip()):
        match = _LABEL.match(text, at)
        if match is None:
            raise ValueError(f"line {number}: unreadable labels {text[at:at + 80]!r}")
        labels[match.group(1)] = re.sub(r"\\[\\\"n]", lambda m: _ESCAPE[m.group(0)], match.group(2))
        at = match.end()
    return labels


def _value(text: str, number: int) -> float:
    try:
        return float(text)  # float() reads +Inf, -Inf and NaN as Prometheus writes them
    except ValueError:
        raise ValueError(f"line {number}: not a value: {text!r}") from None
