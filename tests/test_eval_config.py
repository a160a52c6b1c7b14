"""The eval config is checked on load: every mistake names the file, the row and the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from bench.base.paths import PROJECT_ROOT
from bench.eval.config import EvalConfigError, json_path, load_eval_config

FRAMEWORKS = {"llamacpp", "vllm"}


def _base(target: Path) -> dict:
    return {
        "name": "tiny",
        "hf_model_id": "tiny",
        "auto_env": {"OMP_NUM_THREADS": 2},
        "default_server_profile": "llama",
        "server_profiles": {"llama": {"framework": "llamacpp", "max_concurrency": 4}},
        "rows": [{
            "id": "arith-c4",
            "file": str(target),
            "locate": {"section_substring": "Accuracy", "config_substring": "llamacpp", "source_workload": "c=4"},
            "client": "{python} client.py --port {port} --output-dir {output_dir} --max-samples {max_samples}",
            "max_samples": 50,
            "result_json": "arith_results.json",
            "cells": {"accuracy": {"path": "summary.accuracy", "format": "{v:.2%}"},
                      "correct": {"paths": {"v": "summary.correct", "t": "summary.total"}, "format": "{v}/{t}"}},
        }],
    }


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "benchmark_x.py"
    path.write_text('"""x"""\n')
    return path


def _load(tmp_path: Path, data: dict):
    source = tmp_path / "eval.yaml"
    source.write_text(yaml.safe_dump(data))
    return load_eval_config(source, PROJECT_ROOT, FRAMEWORKS)


def test_a_valid_config_loads_with_defaults_filled(tmp_path, target):
    config = _load(tmp_path, _base(target))
    row = config.rows[0]
    assert row.server_profile.framework == "llamacpp" and row.server_profile.max_concurrency == 4
    assert row.hf_model_id == "tiny" and row.timeout_s == 1800.0
    assert config.auto_env == {"OMP_NUM_THREADS": "2"}
    assert row.cells["correct"].render({"v": 3, "t": 50}) == "3/50"


def test_client_tokens_are_filled_one_argument_each_never_through_a_shell(tmp_path, target):
    row = _load(tmp_path, _base(target)).rows[0]
    argv = row.client_argv({"python": "/usr/bin/python3", "port": 8080, "output_dir": "/tmp/a dir; rm -rf ~",
                            "max_samples": 5})
    assert argv == ["/usr/bin/python3", "client.py", "--port", "8080", "--output-dir", "/tmp/a dir; rm -rf ~",
                    "--max-samples", "5"]


def test_smoke_appends_max_samples_when_the_template_has_no_placeholder(tmp_path, target):
    data = _base(target)
    data["rows"][0]["client"] = ["python", "c.py", "--port", "{port}"]
    row = _load(tmp_path, data).rows[0]
    assert row.client_argv({"port": 1}, smoke=5)[-2:] == ["--max-samples", "5"]
    assert row.client_argv({"port": 1}) == ["python", "c.py", "--port", "1"]


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["rows"][0].pop("result_json"), "row 'arith-c4'.result_json: is required"),
    (lambda d: d["rows"][0]["locate"].pop("source_workload"), "row 'arith-c4'.locate.source_workload: is required"),
    (lambda d: d["rows"][0].update(client="python c.py --port {prot}"), "unknown placeholder {prot}"),
    (lambda d: d["rows"][0].update(server_profile="nope"), "row 'arith-c4'.server_profile: unknown profile 'nope'"),
    (lambda d: d["rows"][0].update(file="no/such.py"), "row 'arith-c4'.file: no such file"),
    (lambda d: d["rows"][0].pop("max_samples"), "row 'arith-c4'.max_samples: is required when the client names"),
    (lambda d: d["rows"][0]["cells"]["accuracy"].update(paths={"v": "a"}), "needs exactly one of path or paths"),
    (lambda d: d["rows"][0]["cells"]["correct"].update(format="{v}/{n}"), "cells.correct.format: names n"),
    (lambda d: d["rows"][0].update(colour="red"), "rows[0].colour: unknown field"),
    (lambda d: d["rows"][0].update(id="a b"), "rows[0].id: 'a b'"),
    (lambda d: d["rows"].append(copy.deepcopy(d["rows"][0])), "row 'arith-c4'.id: appears twice"),
    (lambda d: d["server_profiles"]["llama"].update(framework="trt"),
     "server_profiles.llama.framework: unknown framework 'trt'"),
    (lambda d: d["server_profiles"]["llama"].update(max_concurrency=0),
     "server_profiles.llama.max_concurrency: must be an integer >= 1"),
    (lambda d: d["rows"][0].update(result_json="../x.json"), "result_json: must be a file name inside"),
    (lambda d: d.update(rows=[]), "rows: must be a non-empty list"),
])
def test_a_bad_config_names_the_row_and_the_field(tmp_path, target, mutate, expected):
    data = _base(target)
    mutate(data)
    with pytest.raises(EvalConfigError) as failure:
        _load(tmp_path, data)
    assert expected in str(failure.value)
    assert str(tmp_path / "eval.yaml") in str(failure.value)


def test_json_path_walks_keys_and_list_indices():
    data = {"summary": {"per_task": [{"score": 0.5}]}}
    assert json_path(data, "summary.per_task.0.score") == 0.5
    with pytest.raises(KeyError, match="no 'missing'"):
        json_path(data, "summary.missing")
    with pytest.raises(KeyError, match="index 3 out of range"):
        json_path(data, "summary.per_task.3")


def test_the_shipped_tiny_config_loads():
    import adapters

    config = load_eval_config(PROJECT_ROOT / "models" / "tiny" / "eval.yaml", PROJECT_ROOT, set(adapters.registry()))
    assert len(config.rows) >= 2
    assert all(row.file.is_relative_to(PROJECT_ROOT / "benchmarks" / "eval") for row in config.rows)
