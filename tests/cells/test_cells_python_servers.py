"""Real cells against the Python servers (mlx-lm, transformers serve, vLLM, vllm-mlx) on the built-in tiny model.

Each framework installs itself into the framework cache on first use (a fresh CI machine pays the
install once), then cellbench runs the way a user runs it, `pytest -m "chat and <fw>"` in a fresh
pytest process, and the test checks what a user relies on: the verdict, the result file against
its schema, the version and the id the server really listed, token counts from the server's own
usage, the protocol facts the adapter declares, and that no server process outlives the test.
Requests and levels are few: on a 2-core machine these servers run at 20-250 tok/s, and vLLM
alone takes 40-90 s to start. The `PipVenv` recipe they install with is checked offline first.
"""

from __future__ import annotations

import ensurepip
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.core.figures.prefix_cache import NOT_SENT
from bench.core.result.files import validate
from bench.setup import model_files, profiles
from bench.setup.adapter import Adapter
from bench.setup.installs.cache import Installation, InstallError, build_log_path, ensure_installed, install_dir
from bench.setup.installs.recipes import PipVenv
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S, assert_ok_unless_client_limited

integration = pytest.mark.integration
pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)  # its real cells may wait for the host lock

# Every process the cellbench run starts inherits this variable, so a leaked server is found by
# it: vLLM renames its engine processes, and another session may run the same framework meanwhile.
RUN_MARK = "CELLBENCH_TEST_RUN"


@pytest.mark.venv
def test_pip_venv_installs_reports_versions_and_removes(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path))
    bundled = ensurepip.version()  # already in a fresh venv: pip resolves it without any index
    recipe = PipVenv(framework="demo", version="1", packages=(f"pip=={bundled}",), executables=("python", "pip"),
                     report=("pip", "setuptools", "no-such-dist"), uninstall=("setuptools",), dirs=("cache/hub",))
    inst = ensure_installed(recipe)
    assert inst.prefix == install_dir(recipe) and Path(inst.executable("python")).is_file()
    assert inst.details["packages"] == {"pip": bundled, "setuptools": None, "no-such-dist": None}
    assert (inst.prefix / "cache" / "hub").is_dir()
    assert f"pip=={bundled}" in Path(inst.details["freeze"]).read_text()
    assert "uninstall -y setuptools" in build_log_path(recipe).read_text()


@pytest.mark.venv
def test_pip_venv_failure_names_the_build_log(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLBENCH_CACHE", str(tmp_path / "cache"))
    recipe = PipVenv(framework="demo", version="1", packages=(str(tmp_path / "no-such-project"),),
                     executables=("python",), report=())
    with pytest.raises(InstallError, match=str(build_log_path(recipe))):
        ensure_installed(recipe)
    assert not (install_dir(recipe) / "install.json").exists()


SEND_CACHED_TOKENS = ("mlx_lm", "vllm")  # usage.prompt_tokens_details.cached_tokens, measured (docs/metrics.md)


@pytest.fixture(scope="module", params=["mlx_lm", "hf_transformers", "vllm", "vllm_mlx"])
def framework(request) -> tuple[Adapter, Installation]:
    adapter = adapters.get(request.param)
    if not adapter.runs_here():
        pytest.skip(f"{adapter.name} runs on {', '.join(sorted(adapter.platforms))}")
    return adapter, ensure_installed(adapter.recipe)  # a fresh machine installs it here, once


def started_by(mark: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.environ().get(RUN_MARK) == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:  # gone meanwhile, or not ours to read
            pass
    return found


def run_pytest(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """cellbench as a user runs it; fails the test if any process it started is still alive."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--results-dir", str(tmp_path / "results"),
           "--host-lock-timeout", str(HOST_LOCK_WAIT_S), *args]
    mark = str(tmp_path)
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S,
                          env={**os.environ, RUN_MARK: mark})
    _, leaked = psutil.wait_procs(started_by(mark), timeout=5)  # SIGKILLed group members may lag a moment
    assert not leaked, f"left running: {[(p.pid, p.info['cmdline']) for p in leaked]}"
    return proc


def only_result(tmp_path: Path, framework: str, split: str) -> tuple[dict, list[dict]]:
    """The one cell result (`<split>/<framework>_<run id>.json`; the run also writes reports) and its requests."""
    (path,) = [p for p in (tmp_path / "results").rglob(f"{framework}_*.json") if p.parent.name == split]
    result = json.loads(path.read_text())
    validate(result)
    records = [json.loads(line) for line in (path.parent / result["requests_file"]).read_text().splitlines()]
    return result, records


def expected_id(adapter: Adapter) -> str:
    """The id the server must list: the profile's, or the one the server gives the model itself."""
    profile = profiles.load_profile("tiny")
    return adapter.model_for_server(model_files.resolve(profile, adapter.model_format)).served_id


@integration
def test_chat_cell_ok_with_server_usage(tmp_path, framework):
    adapter, install = framework
    requests = 6
    # vLLM and transformers: one server for both levels, so the test pays their start-up once (mlx-lm
    # and vllm-mlx keep a server per level, the default).
    shared = ["--share-server"] if adapter.name in ("vllm", "hf_transformers") else []
    # transformers: the fidelity run, on a server of its own (its batching keeps its first request's sampling)
    fidelity = ["--fidelity"] if not adapter.capabilities.sampling_per_request else []
    proc = run_pytest("-m", f"chat and {adapter.name}", "--requests", str(requests), "--concurrency", "1,2",
                      "--warmup", "1", "--port", "0", *shared, *fidelity, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result, records = only_result(tmp_path, adapter.name, "chat")
    # ok, or degraded only because a busy host made the client late: the answers are what is checked
    verdict = assert_ok_unless_client_limited(result["verdict"], f"{adapter.name}-chat")
    assert f"cellbench verdicts: 1 {verdict}" in proc.stdout, proc.stdout[-2000:]
    assert result["split"] == "chat"
    assert result["framework"]["version"] == install.version == adapter.recipe.version
    assert all(result["framework"]["install"]["packages"].values()), "every reported package is installed"
    served = expected_id(adapter)
    assert result["model"]["requested"] == served
    assert result["model"]["served"] == {"listed": [served], "responses": [served]}
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2]

    if fidelity:  # greedy on a fresh server: both passes alike, though the levels before were sampled
        block, own = result["fidelity"], result["servers"][-1]
        assert (own["purpose"], own["levels"]) == ("fidelity", []) and own["exit"]["stopped_by_us"], own
        assert [s["levels"] for s in result["servers"][:-1]] == [[1, 2]], "the levels' shared server, then its own"
        assert block["self"]["identical"] == block["prompts"] == 16, block["self"]
        assert "purpose" not in result["servers"][0] and "error" not in block

    # the KV cache pool the server states in its log, beside each level's peak: vLLM on CPU is given its
    # size (VLLM_CPU_KVCACHE_SPACE, GiB) and says so; the others state none
    reserved = [s.get("reserved") for s in result["servers"]]
    if adapter.reservation is not None:
        given = int(result["servers"][0]["command"]["env"]["VLLM_CPU_KVCACHE_SPACE"]) * 2**30
        assert all(r is not None and r["bytes"] == given and r["what"] == "KV cache" for r in reserved), reserved
        assert all(lv["memory"]["reserved_bytes"] == given for lv in result["levels"]), result["levels"]
    else:
        assert reserved == [None] * len(reserved)
        assert all("reserved_bytes" not in lv["memory"] for lv in result["levels"])

    caps = adapter.capabilities
    assert ("ignore_eos" in result["run_config"]["request_extras"]) == caps.ignore_eos
    for level in result["levels"]:
        ok = [r for r in records if r["concurrency"] == level["concurrency"] and not r["warmup"] and not r["error"]]
        # A random model without ignore_eos ends on its first token in ~1 request of 40: an
        # empty-output failure the "ok" verdict tolerates, so only successes are compared.
        assert len(ok) == level["successful"] > 0
        assert level["usage_available"] and all(r["tokens_source"] == "usage" for r in ok)
        assert level["output_tokens_total"] == sum(r["usage_completion_tokens"] for r in ok)
        assert level["input_tokens_total"] == sum(r["usage_prompt_tokens"] for r in ok)
        if caps.ignore_eos:
            assert all(r["finish_reason"] == "length" for r in ok), \
                "ignore_eos is honoured: every reply runs to max_tokens"
        # prefix-cache hits as the server told each request: measured to be sent by vLLM (asked for
        # by its adapter) and mlx-lm here, not by transformers serve or vllm-mlx, which say unknown
        cache = level["prefix_cache"]
        if adapter.name in SEND_CACHED_TOKENS:
            assert cache["reporting"] == len(ok) and cache["unknown"] is None, cache
            assert cache["cached_tokens"] == sum(r["usage_cached_tokens"] for r in ok)
        else:
            assert (cache["reporting"], cache["hit_share"], cache["unknown"]) == (0, None, NOT_SENT), cache
        if adapter.server_metrics is not None:  # the server's own count (vLLM: /metrics, on by default)
            seen = level["server_metrics"]
            level_records = [r for r in records if r["concurrency"] == level["concurrency"]]  # warm-up included
            assert seen["errors"] == [] and seen["includes_warmup"], seen
            assert seen["counters"]["generated_tokens"] == sum(r["usage_completion_tokens"] or 0 for r in level_records)
            answered = [r for r in level_records if r["usage_completion_tokens"]]
            for histogram in ("ttft", "e2e", "queue"):  # one observation per request the engine finished
                assert seen["histograms"][histogram]["count"] == len(answered), (histogram, seen["histograms"])
            running = seen["gauges"].get("running")  # none for a level shorter than the 2 s between scrapes
            assert running is None or 0 <= running["max"] <= level["concurrency"], seen["gauges"]
            assert level["client"]["limited_by"] != "server", level["client"]  # c <= its batch: nothing queued long
            # its prefix-cache counters count what each request's usage said, warm-up included (the c=2
            # level repeats c=1's prompts on the shared server: hits)
            told = [r for r in level_records if r["usage_prompt_tokens"] is not None]
            assert seen["counters"]["prefix_cache_hits"] == sum(r["usage_cached_tokens"] for r in told)
            assert seen["counters"]["prefix_cache_queries"] == sum(r["usage_prompt_tokens"] for r in told)
            agreement = level["prefix_cache_agreement"]
            assert agreement["agree"] or agreement["why"], agreement


@integration
def test_agent_cell_on_transformers(tmp_path):
    # The agent split on the cheapest of the three: transformers starts in ~8 s and prefills
    # ~4K-token prompts in well under a second (mlx-lm on CPU takes ~10 s each).
    adapter = adapters.get("hf_transformers")
    if not adapter.runs_here():
        pytest.skip("transformers serve does not run here")
    ensure_installed(adapter.recipe)
    proc = run_pytest("-m", "agent and hf_transformers", "--requests", "2", "--concurrency", "2", "--warmup", "1",
                      "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    result, _ = only_result(tmp_path, adapter.name, "agent")
    assert result["split"] == "agent"
    assert_ok_unless_client_limited(result["verdict"], "hf_transformers-agent")
    level = result["levels"][0]
    assert level["input_tokens_total"] / level["successful"] > 1000, "agent prompts are prefill-heavy"
