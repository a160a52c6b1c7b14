"""cellbench's own eval clients, benchmarks/eval/benchmark_{arith,toolcall}.py.

Unit tests pin the scoring rules (answer extraction, the tool-call funnel) on hand-made replies;
integration tests run each client as a subprocess, the way the eval rows do, against a real
llama-server on the built-in tiny model, and check the result JSON adds up. The tiny model's
text is gibberish, so its scores are ~0: the tests check the accounting, not the accuracy.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.ports import free_port
from bench.run.server.process import ServerProcess
from bench.setup.adapter import ServeCommand

EVAL_DIR = PROJECT_ROOT / "benchmarks" / "eval"
ARITH_KEYS = {"accuracy", "correct", "wrong", "parseable_samples", "unparseable_samples", "total_samples",
              "failed_requests"}
TOOLCALL_KEYS = {"valid_rate", "tool_call_rate", "known_name_rate", "json_args_rate", "schema_valid_rate",
                 "valid_samples", "tool_call_samples", "known_name_samples", "json_args_samples",
                 "schema_valid_samples", "total_samples", "failed_requests"}
SPEED_KEYS = {"completed_requests", "failed_requests", "latency_mean_s", "latency_p50_s", "latency_p95_s",
              "throughput_qps", "output_tokens_total", "output_tok_per_s", "wall_s"}


def _load(name: str, path: Path) -> ModuleType:
    """Import a client script by path; the scripts import their sibling `_evalclient` by name."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


evalclient = _load("_evalclient", EVAL_DIR / "_evalclient.py")
arith = _load("benchmark_arith", EVAL_DIR / "benchmark_arith.py")
toolcall = _load("benchmark_toolcall", EVAL_DIR / "benchmark_toolcall.py")
make_arith = _load("make_arith", EVAL_DIR / "data" / "make_arith.py")


def run_client(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EVAL_DIR / script), *args], check=False, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- arith: the extraction rule


@pytest.mark.parametrize("reply, expected", [
    ("85", 85),
    ("The answer is 85.", 85),
    ("37 + 48 = 85", 85),  # the last number wins
    ("-389", -389),
    ("\u2212389", -389),  # U+2212 minus sign
    ("It is - 389", 389),  # a sign must touch the digits
    ("5-3", 3),  # a minus after a digit is an operator
    ("1,365", 1365),
    ("Answer: 1,234,567", 1234567),
    ("**42**", 42),
    ("85.0", 85),
    ("85.00 exactly", 85),
    ("85.5", None),  # the last number is not an integer
    ("about 3 or 85.5", None),
    ("x2 v1.2 85km", None),  # glued to letters or dots: not numbers
    ("<think>maybe 12</think>85", 85),
    ("<think>12 and never closed", None),
    ("no digits here", None),
    ("\n\n\n):):):", None),
    ("", None),
    (None, None),
])
def test_extract_answer(reply, expected):
    assert arith.extract_answer(reply) == expected


def test_arith_dataset_is_fixed_and_correct():
    items = arith.load_items(arith.DATASET)
    assert len(items) == 200
    assert make_arith.render(make_arith.build()) == arith.DATASET.read_text(encoding="utf-8")
    assert {i["op"] for i in items} == {"+", "-", "*"}
    assert len({i["id"] for i in items}) == 200
    assert all(f"{i['a']} {i['op']} {i['b']}" in i["question"] for i in items)
    assert any(i["answer"] < 0 for i in items)


def test_arith_score_counts_add_up():
    items = arith.load_items(arith.DATASET)[:5]
    R = evalclient.Reply
    replies = [
        R(True, 0.1, 200, message={"content": f"It is {items[0]['answer']}."}, completion_tokens=4),
        R(True, 0.1, 200, message={"content": str(items[1]["answer"] + 1)}, completion_tokens=2),
        R(True, 0.1, 200, message={"content": "gibberish"}, completion_tokens=2),
        R(True, 0.1, 200, message={"content": None}, completion_tokens=0),
        R(False, 0.1, 500, error="HTTP 500: boom"),
    ]
    summary, per_sample = arith.score(items, replies)
    assert (summary["correct"], summary["wrong"], summary["total_samples"]) == (1, 4, 5)
    assert (summary["parseable_samples"], summary["unparseable_samples"], summary["failed_requests"]) == (2, 3, 1)
    assert summary["accuracy"] == 0.2
    assert [s["correct"] for s in per_sample] == [True, False, False, False, False]
    assert sum(b["total"] for b in summary["per_op"].values()) == 5


# ---------------------------------------------------------------- toolcall: the funnel

TOOLS = [
    {"type": "function", "function": {"name": "get_forecast", "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["location", "days"]}}},
    {"type": "function", "function": {"name": "ping"}},  # no parameters: any object
]


def call(name, arguments, *, id_="call_1", type_="function"):
    return {"id": id_, "type": type_, "function": {"name": name, "arguments": arguments}}


def levels(message):
    verdict = toolcall.check_tool_calls(message, toolcall.tool_validators(TOOLS))
    return [level for level in toolcall.LEVELS if verdict["checks"][level]], verdict["errors"]


def test_valid_call_passes_every_level():
    passed, errors = levels({"tool_calls": [call("get_forecast", '{"location": "Oslo", "days": 3}')]})
    assert passed == list(toolcall.LEVELS) and errors == []
    passed, _ = levels({"tool_calls": [call("get_forecast", '{"location": "Oslo", "days": 3}'),
                                       call("ping", "{}", id_="call_2")]})
    assert passed == list(toolcall.LEVELS)


@pytest.mark.parametrize("message, reached, error", [
    ({"content": "Sure, let me check."}, [], "no tool call"),
    ({"tool_calls": []}, [], "no tool call"),
    (None, [], "no tool call"),
    ({"tool_calls": [call("get_weather", '{"location": "Oslo"}')]}, ["tool_call"], "unknown tool name"),
    ({"tool_calls": [call("get_forecast", '{"location": "Oslo", "days": 3'),]},
     ["tool_call", "known_name"], "not JSON"),
    ({"tool_calls": [call("get_forecast", {"location": "Oslo", "days": 3})]},
     ["tool_call", "known_name"], "not a JSON string"),
    ({"tool_calls": [call("get_forecast", '{"location": "Oslo"}')]},
     ["tool_call", "known_name", "json_args"], "'days' is a required property"),
    ({"tool_calls": [call("get_forecast", '{"location": "Oslo", "days": 30}')]},
     ["tool_call", "known_name", "json_args"], "at days"),
    ({"tool_calls": [call("get_forecast", '{"location": 7, "days": 3}')]},
     ["tool_call", "known_name", "json_args"], "at location"),
    ({"tool_calls": [call("ping", "[1, 2]")]}, ["tool_call", "known_name", "json_args"], "not of type 'object'"),
    ({"tool_calls": [call("ping", "{}", id_="")]}, ["tool_call", "known_name", "json_args", "schema_valid"],
     "no call id"),
    ({"tool_calls": [call("ping", "{}"), call("ping", "{}")]},
     ["tool_call", "known_name", "json_args", "schema_valid"], "duplicate call ids"),
    ({"tool_calls": [call("ping", "{}"), call("nope", "{}", id_="c2")]}, ["tool_call"], "'nope'"),
])
def test_invalid_calls_stop_at_the_failing_level(message, reached, error):
    passed, errors = levels(message)
    assert passed == reached
    assert any(error in e for e in errors), errors


def test_toolcall_score_funnel_is_monotone():
    R = evalclient.Reply
    prompts = [{"name": f"p{i}", "domain": "x", "tools": TOOLS, "validators": toolcall.tool_validators(TOOLS)}
               for i in range(5)]
    replies = [
        R(True, 0.1, 200, message={"tool_calls": [call("get_forecast", '{"location": "A", "days": 1}')]}),
        R(True, 0.1, 200, message={"tool_calls": [call("get_forecast", '{"location": "A"}')]}),
        R(True, 0.1, 200, message={"tool_calls": [call("zzz", "{}")]}),
        R(True, 0.1, 200, message={"content": "\n\n"}, finish_reason="length"),
        R(False, 1.0, None, error="timed out"),
    ]
    summary, per_sample = toolcall.score(prompts, replies)
    assert [summary[f"{lv}_samples"] for lv in toolcall.LEVELS] == [3, 2, 2, 1, 1]
    assert summary["valid_rate"] == 0.2 and summary["tool_call_rate"] == 0.6
    assert summary["failed_requests"] == 1 and summary["total_samples"] == 5
    assert len(per_sample) == 5


def test_agent_prompts_load_with_tools_in_the_parameter():
    prompts = toolcall.load_prompts(toolcall.DATASET)
    assert len(prompts) == 100
    raw = json.loads(toolcall.DATASET.read_text())["prompts"]
    for p, r in zip(prompts, raw, strict=True):
        assert set(p["validators"]) == {t["function"]["name"] for t in r["tools"]}
        assert p["messages"][0]["content"] == r["meta"]["system_for_tools_param"]
        assert "Available tools" not in p["messages"][0]["content"]


# ---------------------------------------------------------------- shared helpers


def test_percentile_and_speed_block():
    assert evalclient.percentile([], 50) is None
    assert evalclient.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert evalclient.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    R = evalclient.Reply
    speed = evalclient.speed_block([R(True, 1.0, 200, completion_tokens=10), R(True, 3.0, 200, completion_tokens=30),
                                    R(False, 0.5, 500, error="x")], wall_s=4.0)
    assert SPEED_KEYS <= set(speed)
    assert (speed["completed_requests"], speed["failed_requests"], speed["output_tokens_total"]) == (2, 1, 40)
    assert (speed["latency_mean_s"], speed["throughput_qps"], speed["output_tok_per_s"]) == (2.0, 0.5, 10.0)


def test_extra_body_must_be_a_json_object():
    parser = evalclient.build_parser("x", max_tokens=8, output_dir="out")
    assert parser.parse_args(["--extra-body", '{"ignore_eos": false}']).extra_body == {"ignore_eos": False}
    for bad in ("[1]", "not json"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--extra-body", bad])


def test_extra_body_overrides_and_removes_fields():
    parser = evalclient.build_parser("x", max_tokens=8, output_dir="out")
    args = parser.parse_args(["--extra-body", '{"ignore_eos": false, "max_tokens": 3, "seed": null}'])
    body = evalclient.chat_body(args, [{"role": "user", "content": "hi"}], tool_choice="auto")
    assert body["ignore_eos"] is False and body["max_tokens"] == 3 and "seed" not in body
    assert body["model"] == "tiny" and body["stream"] is False and body["tool_choice"] == "auto"


def test_results_are_written_atomically(tmp_path):
    path = tmp_path / "out" / "x_results.json"
    evalclient.write_json_atomic(path, {"a": 1})
    evalclient.write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["x_results.json"]


@pytest.mark.parametrize("script", ["benchmark_arith.py", "benchmark_toolcall.py"])
def test_unreachable_server_fails_fast_with_a_reason(tmp_path, script):
    port = free_port()  # bound and released: nothing listens there
    started = time.monotonic()
    proc = run_client(script, "--port", str(port), "--server-wait-s", "0.2", "--output-dir", str(tmp_path), timeout=30)
    assert proc.returncode == evalclient.EXIT_UNREACHABLE, proc.stderr
    assert f"could not reach the server at http://127.0.0.1:{port}" in proc.stderr
    assert time.monotonic() - started < 15
    assert not list(tmp_path.iterdir()), "no result file for a run that never started"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@pytest.mark.parametrize("module", [arith, toolcall], ids=["arith", "toolcall"])
def test_docstring_tables_name_json_keys(module):
    """Every reference table is a valid pipe table; metric columns are keys of the JSON block named
    by the section line above it; every row is one a refresh wrote (its Source cell's grammar)."""
    doc = module.__doc__
    assert "\nReference Results\n" in doc and "NOT CI thresholds" in doc
    assert "@" not in doc, "a placeholder was left in the tables"
    blocks = {"Accuracy (summary)": "summary", "Validity (summary)": "summary", "Speed (speed)": "speed"}
    keys = {"summary": ARITH_KEYS | TOOLCALL_KEYS, "speed": SPEED_KEYS}
    lines = doc.splitlines()
    tables = 0
    for i, line in enumerate(lines):
        if not line.startswith("| Model"):
            continue
        tables += 1
        header = _cells(line)
        assert header[:2] == ["Model", "Config"] and header[-1] == "Source"
        assert all(set(c) == {"-"} for c in _cells(lines[i + 1])) and len(_cells(lines[i + 1])) == len(header)
        rows = []
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            rows.append(_cells(row))
        assert rows and all(len(r) == len(header) for r in rows)
        assert lines[i - 1] == "", "a blank line between the section line and its table"
        section = lines[i - 2]
        assert section in blocks, f"only tables a refresh edits ship: {section!r}"
        assert set(header[2:-1]) <= keys[blocks[section]], (section, header)
        assert rows[0][:2] == ["tiny", "llamacpp, c=4"]
        # Source cells are rewritten by every refresh: check their grammar, not one run's prefix.
        for row in rows:
            assert re.fullmatch(r"(PR #\d+|(main|local|dirty) [0-9a-f]{7}) \[Intel Xeon, n=50, c=4\]", row[-1]), row
    assert tables == 2


# ---------------------------------------------------------------- against a real llama-server


def _serve(exe: str, tmp: Path, *extra: str) -> ServerProcess:
    from bench.setup.tinymodel import ensure_tiny_model

    port = free_port()
    argv = [exe, "-m", str(ensure_tiny_model().gguf_path), "--host", "127.0.0.1", "--port", str(port),
            "--parallel", "2", "-c", "32768", "--no-webui", "--alias", "tiny", *extra]
    server = ServerProcess(ServeCommand(argv=argv), host="127.0.0.1", port=port, ready_path="/health",
                           startup_timeout_s=60, log_path=tmp / f"llama-server-{port}.log")
    server.start()
    return server


@pytest.fixture(scope="module")
def tiny_server(llama_server, tmp_path_factory):
    """llama-server on the tiny model with Jinja on (the tools parameter needs it), 2 slots x 16K."""
    server = _serve(llama_server, tmp_path_factory.mktemp("eval-server"), "--jinja")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _result(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}_results.json").read_text())


@pytest.mark.integration
def test_arith_client_against_llama_server(tiny_server, tmp_path):
    proc = run_client("benchmark_arith.py", "--model", "tiny", "--port", str(tiny_server.port), "--max-samples", "8",
                      "--concurrency", "2", "--max-tokens", "32", "--output-dir", str(tmp_path),
                      "--extra-body", '{"ignore_eos": false}')
    assert proc.returncode == 0, proc.stderr
    assert "accuracy" in proc.stdout
    result = _result(tmp_path, "arith")
    assert set(result) == {"summary", "speed", "config", "per_sample"}
    s, speed = result["summary"], result["speed"]
    assert ARITH_KEYS <= set(s) and SPEED_KEYS <= set(speed)
    assert s["total_samples"] == 8 and len(result["per_sample"]) == 8
    assert s["correct"] + s["wrong"] == s["total_samples"]
    assert s["parseable_samples"] + s["unparseable_samples"] == s["total_samples"]
    assert s["failed_requests"] == 0 and speed["completed_requests"] == 8
    assert 0 < speed["output_tokens_total"] <= 8 * 32
    assert speed["latency_p50_s"] <= speed["latency_p95_s"]
    assert result["config"]["dataset_size"] == 200 and result["config"]["extra_body"] == {"ignore_eos": False}
    assert all(p["correct"] == (p["prediction"] == p["answer"]) for p in result["per_sample"])


@pytest.mark.integration
@pytest.mark.parametrize("choice, n", [("required", 8), ("auto", 4)])
def test_toolcall_client_against_llama_server(tiny_server, tmp_path, choice, n):
    proc = run_client("benchmark_toolcall.py", "--model", "tiny", "--port", str(tiny_server.port),
                      "--max-samples", str(n), "--concurrency", "2", "--max-tokens", "32",
                      "--tool-choice", choice, "--output-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = _result(tmp_path, "toolcall")
    s, speed = result["summary"], result["speed"]
    assert TOOLCALL_KEYS <= set(s) and SPEED_KEYS <= set(speed)
    assert s["total_samples"] == n and len(result["per_sample"]) == n
    assert s["failed_requests"] == 0 and speed["completed_requests"] == n
    funnel = [s[f"{lv}_samples"] for lv in toolcall.LEVELS]
    assert funnel == sorted(funnel, reverse=True) and funnel[0] <= n
    assert s["valid_rate"] <= s["schema_valid_rate"] <= s["json_args_rate"] <= s["known_name_rate"] \
        <= s["tool_call_rate"] <= 1
    assert result["config"]["tool_choice"] == choice and result["config"]["dataset_size"] == 100
    assert speed["prompt_tokens_total"] > n * 400, "the agent conversations were sent whole"


@pytest.mark.integration
def test_toolcall_without_jinja_fails_every_request(llama_server, tmp_path):
    server = _serve(llama_server, tmp_path, "--no-jinja")
    try:
        server.wait_ready()
        proc = run_client("benchmark_toolcall.py", "--port", str(server.port), "--max-samples", "2",
                          "--output-dir", str(tmp_path))
    finally:
        server.stop()
    assert proc.returncode == evalclient.EXIT_ALL_FAILED
    assert "every request failed" in proc.stderr and "requires --jinja" in proc.stderr
    assert _result(tmp_path, "toolcall")["summary"]["failed_requests"] == 2


@pytest.mark.parametrize("values, shown", [([4, 4], 4), ([4, 5, 4], 4.3), ([0.25, 0.5], 0.375), ([True, False], 0.5)])
def test_a_mean_of_counts_is_a_clean_number(values, shown):
    from statistics import fmean

    from bench.eval.row import clean_mean

    assert clean_mean({"values": values, "mean": fmean(values)}) == shown
    assert type(clean_mean({"values": values, "mean": fmean(values)})) is type(shown)


def test_asr_gpu_is_a_leased_gpu_beyond_the_servers_else_cpu(tmp_path):
    """`{asr_gpu}` in a client (sglang-omni's runner format): the GPU the lease took beyond the
    server's, as `cuda:N`; `cpu` when the pool had none left."""
    from bench.eval.config.schema import CellSpec, EvalRow, Locate, ServerProfile
    from bench.eval.row import RowContext, _asr_device

    row = EvalRow(id="r", file=tmp_path / "b.py", hf_model_id="m",
                  server_profile=ServerProfile(name="p", framework="sglang_omni", server_gpus=2),
                  locate=Locate("A", "B", "c=1"), client=("python", "c.py", "--device", "{asr_gpu}"),
                  result_json="r.json", cells={"a": CellSpec({"v": "a"}, "{v}")})
    assert row.wants_asr_gpu
    ctx = RowContext(run_dir=tmp_path, repo_root=tmp_path, auto_env={}, gpus=(4, 5, 7))
    assert _asr_device(row, ctx) == "cuda:7"
    assert _asr_device(row, RowContext(run_dir=tmp_path, repo_root=tmp_path, auto_env={}, gpus=(4, 5))) == "cpu"


def test_a_router_row_starts_sglang_omni_from_the_clients_environment(tmp_path, monkeypatch):
    """A profile in sglang-omni's runner format, on a CUDA machine: the router runs on the Python
    the eval resolved (`--venv-python`, `$EVAL_VENV_PYTHON` or the config's default_venv_python),
    leased GPUs in CUDA_VISIBLE_DEVICES, the profile's knobs and this machine's extra arguments
    in the launcher file, and the venv first on PATH."""
    import yaml

    import bench.setup.adapter as adapter_module
    from bench.eval.config.schema import CellSpec, EvalRow, Locate, ServerProfile
    from bench.eval.row import RowContext, _Server

    monkeypatch.setattr(adapter_module, "host_platforms", lambda: ("linux-x86_64+cuda", "linux-x86_64"))
    profile = ServerProfile(name="omni_router", framework="sglang_omni", server_gpus=2, boot_timeout_s=660,
                            options={"model_name": "qwen3-omni", "num_workers": 2, "num_gpus_per_worker": 1,
                                     "worker_extra_args": "--config {repo_root}/examples/omni.yaml"})
    row = EvalRow(id="mmsu", file=tmp_path / "b.py", hf_model_id="Qwen/Qwen3-Omni-30B-A3B-Instruct",
                  server_profile=profile, locate=Locate("A", "B", "c=8"), client=("python", "c.py"),
                  result_json="r.json", cells={"a": CellSpec({"v": "a"}, "{v}")},
                  server_extra_by_hardware={"H200": "--mem-fraction 0.8"})
    python = "/venvs/omni/bin/python"
    ctx = RowContext(run_dir=tmp_path, repo_root=Path("/src/omni"), auto_env={}, python=python, hardware="H200",
                     gpus=(3, 5, 6))
    server = _Server(row, ctx)
    assert server.install.executable("python") == python and server.adapter.startup_timeout_s == 660
    assert server.model.served_id == "qwen3-omni" and str(server.model.path) == "Qwen/Qwen3-Omni-30B-A3B-Instruct"
    command = server.command(8123, tmp_path / "round_1")
    assert command.argv[:3] == [python, "-m", "sglang_omni_router.python.serve"]
    assert command.env["CUDA_VISIBLE_DEVICES"] == "3,5" and command.env["PATH"].startswith("/venvs/omni/bin:")
    launcher = yaml.safe_load(command.files[tmp_path / "round_1" / "launcher.yaml"])["launcher"]
    assert launcher["worker_extra_args"] == "--config /src/omni/examples/omni.yaml --mem-fraction 0.8"
    assert launcher["model_path"] == "Qwen/Qwen3-Omni-30B-A3B-Instruct" and launcher["model_name"] == "qwen3-omni"
    assert command.group_manifest == tmp_path / "round_1" / "router_pgids.txt"
