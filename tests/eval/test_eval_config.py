"""The eval config is checked on load: every mistake names the file, the row and the field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from bench.base.dotted import json_path
from bench.base.paths import PROJECT_ROOT
from bench.eval.config.loader import eval_root, load_eval_config
from bench.eval.config.schema import EvalConfigError

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
    (lambda d: d["rows"][0].update(colour="red"), "row 'arith-c4'.colour: unknown field"),
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


# A config written for sglang-omni's own eval runner (its `models/<model>/config.yaml`), with every
# field that runner reads; the values are invented. It must load with no change.
SEED_CONFIG = """\
name: omni-demo
description: "Reference rows of a demo omni model"
hf_model_id: "Demo/Omni-30B-Instruct"
hf_datasets: ["demo/mmsu", "demo/seed-tts"]
auxiliary_models:
  - {kind: hf, id: "openai/whisper-large-v3", install_cmd: "huggingface-cli download openai/whisper-large-v3",
     used_for: "EN WER"}
  - {kind: modelscope, id: "iic/paraformer-zh", install_cmd: "<venv-python> -c 'import funasr'", used_for: "ZH WER"}
python_packages:
  - {name: zhconv, install_cmd: "uv pip install zhconv", used_for: "ZH text"}
  - jiwer
path_links:
  - {target: "data/seed-tts", install_cmd: "ln -s /data/seed-tts data/seed-tts", used_for: "meta files"}
default_venv_python: ["/nonexistent/a/bin/python", "/nonexistent/b/bin/python"]
omni_ci_home: /ci/home
auto_env:
  FLASHINFER_DISABLE_VERSION_CHECK: "1"
default_server_profile: omni_router
server_profile_by_hf_model_id:
  demo/tts-pro: tts_router
server_profiles:
  omni_router:
    server_gpus: 2
    model_name: demo-omni
    num_workers: 2
    num_gpus_per_worker: 1
    worker_extra_args: "--config {repo_root}/examples/omni.yaml --colocate"
    wait_timeout: 600
    server_boot_timeout_s: 660
    router_policy: least_request
  tts_router:
    server_gpus: 1
    model_name: demo/tts-pro
    num_workers: 1
    worker_extra_args: "--config {repo_root}/examples/tts.yaml"
    wait_timeout: 180
    server_boot_timeout_s: 240
rows:
  - id: mmsu-text-c8-accuracy
    file: "benchmarks/eval/benchmark_omni_mmsu.py"
    locate: {section_substring: "Accuracy (accuracy)", config_substring: "modalities=text ",
             source_workload: "router, 2-worker, full-set, c=8"}
    client: "python benchmarks/eval/benchmark_omni_mmsu.py --port {port} --output-dir {output_dir}
      --asr-device {asr_gpu}"
    result_json: "mmsu_results.json"
    server_extra_by_hardware: {H100: "--mem-fraction 0.8"}
    cells:
      overall_accuracy: {path: "summary.overall_accuracy", format: "{v:.2%}"}
      parseable_samples: {paths: {v: "summary.parseable_samples", t: "summary.total_samples"}, format: "{v}/{t}"}
  - id: tts-en-accuracy
    file: "benchmarks/eval/benchmark_tts_seedtts.py"
    hf_model_id: demo/tts-pro
    locate: {section_substring: "Accuracy", config_substring: "EN", source_workload: "c=16"}
    client: "python -m benchmarks.eval.benchmark_tts_seedtts --port {port} --output-dir {output_dir} --device {asr_gpu}"
    result_json: wer_results.json
    cells:
      wer_corpus: {path: summary.wer_corpus, format: "{v:.2%}"}
"""
# A row of that runner's older style: no profile anywhere, its own shell `server` template.
LEGACY_ROW = """\
id: legacy-direct
file: "benchmarks/eval/benchmark_omni_mmsu.py"
locate: {section_substring: "Speed", config_substring: "legacy", source_workload: "c=1"}
server: "python -m demo.serve --port {port} --model {model} --gpus {gpus} --root {repo_root}"
server_extra_by_hardware: {H200: "--fast"}
server_gpus: 1
server_health: "http://localhost:{port}/healthz"
server_boot_timeout_s: 120
client: "python client.py --port {port} --output-dir {output_dir}"
result_json: r.json
cells:
  latency_mean_s: {path: speed.latency_mean_s, format: "{v:.3f}"}
"""


def _seed_repo(tmp_path: Path) -> Path:
    """A user's project as that runner expects it: a git repository holding the config and the
    benchmark files it names."""
    import subprocess

    repo = tmp_path / "omni-project"
    (repo / "models" / "omni-demo").mkdir(parents=True)
    (repo / "benchmarks" / "eval").mkdir(parents=True)
    for name in ("benchmark_omni_mmsu.py", "benchmark_tts_seedtts.py"):
        (repo / "benchmarks" / "eval" / name).write_text('"""tables"""\n')
    (repo / "models" / "omni-demo" / "config.yaml").write_text(SEED_CONFIG)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_a_config_in_sglang_omni_runner_format_loads_as_it_is(tmp_path):
    repo = _seed_repo(tmp_path)
    source = repo / "models" / "omni-demo" / "config.yaml"
    frameworks = {"llamacpp", "sglang_omni", "openai"}
    config = load_eval_config(source, eval_root(source), frameworks)
    assert config.root == repo.resolve(), "row files resolve in the config's repository, not cellbench's"
    mmsu, tts = config.rows
    assert mmsu.file == repo.resolve() / "benchmarks/eval/benchmark_omni_mmsu.py"
    router = mmsu.server_profile
    assert router.framework == "sglang_omni" and router.server_gpus == 2 and router.boot_timeout_s == 660
    assert router.options == {"model_name": "demo-omni", "num_workers": 2, "num_gpus_per_worker": 1,
                              "worker_extra_args": "--config {repo_root}/examples/omni.yaml --colocate",
                              "wait_timeout": 600, "router_policy": "least_request"}
    assert mmsu.wants_asr_gpu and mmsu.server_extra_by_hardware == {"H100": "--mem-fraction 0.8"}
    assert tts.server_profile.name == "tts_router", "server_profile_by_hf_model_id picks the row's profile"
    assert tts.benchmark == "tts_seedtts"
    assert config.auto_env["OMNI_CI_HOME"] == "/ci/home" and config.auto_env["FLASHINFER_DISABLE_VERSION_CHECK"] == "1"
    env = config.environment
    assert env.venv_python == ("/nonexistent/a/bin/python", "/nonexistent/b/bin/python")
    kinds = sorted((r.kind, r.id) for r in env.requirements)
    assert kinds == sorted([
        ("hf-model", "Demo/Omni-30B-Instruct"), ("hf-model", "demo/tts-pro"), ("hf-dataset", "demo/mmsu"),
        ("hf-dataset", "demo/seed-tts"), ("hf-model", "openai/whisper-large-v3"),
        ("modelscope-model", "iic/paraformer-zh"), ("python-package", "zhconv"), ("python-package", "jiwer"),
        ("path", "data/seed-tts")])
    assert next(r for r in env.requirements if r.id == "jiwer").install == "pip install jiwer"


def test_a_row_with_no_profile_anywhere_runs_its_own_server_template(tmp_path):
    repo = _seed_repo(tmp_path)
    source = repo / "models" / "omni-demo" / "config.yaml"
    data = yaml.safe_load(SEED_CONFIG)
    del data["default_server_profile"]
    data["rows"] = [yaml.safe_load(LEGACY_ROW)]
    source.write_text(yaml.safe_dump(data))
    legacy = load_eval_config(source, eval_root(source), {"sglang_omni", "openai"}).rows[0]
    assert legacy.server_profile.framework == "openai" and legacy.server_profile.server_gpus == 1
    assert legacy.server_profile.options == {
        "shell": "python -m demo.serve --port {port} --model {model} --gpus {gpus} --root {repo_root}"}
    assert legacy.server_profile.boot_timeout_s == 120 and legacy.server_health == "http://localhost:{port}/healthz"
    assert legacy.server_extra_by_hardware == {"H200": "--fast"}


@pytest.mark.parametrize("where, field, value", [
    ("top", "hf_dataset", ["x"]),  # a typo of hf_datasets
    ("profile", "num_worker", 2),
    ("row", "server_extra", "--x"),
])
def test_seed_format_still_rejects_unknown_fields_by_name(tmp_path, where, field, value):
    repo = _seed_repo(tmp_path)
    source = repo / "models" / "omni-demo" / "config.yaml"
    data = yaml.safe_load(SEED_CONFIG)
    {"top": data, "profile": data["server_profiles"]["omni_router"], "row": data["rows"][1]}[where][field] = value
    source.write_text(yaml.safe_dump(data))
    with pytest.raises(EvalConfigError) as err:
        load_eval_config(source, eval_root(source), {"sglang_omni", "openai"})
    text = str(err.value)
    assert str(source) in text and field in text and "unknown field" in text
    if where == "row":
        assert "tts-en-accuracy" in text


def test_router_settings_on_a_cellbench_framework_are_refused(tmp_path, target):
    data = _base(target)
    data["server_profiles"]["llama"]["num_workers"] = 2
    with pytest.raises(EvalConfigError, match=r"server_profiles.llama.num_workers: is a sglang_omni router setting"):
        _load(tmp_path, data)
