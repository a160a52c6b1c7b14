"""A SiliconBench user's shell in real pytest sessions: APPLEBENCH_MODEL and APPLEBENCH_RESULTS_SUBDIR
choose the model and the machine's folder where no option or CELLBENCH_MACHINE does, the session
says where it will write before it writes, and `--prompts chat=PATH` gives one split its own file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.files import validate
from bench.host.machine import detect
from bench.host.ports import free_port

STAND_IN = """
import json
from pathlib import Path

def test_cell(cell_config):
    Path(f"{cell_config.split}.json").write_text(json.dumps({
        "profile": cell_config.profile.name, "model_source": cell_config.model_source,
        "prompts": str(cell_config.prompts) if cell_config.prompts else None}))
"""


@pytest.fixture
def shell(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """A pytester directory whose environment has no machine variable of its own; detect() forgets
    this machine before and after, since the variables choose its slug."""
    for name in ("CELLBENCH_MACHINE", "APPLEBENCH_RESULTS_SUBDIR", "APPLEBENCH_MODEL"):
        monkeypatch.delenv(name, raising=False)
    detect.cache_clear()
    yield pytester
    detect.cache_clear()


def _chat_file(where: Path) -> Path:
    path = where / "my_chat.json"  # SiliconBench's own prompt format: a list of entries
    path.write_text(json.dumps([{"name": f"q{i}", "description": "", "max_tokens": 8,
                                 "messages": [{"role": "user", "content": f"question number {i}"}]}
                                for i in range(4)]))
    return path


def test_the_variables_choose_model_and_folder_and_the_header_says_so(shell: pytest.Pytester, monkeypatch):
    shell.makepyfile(test_cells=STAND_IN)
    chat = _chat_file(shell.path)
    monkeypatch.setenv("APPLEBENCH_MODEL", "qwen3-0.6b")
    monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "m5pro")
    result = shell.runpytest("-k", "llamacpp", "--prompts", f"chat={chat}", "--results-dir", "res")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"cellbench cells write to {shell.path}/res/Qwen3-0.6B/m5pro/<split>/ (model "
                                 "qwen3-0.6b from APPLEBENCH_MODEL, machine m5pro from APPLEBENCH_RESULTS_SUBDIR)"])
    recorded = {split: json.loads((shell.path / f"{split}.json").read_text()) for split in ("chat", "agent")}
    assert recorded["chat"] == {"profile": "qwen3-0.6b", "model_source": "APPLEBENCH_MODEL", "prompts": str(chat)}
    assert recorded["agent"]["prompts"] is None, "a split the list leaves out keeps its shipped file"

    monkeypatch.setenv("CELLBENCH_MACHINE", "studio")
    detect.cache_clear()
    result = shell.runpytest("-k", "llamacpp-chat", "--model", "tiny", "--results-dir", "res")
    result.stdout.fnmatch_lines(["cellbench cells write to */res/tiny/studio/<split>/ (model tiny from --model, "
                                 "machine studio from CELLBENCH_MACHINE)"])
    assert json.loads((shell.path / "chat.json").read_text())["model_source"] == "--model"


def test_a_subdir_that_is_not_a_slug_is_one_line_before_anything_runs(shell: pytest.Pytester, monkeypatch):
    shell.makepyfile(test_cells=STAND_IN)
    monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "M5 Pro")
    result = shell.runpytest("-k", "llamacpp-chat")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        "ERROR: APPLEBENCH_RESULTS_SUBDIR='M5 Pro' is not a machine slug (lowercase letters, digits, - and _, as "
        "results/<model>/<machine>/ names it)"]
    assert not (shell.path / "chat.json").exists()


@pytest.mark.integration  # starts the fault server: a few seconds
def test_a_real_cell_files_its_result_where_the_variables_say_with_its_split_s_prompts(
        shell: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("CELLBENCH_CACHE", str(shell.path / "cache"))  # the host lock's home
    monkeypatch.setenv("APPLEBENCH_MODEL", "tiny")
    monkeypatch.setenv("APPLEBENCH_RESULTS_SUBDIR", "m5pro")
    shell.makepyfile(test_cells=(PROJECT_ROOT / "bench" / "test_cells.py").read_text())
    chat = _chat_file(shell.path)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.support.faultserver", "--port", str(port), "--mode", "ok"],
                              cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        result = shell.runpytest("-p", "bench.plugins.cells", "-p", "fixtures.cells", "-p", "fixtures.servers",
                                 "-W", "ignore::pytest.PytestAssertRewriteWarning", "-k", "openai-chat",
                                 "--endpoint", f"http://127.0.0.1:{port}", "--ready-timeout", "30",
                                 "--requests", "4", "--concurrency", "1", "--warmup", "0",
                                 "--prompts", f"chat={chat}", "--results-dir", "res")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    written = sorted((shell.path / "res" / "tiny" / "m5pro" / "chat").glob("openai_*.json"))
    assert len(written) == 1, result.stdout.str()[-3000:]
    data = json.loads(written[0].read_text())
    validate(data)
    assert data["run_config"]["prompts"] == {"source": str(chat), "format": "siliconbench", "count": 4,
                                             "tools_param": False}
    assert (data["machine"]["slug"], data["machine"]["slug_source"]) == ("m5pro", "APPLEBENCH_RESULTS_SUBDIR")
    assert (data["model"]["profile"], data["model"]["profile_source"]) == ("tiny", "APPLEBENCH_MODEL")
    assert [(lvl["concurrency"], lvl["num_requests"]) for lvl in data["levels"]] == [(1, 4)]
