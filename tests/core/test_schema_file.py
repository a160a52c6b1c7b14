"""bench/core/schema/result.schema.json is the whole result schema: it is what its generator
writes from its declarations (the result's TypedDicts, the metric table, the level figures), and a
user's own JSON Schema tooling, given that file alone, accepts a result cellbench wrote and refuses
one that breaks it."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.core.schema import SCHEMA_PATH, generate

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "bench" / "core" / "schema" / "result.schema.json"  # the path README names
DATA = ROOT / "tests" / "data"
REAL_CELL = DATA / "result_v1_llamacpp.json"  # written by a real llamacpp cell


def test_the_schema_file_is_what_the_generator_writes():
    assert SCHEMA_PATH.read_text() == generate.text(), (
        f"bench/core/schema/result.schema.json is not what its sources give; regenerate it: {generate.COMMAND}")


def test_check_exits_1_naming_the_command_when_the_file_is_stale(tmp_path, capsys):
    stale = tmp_path / "result.schema.json"
    stale.write_text(generate.text().replace('"ttft_ms"', '"ttft_msec"'))
    before = stale.read_text()
    assert generate.main(["--check"], target=stale, docs_path=None) == 1
    assert generate.COMMAND in capsys.readouterr().err
    assert stale.read_text() == before  # --check writes nothing
    assert generate.main([], target=stale, docs_path=None) == 0
    assert generate.main(["--check"], target=stale, docs_path=None) == 0
    written = stale.read_bytes()
    assert generate.main([], target=stale, docs_path=None) == 0 and stale.read_bytes() == written  # twice: same bytes
    assert written.endswith(b"}\n")


@pytest.mark.session
def test_check_passes_on_the_committed_file_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "bench.core.schema.generate", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _plain_validator() -> jsonschema.Draft202012Validator:
    """The validator a user's own tooling makes of the file: json.load and jsonschema, no cellbench."""
    with SCHEMA_FILE.open() as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(result: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _plain_validator().iter_errors(result)]


def test_a_real_llamacpp_result_validates_against_the_file_alone():
    result = json.loads(REAL_CELL.read_text())
    assert result["framework"]["name"] == "llamacpp" and "p50" in result["levels"][0]["ttft_ms"]
    assert _errors(result) == []


def test_the_file_alone_describes_and_requires_each_levels_ttft_ms_p50():
    result = json.loads(REAL_CELL.read_text())
    level = _plain_validator().schema["$defs"]["level"]
    assert level["properties"]["ttft_ms"]["description"].startswith("Time to first token")
    not_a_number = copy.deepcopy(result)
    not_a_number["levels"][0]["ttft_ms"]["p50"] = "33.6"
    assert any(e.startswith("levels/0/ttft_ms/p50: '33.6' is not of type") for e in _errors(not_a_number))
    without_p50 = copy.deepcopy(result)
    del without_p50["levels"][1]["ttft_ms"]["p50"]
    assert "levels/1/ttft_ms: 'p50' is a required property" in _errors(without_p50)
    without_ttft = copy.deepcopy(result)
    del without_ttft["levels"][0]["ttft_ms"]
    assert "levels/0: 'ttft_ms' is a required property" in _errors(without_ttft)


def _result_files() -> list[Path]:
    """Every cellbench result under tests/data: a JSON object with an integer schema_version, a
    run id and levels (another tool's files there, aiperf's, carry a schema_version of their own,
    a string)."""
    found = []
    for path in sorted(DATA.rglob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and type(data.get("schema_version")) is int and {"run_id", "levels"} <= data.keys():
            found.append(path)
    return found


def test_tests_data_holds_the_real_cell_result():
    assert REAL_CELL in _result_files()


@pytest.mark.parametrize("path", _result_files(), ids=lambda p: str(p.relative_to(DATA)))
def test_every_result_file_in_tests_data_validates_against_the_file_alone(path):
    assert _errors(json.loads(path.read_text())) == []
