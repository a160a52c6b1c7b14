"""The Source's `n=K mean` marker: how many rounds a row's values average, said once and checked.

A Source claims each mean at most once (`without_means_in` drops a note's `(n=K mean)` that the
hardware tag already says), and `mean_warning` says when the values and a claim disagree: an
edit that overwrites an n=M mean row with values from another number of rounds, or a new Source
claiming an n=M mean its values are not.
"""

from __future__ import annotations

import re

_MEAN_MARKER = re.compile(r"\bn=(\d+) mean\b")


def without_means_in(note: str, tag: str) -> str:
    """`note` less any `(n=K mean)` the tag already says, so the Source claims each mean once."""
    for k in set(_MEAN_MARKER.findall(tag)):
        note = re.sub(rf"\s*\(\s*n={k} mean\s*\)", "", note)
    return note.strip()


def means_claimed(text: str) -> list[int]:
    return [int(k) for k in _MEAN_MARKER.findall(text)]


def _values_are(mean_of: int) -> str:
    return "a single-round value" if mean_of == 1 else f"an n={mean_of} mean"


def mean_warning(mean_of: int, source: str, before: str | None) -> str:
    """Why the values and an `n=M mean` claim disagree, old row or new Source; "" when they agree."""
    old = [m for m in dict.fromkeys(means_claimed(before or "")) if m > 1 and m != mean_of]
    new = [m for m in means_claimed(source) if m != mean_of]
    found = [f"overwrites an n={m} mean row with {_values_are(mean_of)}" for m in old]
    found += [f"the new Source claims an n={m} mean but the values are {_values_are(mean_of)}" for m in new]
    return "; ".join(found)
