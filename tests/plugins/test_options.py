"""cellbench's options as a user types them: path options in both forms from any directory, bad
input as one usage-error line before any server starts, and a cell budget that follows
pytest-timeout's own timeout for the item."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import adapters
from bench.base.defaults import SPLITS
from bench.base.paths import PROJECT_ROOT
from bench.plugins.opts import parsers

# ---------------------------------------------------------------- path options, both forms, any directory

PYTEST = Path(sys.executable).with_name("pytest")  # the console script a user runs


def _pytest(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cmd = [str(PYTEST)] if PYTEST.is_file() else [sys.executable, "-m", "pytest"]
    return subprocess.run([*cmd, "-p", "no:cacheprovider", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def _cell_that_starts_nothing() -> str:
    """A cell that is `skipped` on this platform: it runs and is journaled, and starts no server."""
    name = next(n for n, a in sorted(adapters.registry().items()) if a.platform_here() is None)
    return f"{name}-chat"


def _results_and_model(tmp: Path) -> tuple[dict[str, Path], list[str]]:
    profile = tmp / "profiles" / "my-profile.yaml"
    profile.parent.mkdir()
    profile.write_text((PROJECT_ROOT / "models" / "tiny.yaml").read_text().replace(
        "results_name: tiny", "results_name: my-tiny"))
    return {"--results-dir": tmp / "results", "--model": profile}, ["-k", _cell_that_starts_nothing()]


def _prompts(tmp: Path) -> tuple[dict[str, Path], list[str]]:
    path = tmp / "prompts" / "mine.json"
    path.parent.mkdir()
    path.write_text(json.dumps([{"name": "p", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}]))
    return {"--prompts": path}, ["--collect-only"]


def _eval_config(tmp: Path) -> tuple[dict[str, Path], list[str]]:
    path = tmp / "eval" / "eval.yaml"
    path.parent.mkdir()
    path.write_text("rows: [\n")
    return {"--eval-config": path}, ["-m", "eval", "--collect-only"]


def _retry_failed_from(tmp: Path) -> tuple[dict[str, Path], list[str]]:
    run_dir = tmp / "runs" / "last"
    run_dir.mkdir(parents=True)
    return {"--retry-failed-from": run_dir}, ["-m", "eval", "--collect-only"]


def _took_effect(case: str, proc: subprocess.CompletedProcess, paths: dict[str, Path]) -> None:
    """What each option visibly does with its path (a bad file is named in the usage error)."""
    if case == "results-dir,model":
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"rootdir: {PROJECT_ROOT}" in proc.stdout, "the rootdir is the checkout, not the option's path"
        assert list(paths["--results-dir"].glob("my-tiny/*/weekly_*.journal.md")), "the journal is under both paths"
    elif case == "prompts":
        assert proc.returncode == pytest.ExitCode.USAGE_ERROR
        assert f"ERROR: --prompts: {paths['--prompts']}: entry 0 (name 'p'): max_tokens" in proc.stderr
    elif case == "eval-config":
        assert proc.returncode == pytest.ExitCode.USAGE_ERROR
        assert f"ERROR: eval config {paths['--eval-config']}: not valid YAML" in proc.stderr
    else:
        assert proc.returncode == pytest.ExitCode.USAGE_ERROR
        assert f"ERROR: --retry-failed-from {paths['--retry-failed-from']}: cannot read" in proc.stderr


PATH_CASES = {"results-dir,model": _results_and_model, "prompts": _prompts, "eval-config": _eval_config,
              "retry-failed-from": _retry_failed_from}


@pytest.mark.parametrize("where", ["checkout", "elsewhere"])
@pytest.mark.parametrize("form", ["--opt PATH", "--opt=PATH"])
@pytest.mark.parametrize("case", sorted(PATH_CASES))
@pytest.mark.session
def test_path_options_work_in_both_forms_from_any_directory(tmp_path: Path, case: str, form: str, where: str):
    paths, args = PATH_CASES[case](tmp_path)  # every path outside the checkout, and existing
    options = [part for flag, path in paths.items()
               for part in ([flag, str(path)] if form == "--opt PATH" else [f"{flag}={path}"])]
    if where == "checkout":
        cwd, tests = PROJECT_ROOT, []
    else:
        cwd, tests = tmp_path / "elsewhere", [str(PROJECT_ROOT / "bench")]
        cwd.mkdir()
    proc = _pytest([*tests, *options, *args], cwd)
    assert "unrecognized arguments" not in proc.stderr, proc.stderr
    _took_effect(case, proc, paths)


# ---------------------------------------------------------------- bad input: one line, nothing started

STAND_IN_CELL = """
import json
from pathlib import Path

def test_cell(cell_config):
    Path("budget.json").write_text(json.dumps(cell_config.cell_budget_s))
"""


@pytest.fixture
def stand_in(pytester: pytest.Pytester) -> pytest.Pytester:
    """A test with real cell ids whose body records its cell's budget instead of starting a server."""
    pytester.makepyfile(test_cells=STAND_IN_CELL)
    return pytester


def budget(pytester: pytest.Pytester, *args: str) -> float | None:
    result = pytester.runpytest("-k", "llamacpp-chat", *args)
    result.assert_outcomes(passed=1)
    written = pytester.path / "budget.json"
    value = json.loads(written.read_text())
    written.unlink()
    return value


def usage_error(pytester: pytest.Pytester, *args: str) -> str:
    """The one line a usage error prints; asserts that nothing ran and no traceback was printed."""
    result = pytester.runpytest("-k", "llamacpp-chat", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "budget.json").exists(), "no cell ran"
    (line,) = [ln for ln in result.stderr.lines if ln.strip()]
    return line


def test_bad_numbers_are_one_line_each(stand_in: pytest.Pytester):
    assert usage_error(stand_in, "--requests", "-1") == (
        "ERROR: --requests takes a count of measured requests per level, 1 or more, got -1")
    assert usage_error(stand_in, "--requests=0").endswith("1 or more, got 0")
    assert usage_error(stand_in, "--warmup", "-3") == (
        "ERROR: --warmup takes a count of warm-up requests per level, 0 or more, got -3")
    assert usage_error(stand_in, "--degraded-threshold", "1.5").endswith("from 0 to 1, got 1.5")
    assert usage_error(stand_in, "--port", "70000").endswith("0 (any free port) to 65535, got 70000")
    assert usage_error(stand_in, "--cell-budget", "0").endswith(
        "--cell-budget takes a duration (2700, 45m) or split=duration pairs (chat=45m,agent=90m), got '0': "
        "splits are chat, agent, durations more than 0")
    assert usage_error(stand_in, "--cell-budget", "lunch=5m").endswith("splits are chat, agent, durations more than 0")
    assert usage_error(stand_in, "--cell-budget", "chat=soon").endswith("got 'chat=soon'")
    stand_in.runpytest("-k", "llamacpp-chat", "--warmup", "0").assert_outcomes(passed=1)


def test_client_procs_is_a_count_or_auto(stand_in: pytest.Pytester):
    assert usage_error(stand_in, "--client-procs", "0") == (
        "ERROR: --client-procs takes a count of processes, 1 or more, or auto; got '0'")
    assert usage_error(stand_in, "--client-procs=many").endswith("got 'many'")
    stand_in.runpytest("-k", "llamacpp-chat", "--client-procs", "2").assert_outcomes(passed=1)


BAD_PROMPT_FILES = {
    "missing": (None, "cannot read: [Errno 2] No such file or directory"),
    "empty": ("", "empty file: no prompts"),
    "not JSON": ('[{"name": "a",', "not valid JSON: Expecting"),
    "no prompts": ("[]", "no prompts"),
    "bad entry": (json.dumps([{"name": "ok", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
                              {"name": "odd", "max_tokens": 8, "messages": [{"role": "robot", "content": "x"}]}]),
                  "entry 1 (name 'odd'): messages[0].role: unknown role 'robot'"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROMPT_FILES))
def test_a_bad_prompt_file_names_file_entry_and_field(stand_in: pytest.Pytester, case: str):
    text, problem = BAD_PROMPT_FILES[case]
    path = stand_in.path / "prompts" / "mine.json"
    if text is not None:
        path.parent.mkdir()
        path.write_text(text)
    line = usage_error(stand_in, "--prompts", str(path))
    assert line.startswith(f"ERROR: --prompts: {path}: {problem}"), line


def test_a_prompt_file_is_read_as_the_cells_read_it(stand_in: pytest.Pytester):
    path = stand_in.path / "mine.jsonl"
    path.write_text("\n".join(json.dumps([{"role": "user", "content": f"question {i}"}]) for i in range(3)))
    stand_in.runpytest("-k", "llamacpp-chat", f"--prompts={path}").assert_outcomes(passed=1)


def test_prompts_is_one_file_for_every_split_or_one_per_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    chat, agent, odd = tmp_path / "chat.json", tmp_path / "agent.json", tmp_path / "a=b.json"
    for path in (chat, agent, odd):
        path.write_text("[]")
    assert parsers.prompt_files(None) == {}
    assert parsers.prompt_files(str(chat)) == {"chat": chat, "agent": chat}
    assert parsers.prompt_files("gone.json") == dict.fromkeys(SPLITS, Path("gone.json")), "read (and refused) later"
    assert parsers.prompt_files("a=b.json") == dict.fromkeys(SPLITS, Path("a=b.json")), "a file of that name is a file"
    assert parsers.prompt_files(f"chat={chat}") == {"chat": chat}, "agent keeps its shipped file"
    assert parsers.prompt_files(f"chat={chat}, agent = agent.json") == {"chat": chat, "agent": Path("agent.json")}


@pytest.mark.parametrize("value, error", [
    ("lunch=chat.json", "--prompts lunch=chat.json: no split 'lunch'; the splits are chat, agent"),
    ("chat=gone.json", "--prompts chat=gone.json: no such file"),
    ("chat=chat.json,chat=agent.json", "--prompts names chat twice: chat.json and agent.json"),
    ("chat=chat.json,agent.json", "--prompts takes a file, or split=file pairs such as chat=mine.json,"
                                  "agent=theirs.json, got 'chat=chat.json,agent.json'"),
    ("chat=chat.json,,", "--prompts takes a file, or split=file pairs"),
    ("chat=", "--prompts takes a file, or split=file pairs"),
    ("=chat.json", "--prompts takes a file, or split=file pairs"),
])
def test_a_prompts_list_names_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, error: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.json").write_text("[]")
    (tmp_path / "agent.json").write_text("[]")
    with pytest.raises(pytest.UsageError) as raised:
        parsers.prompt_files(value)
    assert str(raised.value).startswith(error), str(raised.value)


def test_a_split_s_bad_prompt_file_is_one_line_naming_split_and_file(stand_in: pytest.Pytester):
    good, bad = stand_in.path / "good.json", stand_in.path / "bad.json"
    good.write_text(json.dumps([{"name": "a", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}]))
    bad.write_text(json.dumps([{"name": "p", "max_tokens": 0, "messages": [{"role": "user", "content": "hi"}]}]))
    assert usage_error(stand_in, "--prompts", f"chat={good},agent={bad}").startswith(
        f"ERROR: --prompts agent: {bad}: entry 0 (name 'p'): max_tokens")
    assert usage_error(stand_in, f"--prompts=agent={good},lunch={good}") == (
        f"ERROR: --prompts lunch={good}: no split 'lunch'; the splits are chat, agent")
    stand_in.runpytest("-k", "llamacpp-chat", f"--prompts=chat={good}").assert_outcomes(passed=1)


def test_a_model_siliconbench_s_variable_names_is_loaded_or_refused_naming_it(
        stand_in: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("APPLEBENCH_MODEL", "qwen3-8b")  # a SiliconBench profile cellbench does not ship
    assert usage_error(stand_in).startswith("ERROR: APPLEBENCH_MODEL=qwen3-8b: model profile 'qwen3-8b': no file")
    stand_in.runpytest("-k", "llamacpp-chat", "--model", "tiny").assert_outcomes(passed=1)  # the option wins


def test_a_model_that_cannot_load_is_one_line(stand_in: pytest.Pytester):
    assert usage_error(stand_in, "--model", "no-such-model").startswith(
        "ERROR: model profile 'no-such-model': no file")
    broken = stand_in.path / "broken.yaml"
    broken.write_text("name: [\n")
    assert usage_error(stand_in, f"--model={broken}").startswith(f"ERROR: model profile {broken}: not valid YAML")


# ---------------------------------------------------------------- the budget follows pytest-timeout


MARGIN = 60.0  # bench.plugins.budget.TIMEOUT_MARGIN_S


def test_no_timeout_the_weekly_runs_caps(stand_in: pytest.Pytester):
    assert budget(stand_in) == 45 * 60.0, "a chat cell's default cap: 45 minutes"
    assert budget(stand_in, "--cell-budget", "120") == 120.0


def test_a_budget_per_split_and_with_units(stand_in: pytest.Pytester):
    assert budget(stand_in, "--cell-budget", "chat=2m,agent=90m") == 120.0, "the chat cell takes chat's"
    assert budget(stand_in, "--cell-budget", "1.5h") == 5400.0, "one duration serves every split"
    assert budget(stand_in, "--cell-budget", "agent=2h") == 45 * 60.0, "chat keeps its default"
    assert budget(stand_in, "--timeout", "600", "--cell-budget", "agent=1m") == 600 - MARGIN
    assert budget(stand_in, "--timeout", "60", "--cell-budget", "chat=20s") == 20.0, "chat's budget stands"
    assert usage_error(stand_in, "--timeout", "60", "--cell-budget", "agent=1m").startswith(
        "ERROR: --timeout=60 leaves a cell no budget"), "agent's budget does not serve a chat cell"


def test_budget_follows_the_timeout_option(stand_in: pytest.Pytester):
    assert budget(stand_in, "--timeout", "600") == 600 - MARGIN
    assert budget(stand_in, "--timeout", "600", "--cell-budget", "100") == 100.0, "the smaller wins"
    assert budget(stand_in, "--timeout", "600", "--cell-budget", "1000") == 600 - MARGIN, "the smaller wins"


def test_budget_follows_the_ini_timeout(stand_in: pytest.Pytester):
    stand_in.makeini("[pytest]\ntimeout = 600\n")
    assert budget(stand_in) == 600 - MARGIN
    assert budget(stand_in, "--timeout", "900") == 900 - MARGIN, "the command line wins, as in pytest-timeout"


def test_budget_follows_the_environment(stand_in: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYTEST_TIMEOUT", "600")
    assert budget(stand_in) == 600 - MARGIN


def test_budget_follows_a_timeout_marker(stand_in: pytest.Pytester):
    stand_in.makepyfile(test_cells="import pytest\n" + STAND_IN_CELL.replace(
        "def test_cell", "@pytest.mark.timeout(300)\ndef test_cell"))
    assert budget(stand_in, "--timeout", "5400") == 300 - MARGIN, "the marker wins, as in pytest-timeout"


def test_a_timeout_that_leaves_no_budget_is_a_usage_error(stand_in: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch):
    advice = ("leaves a cell no budget: cellbench keeps 60 s of pytest-timeout's timeout to stop the server and "
              "write the result; pass a timeout above 60 s (e.g. --timeout=5400), or --cell-budget SECONDS to set "
              "the budget yourself")
    assert usage_error(stand_in, "--timeout", "60") == f"ERROR: --timeout=60 {advice}"
    assert budget(stand_in, "--timeout", "60", "--cell-budget", "20") == 20.0, "a budget given stands"
    monkeypatch.setenv("PYTEST_TIMEOUT", "45")
    assert usage_error(stand_in) == f"ERROR: PYTEST_TIMEOUT=45 {advice}"
    monkeypatch.delenv("PYTEST_TIMEOUT")
    stand_in.makeini("[pytest]\ntimeout = 30\n")
    assert usage_error(stand_in) == f"ERROR: the ini setting timeout = 30 {advice}"
    stand_in.makeini("[pytest]\n")
    stand_in.makepyfile(test_cells="import pytest\n" + STAND_IN_CELL.replace(
        "def test_cell", "@pytest.mark.timeout(10)\ndef test_cell"))
    assert usage_error(stand_in, "--timeout", "5400") == (
        f"ERROR: @pytest.mark.timeout(10) on test_cells.py::test_cell[llamacpp-chat] {advice}")


def test_a_short_timeout_is_no_error_where_no_cell_runs(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain="def test_plain(): pass\n")
    pytester.runpytest("--timeout", "5").assert_outcomes(passed=1)


@pytest.mark.session
def test_under_xdist_the_controller_refuses_a_short_timeout(stand_in: pytest.Pytester):
    result = stand_in.runpytest_subprocess("-k", "llamacpp-chat", "-n", "1", "--timeout", "30")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --timeout=30 leaves a cell no budget*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert not (stand_in.path / "budget.json").exists()


@pytest.mark.parametrize("option, value", [
    ("--concurrency", "1,,4"), ("--concurrency", "1,4,"), ("--concurrency", ",1"), ("--concurrency", "1,four"),
    ("--request-rate", "2,,4"), ("--request-rate", "2,4,"), ("--request-rate", "2,fast"),
])
def test_a_malformed_level_list_is_one_line_not_fewer_levels(stand_in: pytest.Pytester, option: str, value: str):
    """An empty element or a word in a level list is a usage error: `1,,4` once ran levels 1 and 4."""
    takes = {"--concurrency": "--concurrency takes comma-separated integers",
             "--request-rate": "--request-rate takes comma-separated requests/s (more than 0, or inf), or "
                               "sweep[:START]"}
    assert usage_error(stand_in, option, value) == f"ERROR: {takes[option]}, got {value!r}"


def test_an_empty_api_key_and_an_unset_profile_variable_are_one_line(stand_in: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CELLBENCH_TEST_UNSET_KEY", raising=False)
    assert usage_error(stand_in, "--api-key=") == "ERROR: --api-key takes a key, got an empty one"
    profile = stand_in.path / "keyed.yaml"
    profile.write_text("name: keyed\nresults_name: keyed\nbuiltin: tiny\nformats: {gguf: {served_id: tiny}}\n"
                       "api_key_env: CELLBENCH_TEST_UNSET_KEY\n")
    assert usage_error(stand_in, f"--model={profile}") == (
        f"ERROR: model profile {profile}: its api_key_env names $CELLBENCH_TEST_UNSET_KEY, which is not set; "
        "set it, or pass --api-key KEY or set OPENAI_API_KEY")
    monkeypatch.setenv("CELLBENCH_TEST_UNSET_KEY", "from-the-profile")
    stand_in.runpytest("-k", "llamacpp-chat", f"--model={profile}").assert_outcomes(passed=1)


@pytest.mark.parametrize("selection", [("-k", "llamacpp"), ("-m", "llamacpp"), ("-k", "llamacpp and chat")])
def test_a_selection_endpoint_leaves_empty_says_why_in_one_line(stand_in: pytest.Pytester, selection: tuple[str, str]):
    """With --endpoint only the `openai` cells exist: naming another framework selects none, and says so."""
    option, expression = selection
    result = stand_in.runpytest(option, expression, "--endpoint", "http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    note = f"--endpoint runs the `openai` cell only: `{option} {expression}` selected none; use {option} openai"
    assert [line for line in result.outlines if "--endpoint runs" in line] == [note]


def test_no_note_where_the_selection_has_cells_or_no_endpoint(stand_in: pytest.Pytester):
    with_cells = stand_in.runpytest("-k", "openai and chat", "--endpoint", "http://127.0.0.1:9", "--collect-only")
    without_endpoint = stand_in.runpytest("-k", "nothing-at-all", "--collect-only")
    for result in (with_cells, without_endpoint):
        assert not [line for line in result.outlines if "--endpoint runs" in line], result.outlines
    assert "test_cell[openai-chat]" in with_cells.stdout.str()
