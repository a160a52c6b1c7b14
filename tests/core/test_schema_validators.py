"""The two validators of a result (bench.core.result.files.follows_schema): jsonschema_rs's quick
yes is taken as it is, so it must never say yes where jsonschema says no. Checked on a result file
a cell wrote, on synthetic ones, and on thousands of results made wrong one change at a time (a key
dropped, a key added, a value of another type or out of bounds), as a reader of a hand-edited or
corrupted file meets them."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import numpy as np
import pytest

from bench.core.result.files import result_schema, validate
from tests.core.test_result_model import rich_result
from tests.reports.test_open_loop_reports import open_result
from tests.support.results import synthetic_result

DATA = Path(__file__).resolve().parents[1] / "data"
WRONG: tuple[Any, ...] = ("x", -1, 0.5, None, True, [], {}, 10**12)
STATS = {"n", "mean", "min", "max", "stdev", "low", "high", "effective_n", "needs_n"}


def mutants(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str, Any]]:
    """(where, what, how) of every one-change mutant of `doc`: each key dropped, an unknown key
    added to each object, each value replaced by each of WRONG."""
    if isinstance(doc, dict):
        yield path, "add", None
        for key, value in list(doc.items()):
            yield (*path, key), "drop", None
            yield from mutants(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from mutants(value, (*path, i))
    if path:
        for value in WRONG:
            if type(value) is not type(doc) or value != doc:
                yield path, "set", value


@contextlib.contextmanager
def applied(doc: Any, where: tuple[Any, ...], what: str, how: Any) -> Iterator[Any]:
    """`doc` with the one change made, in place, and undone after."""
    node = doc
    for step in where if what == "add" else where[:-1]:
        node = node[step]
    key = "zz_not_in_the_schema" if what == "add" else where[-1]
    missing = object()
    before = node.get(key, missing) if isinstance(node, dict) else node[key]
    if what == "drop":
        del node[key]
    else:
        node[key] = 1 if what == "add" else how
    try:
        yield doc
    finally:
        if before is missing:
            del node[key]
        else:  # a dropped key comes back last: no validator reads the order of keys
            node[key] = before


def as_read(name: str) -> Any:
    """A result as a reader meets it (parsed JSON): a synthetic one with every optional block
    (failed requests included), an open-loop sweep with its SLOs, or the version-1 file a cell wrote."""
    if name == "v1-file":
        return json.loads((DATA / "result_v1_llamacpp.json").read_text())
    return json.loads(json.dumps(rich_result() if name == "rich" else open_result(sweep=True)))


@pytest.mark.sim  # about 450 full jsonschema checks: 5 s of CPU
def test_the_quick_validator_never_says_yes_where_jsonschema_says_no() -> None:
    quick = jsonschema_rs.validator_for(result_schema())
    full = jsonschema.Draft202012Validator(result_schema())
    checked: set[tuple[Any, ...]] = set()
    for name in ("rich", "open-loop", "v1-file"):
        doc = as_read(name)
        assert quick.is_valid(doc) and full.is_valid(doc), name
        said_no = 0
        for where, what, how in list(mutants(doc)):
            with applied(doc, where, what, how) as mutant:
                if not quick.is_valid(mutant):
                    said_no += 1
                    continue
                alike = (tuple(_kind(step) for step in where), what, type(how))
                if alike not in checked:  # the same change at another level, percentile or file: asked once
                    checked.add(alike)
                    assert full.is_valid(mutant), (name, where, what, how)
        assert said_no > 2000, (name, said_no)  # the mutants reach the whole document
    assert len(checked) > 300, len(checked)


def _kind(step: Any) -> Any:
    """A path step with the place it stands for: any item of a list, any entry of a stats block."""
    if isinstance(step, int):
        return "[]"
    return "stat" if re.fullmatch(r"p\d+", step) or step in STATS else step


def test_values_json_does_not_have_are_left_to_jsonschema() -> None:
    """In memory a result may hold what JSON has no type for before it is written: the quick
    validator refuses to judge it and jsonschema decides, as before it was added."""
    result = synthetic_result()
    result["levels"][0]["num_requests"] = np.int64(8)
    with pytest.raises(jsonschema.ValidationError, match="is not of type 'integer'"):
        validate(result)
    result["levels"][0]["num_requests"] = 8
    result["levels"][0]["output_throughput_tps"] = np.float64(2.5)  # jsonschema_rs says no; jsonschema, yes
    validate(result)
