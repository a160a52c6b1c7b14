"""API keys: `--api-key`, else OPENAI_API_KEY, else a profile's `api_key_env`, sent to real servers.

Each session here is a real `pytest` run in a subprocess, as a user runs cellbench: against the
suite's fault server in its `ready_401` mode (401 on every path without the right key), started
from a profile's `openai.command` or named by `--endpoint` (tests/run/test_faults.py's helpers), and
against the real llama-server given a key in LLAMA_API_KEY (its /health stays open without a key, so
its cells fail at the requests, not at readiness). Each checks the verdict and reason a user reads,
and that the key appears in no file the session wrote (results, request log, journal, REPORT.md,
HTML report, server logs, the host lock) and nowhere in its output.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil
import pytest

from bench.base.paths import PROJECT_ROOT, cache_root
from bench.core.client_settings import ClientSettings
from bench.core.result.files import new_run_id, validate
from bench.core.verdicts import Evidence, Verdict, classify
from bench.run.cell import CellConfig, run_cell
from bench.run.config import LoadSettings, ServerSettings
from bench.setup import profiles
from tests.run.test_faults import Case, Fault, check_journal, check_nothing_left, endpoint_server, session_argv
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S, assert_ok_unless_client_limited

WANTS_KEY = "it wants an API key; pass --api-key KEY or set OPENAI_API_KEY"
INVALID = ('(HTTP 401 Unauthorized: {"error": {"message": "Invalid API Key", "type": "authentication_error", '
           '"code": 401}})')


def new_key() -> str:
    return f"ck-{secrets.token_hex(12)}"


# ------------------------------------------------------------------ where the key comes from


def _profile(tmp_path: Path, extra: str = "") -> profiles.ModelProfile:
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\nresults_name: p\nbuiltin: tiny\nformats: {{gguf: {{served_id: tiny}}}}\n{extra}")
    return profiles.load_profile(str(path))


def test_the_key_comes_from_the_option_then_openai_api_key_then_the_profile(tmp_path):
    keyed = _profile(tmp_path, "api_key_env: MY_SERVER_KEY\n")
    env = {"OPENAI_API_KEY": "from-env", "MY_SERVER_KEY": "from-profile"}
    assert profiles.api_key("given", env, keyed) == profiles.ApiKey("given", "--api-key")
    assert profiles.api_key(None, env, keyed) == profiles.ApiKey("from-env", "OPENAI_API_KEY")
    assert profiles.api_key(None, {**env, "OPENAI_API_KEY": ""}, keyed) == profiles.ApiKey(
        "from-profile", "$MY_SERVER_KEY (the profile's api_key_env)")
    assert profiles.api_key(None, {}, _profile(tmp_path)) is None
    assert "from-env" not in repr(profiles.api_key(None, env, keyed))  # a traceback never shows it


def test_a_profile_naming_its_key_instead_of_a_variable_is_refused_without_echoing_it(tmp_path):
    with pytest.raises(profiles.ProfileError, match="must be the name of an environment variable") as err:
        _profile(tmp_path, "api_key_env: sk-abc.def/123\n")
    assert "sk-abc.def/123" not in str(err.value)


def test_all_failed_on_401_says_the_server_wants_a_key_and_how_to_give_one():
    level = {"concurrency": 1, "successful": 0, "failed": 4, "served_models": [],
             "dominant_error": {"type": "http_4xx", "http_status": 401, "count": 4}}
    verdict = classify(Evidence(levels=(level,)))  # the fields classify reads
    assert verdict.verdict is Verdict.ALL_FAILED
    assert verdict.reason == ("4/4 requests failed, mostly http_4xx 401 (4x): the server answered HTTP 401 "
                              f"Unauthorized: {WANTS_KEY}")
    refused = classify(Evidence(levels=(level,), api_key_from="--api-key"))
    assert refused.reason.endswith("the server answered HTTP 401 Unauthorized to the API key from --api-key: it "
                                   "refused that key; pass the right one with --api-key KEY")


# ------------------------------------------------------------------ the fault server's ready_401, both forms


@dataclass
class OwnCase(Case):
    """A test_faults case with an expectation of its own (ready_401 is not in that matrix)."""

    spec: Fault = field(default_factory=lambda: Fault("ok", ""))
    key: str = field(default_factory=new_key)

    @property
    def fault(self) -> Fault:
        return self.spec


def run_session(case: OwnCase, *args: str, env: dict[str, str] | None = None) -> OwnCase:
    """One real pytest session of the openai cell (its own cache, so its own host lock)."""
    case.directory.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if case.form == "endpoint":
            case.port = stack.enter_context(endpoint_server(case))
        clean = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        proc = subprocess.run([*session_argv(case), *args], cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300,
                              env={**clean, "CELLBENCH_CACHE": str(case.directory / "cache"), **(env or {})})
    case.output, case.returncode = proc.stdout + proc.stderr, proc.returncode
    return case


def assert_key_nowhere(key: str, output: str, *roots: Path, since: float | None = None) -> int:
    """The key is in no file under `roots` (those changed since `since`, when given) nor in
    `output`; returns how many files were read."""
    assert key not in output, "the key is in the session's output"
    read = 0
    for root in roots:
        for path in root.rglob("*"):
            if not path.is_file() or (since is not None and path.stat().st_mtime < since):
                continue
            read += 1
            assert key.encode() not in path.read_bytes(), f"the key is in {path}"
    return read


def ready_401(tmp_path: Path, form: str, server_key: str | None, expect: Fault) -> OwnCase:
    """A ready_401 case: the server wants `server_key` ("{api_key}": the one cellbench is given)."""
    case = OwnCase("ready_401", form, tmp_path / form, spec=expect)
    key = case.key if server_key == "{api_key}" and form == "endpoint" else server_key
    case.spec = replace(expect, server_args=("--api-key", key) if key else ())
    return case


def check_key_case(case: OwnCase, verdict: str, reason: str) -> dict:
    check_nothing_left(case)
    (path,) = sorted(case.results.glob("fault/*/chat/openai_*.json"))
    result = json.loads(path.read_text())
    validate(result)
    got = f"{result['verdict']}\n{case.tail()}"
    assert result["verdict"]["verdict"] == verdict, got
    reason = reason.replace(re.escape("{port}"), "{port}").replace("{port}", str(case.port))
    assert re.search(reason, result["verdict"]["reason"]), got
    assert case.returncode == (0 if verdict == "ok" else 1), got
    check_journal(case, result)
    return result


@pytest.mark.integration
def test_ready_401_started_without_a_key_fails_at_once_saying_how_to_give_one(tmp_path):
    """The server's command holds a key cellbench was not given: its ready path answers 401, and the
    cell ends at once (no wait makes a 401 a 200) with the status and body it got."""
    case = run_session(ready_401(tmp_path, "command", "only-the-server-knows", Fault("failed", "")))
    result = check_key_case(case, "failed", re.escape(
        f"server not ready on /v1/models: the server answered HTTP 401 Unauthorized: {WANTS_KEY} {INVALID}; log: "))
    assert result["levels"] == []


@pytest.mark.integration
def test_ready_401_started_with_the_key_in_its_command_runs_ok_and_the_key_is_recorded_nowhere(tmp_path):
    case = ready_401(tmp_path, "command", "{api_key}", Fault("ok", ""))
    run_session(case, f"--api-key={case.key}", "--html", str(case.results / "report.html"))
    result = check_key_case(case, "ok", r"^18/18 requests ok")
    (server, *_) = result["servers"]
    assert server["command"]["argv"][-2:] == ["--api-key", "***"], server["command"]
    logs = sorted(case.results.rglob("*.server.log"))
    assert logs and all("--api-key ***" in log.read_text().splitlines()[0] for log in logs)
    assert (case.results / "report.html").is_file() and (case.directory / "cache" / "host.lock").is_file()
    assert assert_key_nowhere(case.key, case.output, case.results, case.directory / "cache") >= 8


@pytest.mark.integration
def test_a_profile_whose_command_wants_the_key_is_a_usage_error_without_one(tmp_path):
    case = run_session(ready_401(tmp_path, "command", "{api_key}", Fault("failed", "")))
    assert case.returncode == pytest.ExitCode.USAGE_ERROR, case.tail()
    assert case.output.strip().splitlines()[-1] == (
        f"ERROR: --model {case.directory / 'fault-ready_401.yaml'}: its openai.command gives the server {{api_key}}, "
        "and no API key was given: pass --api-key KEY or set OPENAI_API_KEY")
    assert not case.results.exists() and not case.server_pids(), "nothing ran"


@pytest.mark.integration
def test_ready_401_endpoint_without_a_key_fails_at_once_saying_how_to_give_one(tmp_path):
    case = run_session(ready_401(tmp_path, "endpoint", "{api_key}", Fault("failed", "")))
    reason = "endpoint http://127.0.0.1:{port} not ready on /v1/models: the server answered HTTP 401 Unauthorized: "
    check_key_case(case, "failed", "^" + re.escape(f"{reason}{WANTS_KEY} {INVALID}") + "$")


@pytest.mark.integration
def test_ready_401_endpoint_with_a_wrong_key_says_which_key_it_refused(tmp_path):
    case = run_session(ready_401(tmp_path, "endpoint", "{api_key}", Fault("failed", "")), "--api-key=not-it")
    check_key_case(case, "failed", re.escape("the server answered HTTP 401 Unauthorized to the API key from "
                                             "--api-key: it refused that key; pass the right one with --api-key KEY"))


@pytest.mark.integration
@pytest.mark.parametrize("given", ["option", "OPENAI_API_KEY"])
def test_ready_401_endpoint_with_the_key_runs_ok_and_the_key_is_recorded_nowhere(tmp_path, given):
    case = ready_401(tmp_path, "endpoint", "{api_key}", Fault("ok", ""))
    if given == "option":
        run_session(case, f"--api-key={case.key}")
    else:
        run_session(case, env={"OPENAI_API_KEY": case.key})
    check_key_case(case, "ok", r"^18/18 requests ok")
    assert assert_key_nowhere(case.key, case.output, case.results, case.directory / "cache") >= 6


# ------------------------------------------------------------------ the key across client processes


@pytest.mark.integration
def test_the_key_goes_with_the_requests_of_every_client_process(tmp_path, monkeypatch):
    """A level split over two client processes: the LevelConfig, its headers with it, crosses into
    each worker, so every request (the parent's warm-up and both workers' shares) carries the key."""
    from bench.host.ports import free_port
    from bench.load import LevelConfig
    from bench.load.procs import ProcPlan, run_level_procs
    from tests.run.test_server import fault_server
    from tests.support.procs_driver import prompts

    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))
    key = profiles.ApiKey(new_key(), "--api-key")
    server = fault_server(tmp_path, free_port(), "--mode", "ready_401", "--api-key", key.value, api_key=key)
    server.start()
    try:
        server.wait_ready()
        runs = {}
        for name, headers in (("with", key.headers), ("without", {})):
            cfg = LevelConfig(base_url=server.base_url, model="tiny", concurrency=4, requests=8, warmup=1,
                              headers=headers)
            runs[name] = run_level_procs(cfg, prompts(4, 8), prompts(1, 8, "w"), ProcPlan(2, (None, None), "test"))
    finally:
        server.stop(grace_s=5)
    with_key, without = runs["with"], runs["without"]
    assert with_key.client.procs == 2 and without.client.procs == 2
    assert [r.ok for r in [*with_key.warmup_records, *with_key.records]] == [True] * 9
    assert {r.http_status for r in [*without.warmup_records, *without.records]} == {401}
    assert key.value not in repr(with_key.config)


# ------------------------------------------------------------------ the real llama-server with a key


def _cfg(tmp_path: Path) -> CellConfig:
    return CellConfig(framework="llamacpp", split="chat", profile=profiles.load_profile("tiny"),
                      results_root=tmp_path / "results", run_id=new_run_id(),
                      load=LoadSettings(concurrency=(1,), requests=4, warmup=0), server=ServerSettings(port=0),
                      client=ClientSettings(request_timeout_s=600))


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_llama_server_with_a_key_the_cell_lacks_is_all_failed_saying_how_to_give_it(tmp_path, server_launcher,
                                                                                    llama_server):
    """llama-server started with a key keeps /health open: the cell gets as far as its requests,
    every one answered 401, and the verdict says what to do."""
    key = new_key()

    def launch_with_a_key(command, adapter, host, port, log_path, **options):
        keyed = replace(command, env={**command.env, "LLAMA_API_KEY": key}, secrets=(key,))
        return server_launcher(keyed, adapter, host, port, log_path, **options)

    outcome = run_cell(_cfg(tmp_path), launch_with_a_key)
    assert outcome.verdict.verdict is Verdict.ALL_FAILED, outcome.verdict.reason
    assert outcome.verdict.reason == (
        f"4/4 requests failed, mostly http_4xx 401 (4x): the server answered HTTP 401 Unauthorized: {WANTS_KEY}")


def run_llamacpp_session(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "llamacpp",
           f"--results-dir={tmp_path / 'results'}", "--host-lock-timeout", str(HOST_LOCK_WAIT_S),
           "--concurrency", "1", "--requests", "4", "--warmup", "1", "--port", "0", "--progress-interval", "0",
           "--html", str(tmp_path / "results" / "report.html"), *args]
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S,
                          env={**clean, **env})


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
@pytest.mark.parametrize("given", ["option", "OPENAI_API_KEY"])
def test_llama_server_given_the_key_runs_ok_and_the_key_is_recorded_nowhere(tmp_path, llama_server, given):
    key, started = new_key(), time.time()
    if given == "option":
        proc = run_llamacpp_session(tmp_path, f"--api-key={key}", env={})
    else:
        proc = run_llamacpp_session(tmp_path, env={"OPENAI_API_KEY": key})
    output = proc.stdout + proc.stderr
    (path,) = sorted(p for p in (tmp_path / "results").rglob("llamacpp_*.json"))
    result = json.loads(path.read_text())
    validate(result)
    assert_ok_unless_client_limited(result["verdict"], output[-3000:])
    assert proc.returncode == 0, output[-3000:]
    (server,) = result["servers"]
    assert server["command"]["env"]["LLAMA_API_KEY"] == "***" and "--api-key" not in server["command"]["argv"]
    assert result["levels"][0]["successful"] == 4
    assert (tmp_path / "results" / "report.html").is_file()
    # Every file under the results folder, and what the session changed in the cache (its host lock).
    assert assert_key_nowhere(key, output, tmp_path / "results") >= 6
    assert_key_nowhere(key, "", cache_root(), since=started - 1)



@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_cellbench_serve_starts_llama_server_with_the_key_as_a_cell_does_and_shows_it_nowhere(tmp_path, llama_server):
    import httpx

    key, log = new_key(), tmp_path / "server.log"
    clean = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", "serve", "llamacpp", "--port", "0", "--log", str(log)],
                            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**clean, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": key})
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while not any("is ready at" in line for line in lines):
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        url = next(line for line in lines if "is ready at" in line).split("is ready at ")[1].split()[0]
        server = next(p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "llama-server")
        assert key not in " ".join(server.cmdline()), "an argv is world-readable: the key goes in LLAMA_API_KEY"
        assert server.environ()["LLAMA_API_KEY"] == key
        asked = {"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{url}/v1/chat/completions", json=asked, timeout=60).status_code == 401
        keyed = httpx.post(f"{url}/v1/chat/completions", json=asked, timeout=60,
                           headers={"Authorization": f"Bearer {key}"})
        assert keyed.status_code == 200, keyed.text
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert_key_nowhere(key, "".join(lines) + out, tmp_path)
