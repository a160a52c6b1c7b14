"""The generic `openai` adapter for real: an already-running server named by `--endpoint`, and a
server started from a command in a model profile, both a llama-server on the built-in tiny model.

The endpoint's llama-server is this test's own process (its own process group, stopped in a
`finally`); the cell must run its levels against it without starting or stopping anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.files import new_run_id, validate
from bench.core.verdicts import Verdict
from bench.host.ports import free_port
from bench.run.cell import CellConfig, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.setup import model_files, profiles
from tests.support.busy import assert_ok_unless_client_limited

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
# The built-in tiny model with `ignore_eos` sent as a plain request field: the generic adapter never
# sends it by itself, and a random model otherwise ends some answers on their first token.
TINY_FOR_OPENAI = """\
name: tiny-openai
results_name: tiny-openai
builtin: tiny
sampling: {{temperature: 1.0, ignore_eos: true}}
formats:
  gguf: {{served_id: tiny}}
{extra}"""


@pytest.fixture
def endpoint(llama_server, tmp_path):
    """A llama-server serving the tiny GGUF as `tiny`, started and stopped by this test alone."""
    gguf = model_files.resolve(profiles.load_profile("tiny"), "gguf").path
    port = free_port(HOST)
    log = (tmp_path / "endpoint.log").open("wb")
    proc = subprocess.Popen(
        [llama_server, "-m", str(gguf), "--host", HOST, "--port", str(port), "--alias", "tiny",
         "--parallel", "2", "-c", "8192", "--no-webui"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"llama-server exited: {(tmp_path / 'endpoint.log').read_text()[-2000:]}"
            try:
                if httpx.get(f"http://{HOST}:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "llama-server not ready after 60 s"
            time.sleep(0.2)
        yield proc, f"http://{HOST}:{port}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass
        log.close()


def write_profile(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "tiny-openai.yaml"
    path.write_text(TINY_FOR_OPENAI.format(extra=extra))
    return path


def run_pytest(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--results-dir={tmp_path / 'results'}", *args]
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, check=False)


def only_result(tmp_path: Path) -> dict:
    (path,) = sorted(p for p in (tmp_path / "results").rglob("openai_*.json"))
    data = json.loads(path.read_text())
    validate(data)
    return data


def test_endpoint_runs_the_levels_against_a_running_server(endpoint, tmp_path):
    proc, url = endpoint
    profile = write_profile(tmp_path)
    out = run_pytest("-m", "chat", "-v", f"--endpoint={url}/v1", f"--model={profile}", "--requests", "6",
                     "--concurrency", "1,2", "--warmup", "1", tmp_path=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    result = only_result(tmp_path)
    verdict = assert_ok_unless_client_limited(result["verdict"], "endpoint cell")
    assert f"test_cell[openai-chat] {verdict.upper()}" in out.stdout
    assert f"1 {'passed' if verdict == 'ok' else verdict}" in out.stdout
    assert "llamacpp" not in out.stdout, "with --endpoint only the generic adapter's cells exist"
    assert result["framework"]["name"] == "openai" and result["framework"]["install_source"] == "--endpoint"
    assert result["framework"]["version_source"] == "server: GET /props" and result["framework"]["version"]
    assert 0 <= result["servers"][0].pop("ready_after_s") < 60  # the endpoint was waited for, and was ready
    assert result["servers"] == [{
        "levels": [1, 2], "external": url,
        "reported_version": {"path": "/props", "version": result["framework"]["version"]},
        "exit": {"returncode": None, "signal": None, "stopped_by_us": False},
    }]
    assert result["run_config"]["levels_share_server"] is True
    assert result["model"]["requested"] == "tiny" and result["model"]["path"] is None
    assert result["model"]["served"] == {"listed": ["tiny"], "responses": ["tiny"]}
    assert [level["successful"] for level in result["levels"]] == [6, 6]
    assert proc.poll() is None, "the cell must not stop a server it did not start"


def test_profile_command_starts_checks_and_stops_the_server(llama_server, tmp_path):
    command = [llama_server, "-m", "{model_path}", "--host", "{host}", "--port", "{port}", "--alias", "tiny",
               "-c", "8192", "--no-webui"]
    profile = write_profile(tmp_path, f"openai: {{command: {json.dumps(command)}, ready_path: /health}}\n")
    out = run_pytest("-m", "chat", "-k", "openai", f"--model={profile}", "--port", "0", "--requests", "4",
                     "--concurrency", "2", "--warmup", "1", tmp_path=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    result = only_result(tmp_path)
    assert_ok_unless_client_limited(result["verdict"], "profile-command cell")
    (server,) = result["servers"]
    gguf = str(model_files.resolve(profiles.load_profile("tiny"), "gguf").path)
    assert server["command"]["argv"] == [llama_server, "-m", gguf, "--host", HOST, "--port", str(server["port"]),
                                         "--alias", "tiny", "-c", "8192", "--no-webui"]
    assert server["exit"]["stopped_by_us"] is True
    assert result["framework"]["install_source"] == f"{profile}: openai.command"
    assert result["model"]["path"] == gguf


def _fail_launch(*args):
    raise AssertionError("nothing may be started")


def test_without_a_command_or_endpoint_the_cell_says_how_to_give_one(tmp_path):
    cfg = CellConfig(framework="openai", split="chat", profile=profiles.load_profile("tiny"),
                     results_root=tmp_path, run_id=new_run_id())
    outcome = run_cell(cfg, _fail_launch)
    assert outcome.verdict.verdict is Verdict.SKIPPED and outcome.result_path is None
    assert "openai: {command: [...]}" in outcome.verdict.reason
    assert "--endpoint http://127.0.0.1:PORT" in outcome.verdict.reason


def test_an_endpoint_that_does_not_answer_fails_the_cell_with_a_result(tmp_path):
    url = f"http://{HOST}:{free_port(HOST)}"
    cfg = CellConfig(framework="openai", split="chat", profile=profiles.load_profile("tiny"),
                     results_root=tmp_path, run_id=new_run_id(), load=LoadSettings(concurrency=(1,), requests=2),
                     server=ServerSettings(endpoint=url, ready_timeout_s=1.0))
    outcome = run_cell(cfg, _fail_launch)
    assert outcome.verdict.verdict is Verdict.FAILED
    assert outcome.verdict.reason.startswith(
        f"endpoint {url} not ready on /v1/models after 1 s: last GET /v1/models: ConnectError")
    validate(outcome.result)
    assert outcome.result["servers"][0]["external"] == url and "start_error" in outcome.result["servers"][0]


@pytest.mark.parametrize("bad", ["ftp://127.0.0.1:80", "127.0.0.1:8080", "http://127.0.0.1", "http://127.0.0.1:8080/api"])
def test_a_bad_endpoint_is_a_usage_error(pytester: pytest.Pytester, bad):
    pytester.makepyfile(test_nothing="def test_nothing(): pass\n")
    result = pytester.runpytest("-p", "bench.plugins.cells", f"--endpoint={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--endpoint takes a server's base URL such as http://127.0.0.1:8080*"])


# ------------------------------------------------------------------ request options, in both forms


def _bodies(log_paths: list[Path]) -> list[dict]:
    """The chat request bodies the fault server logged (`--log-bodies`), in arrival order per log."""
    return [json.loads(line.removeprefix("body ")) for path in log_paths
            for line in path.read_text().splitlines() if line.startswith("body ")]


def _first_text(body: dict) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def test_every_request_option_reaches_an_endpoint_cell_as_a_started_one(tmp_path):
    """--ignore-eos, --unique-prompts and --tools-param shape the body the server receives in both
    forms alike (the fault server logs every body it got): --ignore-eos once reached only started
    servers of frameworks known to take it."""
    from tests.run.test_api_keys import OwnCase, run_session
    from tests.run.test_faults import Fault
    from tests.support.faultserver import MODES

    assert "ok" in MODES
    options = ("-m", "chat or agent", "--ignore-eos", "--unique-prompts", "--tools-param")
    seen: dict[str, dict[str, list[dict]]] = {}
    for form in ("command", "endpoint"):
        case = OwnCase("ok", form, tmp_path / form, spec=Fault("ok", "", server_args=("--log-bodies",), requests=2))
        run_session(case, *options)
        assert case.returncode == 0, case.tail()
        logs = sorted(case.results.rglob("*.server.log")) if form == "command" else [case.directory / "endpoint.log"]
        by_split: dict[str, list[dict]] = {"chat": [], "agent": []}
        for body in _bodies(logs):
            by_split["agent" if "tools" in body else "chat"].append(body)
        assert [len(by_split[s]) for s in ("chat", "agent")] == [2 * 2 + 2] * 2, case.tail()  # 1 warm-up per level
        for split, bodies in by_split.items():
            for body in bodies:
                assert body["ignore_eos"] is True and body["stream"] is True, body
                assert body["stream_options"] == {"include_usage": True} and body["model"] == "tiny", body
                assert body["temperature"] == 1.0 and isinstance(body["max_tokens"], int), body
                assert _first_text(body).startswith("[cellbench "), body["messages"][0]
            assert len({_first_text(b) for b in bodies}) == len(bodies), f"{split}: a prompt repeated"
        seen[form] = by_split
    for split in ("chat", "agent"):
        started, endpoint = seen["command"][split], seen["endpoint"][split]
        assert all(sorted(b) == sorted(started[0]) for b in [*started, *endpoint]), split  # the same fields
        same = ("max_tokens", "tools", "ignore_eos", "temperature", "stream_options")  # arrival order may differ
        assert sorted(json.dumps([b.get(k) for k in same]) for b in started) == \
            sorted(json.dumps([b.get(k) for k in same]) for b in endpoint), split
