"""The result model: the schema documents every key the code writes, the TypedDicts name the same
keys as the schema, results are validated when written, and results of schema version 1 written
by an earlier cellbench stay readable by the store and the reports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, get_type_hints

import jsonschema
import pytest

import adapters
from bench.base import git
from bench.core import figures
from bench.core.result import model
from bench.core.result.files import SCHEMA_VERSION, NotAResult, read_result, result_schema, validate, write_result
from bench.core.result.store import load_results
from bench.core.verdicts import CellVerdict, Verdict
from bench.host.cpus.placement import Placement
from bench.host.machine import detect
from bench.host.resources import ResourceSampler
from bench.reports.comparison import build_comparison
from bench.run.fixes import profile_source
from bench.run.server.exits import ExitInfo
from bench.setup.adapter import ServeCommand
from tests.support.results import synthetic_result, write_cell

V1_FILE = Path(__file__).parents[1] / "data" / "result_v1_llamacpp.json"  # written by cellbench before the model


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = result_schema()["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _object_schemas(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The object schemas a value may follow: the schema itself, or the branches of its oneOf/anyOf."""
    schema = _resolve(schema)
    branches = [_resolve(b) for b in [*schema.get("oneOf", []), *schema.get("anyOf", [])]]
    return [s for s in [schema, *branches] if "properties" in s or "additionalProperties" in s]


def undocumented(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Every key path in `value` that the schema does not name (free-form objects excepted)."""
    schema = _resolve(schema)
    if isinstance(value, list):
        items = schema.get("items")
        return [p for i, v in enumerate(value) for p in (undocumented(v, items, f"{where}[{i}]") if items else [])]
    if not isinstance(value, dict):
        return []
    options = _object_schemas(schema)
    if not options:  # a free-form object ("install", "request_extras", "oom", "memory", "peak")
        return []
    missing = []
    for key, item in value.items():
        path = f"{where}.{key}" if where else key
        found = next((s["properties"][key] for s in options if key in s.get("properties", {})), None)
        if found is None:
            maps = [s["additionalProperties"] for s in options if isinstance(s.get("additionalProperties"), dict)]
            extra = maps[0] if maps else None
            if extra is None:
                missing.append(path)
                continue
            found = extra
        missing += undocumented(item, found, path)
    return missing


def rich_result() -> model.Result:
    """A synthetic result with every optional block the cell can write filled in."""
    result = synthetic_result(levels=(1, 2), share_server=True, failed=1)
    server = result["servers"][0]
    server["retried_after"] = "port 8001 held by pid 4242"
    server["reported_version"] = {"path": "/version", "version": "0.9.1"}
    server["resources"] = {"path": "x.shared.resources.jsonl", "interval_s": 1.0, "samples": 3,
                           "peak": {"tree_rss_bytes": 1}, "gpu_source": None, "errors": []}
    server["command"]["cpus"] = [1]
    server["exit"]["oom"] = {"source": "cgroup", "oom_kill": 1}
    server["exit"]["oom_check_error"] = "OSError: no"
    server["exit"]["memory"] = {"limit": 1}
    result["servers"].append({"levels": [4], "external": "http://127.0.0.1:9", "start_error": "refused",
                              "oom": {"source": "dmesg"}})
    result["framework"]["version_source"] = "server: GET /version"
    result["verdict"] = {**CellVerdict(Verdict.OOM, "killed for memory").to_json(), "suspicious": "10x"}
    validate(result)
    return result


@pytest.mark.parametrize("source", ["synthetic", "v1-file"])
def test_every_key_a_result_holds_is_in_the_schema(source):
    result = rich_result() if source == "synthetic" else json.loads(V1_FILE.read_text())
    assert undocumented(result, result_schema()) == []


def test_the_schema_rejects_a_key_it_does_not_document():
    result = synthetic_result()
    result["levels"][0]["client"]["new_metric"] = 1.0
    with pytest.raises(jsonschema.ValidationError, match="new_metric"):
        validate(result)


def _properties(schema: dict[str, Any], where: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for key, sub in schema.get("properties", {}).items():
        out.append((f"{where}.{key}" if where else key, sub))
        out += _properties(sub, f"{where}.{key}" if where else key)
    for sub in [*schema.get("oneOf", []), *schema.get("anyOf", [])]:
        out += _properties(sub, where)
    if isinstance(schema.get("items"), dict):
        out += _properties(schema["items"], where + "[]")
    return out


def test_every_key_of_the_schema_has_a_description():
    schema = result_schema()
    keys = _properties(schema) + [p for name, d in schema["$defs"].items() for p in _properties(d, f"$defs.{name}")]
    assert [path for path, sub in keys if not sub.get("description") and "$ref" not in sub] == []


# TypedDict -> where its object schema is.
TYPED_BLOCKS = {
    model.Result: "#", model.Harness: "#/properties/harness", model.Framework: "#/properties/framework",
    model.Model: "#/properties/model",
    model.ServedModels: "#/properties/model/properties/served", model.MachineBlock: "#/properties/machine",
    model.RunConfig: "#/properties/run_config", model.CpuAffinity: "#/properties/run_config/properties/cpu_affinity",
    model.Prompts: "#/properties/run_config/properties/prompts", model.Server: "#/$defs/server",
    model.ServerCommand: "#/$defs/server/properties/command", model.ServerExit: "#/$defs/server/properties/exit",
    model.ServerResources: "#/$defs/server/properties/resources", model.Level: "#/$defs/level",
    model.Stats: "#/$defs/stats", model.ClientHealthBlock: "#/$defs/client", model.PromptReuse: "#/$defs/prompt_reuse",
    model.Warmup: "#/$defs/warmup", model.ErrorSample: "#/$defs/error_sample",
    model.DominantError: "#/$defs/dominant_error", model.VerdictBlock: "#/$defs/verdict",
    model.ChunkDivergence: "#/$defs/level/properties/chunk_divergence", model.Audits: "#/$defs/level/properties/audits",
    model.TokenAccounting: "#/$defs/level/properties/audits/properties/token_accounting",
    model.OutputLength: "#/$defs/level/properties/audits/properties/output_length",
    model.CacheAudit: "#/$defs/level/properties/audits/properties/cache",
}


def _at(pointer: str) -> dict[str, Any]:
    node: Any = result_schema()
    for part in pointer.removeprefix("#").strip("/").split("/"):
        node = node[part] if part else node
    return node


def _declared_keys(typed: Any) -> set[str]:
    """A TypedDict's keys, and for `Level` the level figures' (bench.core.figures), which the
    figures declare and `Level` leaves to them."""
    return set(get_type_hints(typed)) | ({f.key for f in figures.FIGURES} if typed is model.Level else set())


@pytest.mark.parametrize("typed, pointer", list(TYPED_BLOCKS.items()), ids=lambda v: getattr(v, "__name__", v))
def test_typed_dicts_name_the_schemas_keys(typed, pointer):
    block = _at(pointer)
    assert _declared_keys(typed) == set(block["properties"])
    assert typed.__required_keys__ == set(block.get("required", ()))
    assert block.get("additionalProperties") is False


def test_write_result_validates_and_leaves_nothing_when_invalid(tmp_path):
    result = synthetic_result()
    path = tmp_path / "llamacpp_20261130T100000Z-aaaa.json"
    write_result(path, result)
    assert read_result(path) == result
    del result["verdict"]
    with pytest.raises(jsonschema.ValidationError, match="'verdict' is a required property"):
        write_result(tmp_path / "broken.json", result)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_result_of_another_version_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({**synthetic_result(), "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(NotAResult, match=f"schema_version {SCHEMA_VERSION + 1}"):
        read_result(path)


def test_a_version_1_file_from_an_earlier_cellbench_feeds_the_reports(tmp_path):
    split_dir = tmp_path / "tiny" / "intelxeonprocessor" / "chat"
    split_dir.mkdir(parents=True)
    shutil.copy(V1_FILE, split_dir / "llamacpp_20261130T162419Z-5213.json")
    write_cell(tmp_path, framework="vllm", run_id="20261130T170000Z-bbbb")
    loaded, ignored = load_results(split_dir)
    assert ignored == [] and [r.framework for r in loaded] == ["llamacpp", "vllm"]
    comparison = build_comparison(split_dir, machine="intelxeonprocessor")
    assert comparison["frameworks"] == ["vllm", "llamacpp"]  # the older run's result after this run's
    assert comparison["results"]["llamacpp"] == json.loads(V1_FILE.read_text())


# ------------------------------------------------------------------ every typed block, found by walking the types

# Objects of the schema with named keys that the types leave a free-form dict, and why.
FREE_FORM = {
    "#/$defs/server/properties/overhead": "bench.run.server.process.ServerProcess.overhead's seconds, a dict of floats",
}


def _is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _object_at(node: dict[str, Any], where: str) -> tuple[str, dict[str, Any]] | None:
    """(pointer, object schema) a property at `where` holds: through $ref, a nullable oneOf/anyOf, an
    array's items, a map's values."""
    if "$ref" in node:
        return _object_at(_resolve(node), node["$ref"])
    if "properties" in node:
        return where, node
    for part in ("items", "additionalProperties"):
        if isinstance(node.get(part), dict):
            return _object_at(node[part], f"{where}/{part}")
    for i, branch in enumerate([*node.get("oneOf", []), *node.get("anyOf", [])]):
        found = _object_at(branch, f"{where}/of/{i}")
        if found is not None:
            return found
    return None


def _inner(tp: Any) -> list[Any]:
    """The types a hint holds: X of `X | None`, `list[X]`, `dict[str, X]`."""
    args = getattr(tp, "__args__", ())
    return [a for arg in args for a in ([arg] if _is_typed_dict(arg) else _inner(arg))] if args else []


def typed_blocks() -> list[tuple[type, str, dict[str, Any]]]:
    """(TypedDict, schema pointer, object schema) of every block reachable from Result."""
    out: list[tuple[type, str, dict[str, Any]]] = []
    todo: list[tuple[type, str, dict[str, Any]]] = [(model.Result, "#", result_schema())]
    seen: set[tuple[type, str]] = set()
    while todo:
        typed, where, block = todo.pop()
        if (typed, where) in seen:
            continue
        seen.add((typed, where))
        out.append((typed, where, block))
        for key, hint in get_type_hints(typed).items():
            sub = block["properties"].get(key)
            if sub is None:
                continue
            inner = [hint] if _is_typed_dict(hint) else _inner(hint)
            found = _object_at(sub, f"{where}/properties/{key}")
            for tp in inner:
                assert found is not None, f"{typed.__name__}.{key} is typed {tp.__name__}; no object in the schema"
                todo.append((tp, *found))
            if not inner and found is not None and found[1].get("properties"):
                assert found[0] in FREE_FORM, f"{typed.__name__}.{key}: the schema names its keys, the type does not"
    return out


def test_every_typed_block_reachable_from_result_names_exactly_the_schemas_keys():
    blocks = typed_blocks()
    names = {typed.__name__ for typed, _, _ in blocks}
    assert {"Level", "Stats", "ClientHealthBlock", "Connections", "OpenLoopBlock", "Goodput", "Reasoning", "Load",
            "Sweep", "Imported", "MetricMethod", "FixBlock", "AdapterSource", "ReportedVersion", "ErrorSample",
            "Warmup", "MachineBlock"} <= names
    wrong = []
    for typed, where, block in blocks:
        keys, required = _declared_keys(typed), set(block.get("required", ()))
        if keys != set(block["properties"]):
            wrong.append(f"{typed.__name__} at {where}: keys {sorted(keys ^ set(block['properties']))}")
        if typed.__required_keys__ != required:
            wrong.append(f"{typed.__name__} at {where}: required {sorted(typed.__required_keys__ ^ required)}")
    assert wrong == []


def test_what_a_measured_result_must_have_is_optional_in_the_types():
    """The schema's `else` (a measured result) requires keys an imported result may lack: the
    TypedDicts have them optional, so a reader of an imported result checks before reading."""
    measured = result_schema()["else"]["properties"]
    pairs = {"machine": model.MachineBlock, "model": model.Model, "run_config": model.RunConfig, "levels": model.Level}
    for key, typed in pairs.items():
        node = measured[key].get("items", measured[key])
        assert set(node["required"]) <= typed.__optional_keys__, key
    assert set(result_schema()["else"]["required"]) <= model.Result.__optional_keys__


def test_the_blocks_a_cell_builds_outside_the_model_follow_the_schema(tmp_path):
    """The blocks built where their concept lives (bench.base, bench.host, the adapter's command, the
    server's exit), each with every key it can have, as a result holds them."""
    root = Path(__file__).parents[2]
    oom = {"source": "kernel log", "pid": 42, "process": "llama-server", "line": "Killed process 42"}
    built = {
        "#/properties/machine": detect().to_json(),
        "#/properties/harness": {**git.revision(root), "adapter": adapters.source("llamacpp"),
                                 "profile": profile_source(root / "models" / "tiny.yaml", root)},
        "#/properties/run_config/properties/cpu_affinity": Placement((1,), (0,), "explicit").to_json(),
        "#/$defs/server/properties/command": ServeCommand(["llama-server", "--api-key", "k"], {"HOME": "/h"},
                                                          Path("/w"), cpus=(0,), secrets=("k",)).to_json(),
        "#/$defs/server/properties/exit": ExitInfo(-9, "SIGKILL", False, oom=oom, memory={"limit_bytes": 1},
                                                   oom_check_error="dmesg: permission denied").to_json(),
        "#/$defs/server/properties/resources": {**ResourceSampler(None, tmp_path / "r.jsonl").summary(),
                                                "path": "r.jsonl"},
    }
    for pointer, block in built.items():
        jsonschema.validate(block, {**_at(pointer), "$defs": result_schema()["$defs"]})
    assert set(built["#/properties/harness"]) == set(get_type_hints(model.Harness))
    assert set(built["#/$defs/server/properties/exit"]) == set(get_type_hints(model.ServerExit))
    assert built["#/$defs/server/properties/command"]["argv"][-1] == "***", "a secret never reaches a result"
