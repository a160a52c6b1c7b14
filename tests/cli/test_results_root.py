"""One results root: the cells and `cellbench report`, `clean` and `import` find the same folder.

The rule is bench.base.paths.results_root: --results-dir (relative to where the command was
started), else `<rootdir>/results`, where the rootdir is the nearest folder upward holding a
pytest.ini (the one pytest itself takes), else the project root.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT, results_root, rootdir_of
from bench.cli import imports
from bench.cli.main import main as cellbench
from bench.host.ports import free_port


def test_the_rootdir_is_the_nearest_folder_upward_that_holds_a_pytest_ini(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "models" / "tiny").mkdir(parents=True)
    (checkout / "pytest.ini").write_text("[pytest]\n")
    assert rootdir_of(checkout / "models" / "tiny") == checkout
    assert rootdir_of(checkout) == checkout
    assert rootdir_of(tmp_path) == PROJECT_ROOT, "no pytest.ini above: the project's own checkout"
    assert rootdir_of(PROJECT_ROOT / "models") == PROJECT_ROOT


def test_results_dir_wins_relative_to_where_the_command_started(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert results_root(None, sub) == tmp_path / "results"
    assert results_root(Path("mine"), sub) == sub / "mine"
    assert results_root(Path("/elsewhere/r"), sub) == Path("/elsewhere/r")
    assert results_root(None, sub, rootdir=tmp_path / "other") == tmp_path / "other" / "results", "pytest's rootdir"


def test_report_and_clean_say_so_when_the_results_dir_does_not_exist(tmp_path, monkeypatch, capsys):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    monkeypatch.chdir(tmp_path)
    assert cellbench(["report", "--results-dir", "nowhere"]) == 1
    assert capsys.readouterr().err == "no result directories under nowhere\n"
    assert cellbench(["report"]) == 1
    assert capsys.readouterr().err == f"no result directories under {tmp_path / 'results'}\n"
    assert cellbench(["clean", "--dry-run"]) == 0
    assert capsys.readouterr().out == "0 file(s) to delete, 0 result(s) kept, 0 refused\n"


def test_import_writes_under_the_rootdir_found_from_where_it_started(tmp_path, monkeypatch):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    roots: list[Path] = []

    def recorded(path, *, machine, results_root, model, dry_run):
        roots.append(results_root)
        return []

    monkeypatch.setattr(imports, "import_siliconbench", recorded)
    assert cellbench(["import", "siliconbench", "x.json", "--machine", "m"]) == 1  # nothing found: 1, as before
    assert cellbench(["import", "siliconbench", "x.json", "--machine", "m", "--results-dir", "here"]) == 1
    assert roots == [tmp_path / "results", tmp_path / "sub" / "here"]


@pytest.mark.integration  # starts the fault server and runs one real cell against it: ~10 s
def test_a_cell_started_in_a_subfolder_writes_where_cellbench_report_looks(pytester: pytest.Pytester, monkeypatch,
                                                                           capsys):
    """bench/test_cells.py in a checkout of its own (a pytest.ini at its top), pytest started in a
    subfolder: the cell's result lands in the checkout's results/, and `cellbench report` and
    `cellbench clean`, started in the same subfolder, find it there."""
    monkeypatch.setenv("CELLBENCH_CACHE", str(pytester.path / "cache"))  # the host lock's home
    (pytester.path / "pytest.ini").write_text("[pytest]\n")  # makeini writes a tox.ini
    pytester.makepyfile(test_cells=(PROJECT_ROOT / "bench" / "test_cells.py").read_text())
    sub = pytester.mkdir("sub")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.support.faultserver", "--port", str(port), "--mode", "ok"],
                              cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        monkeypatch.chdir(sub)
        proc = pytester.runpytest("../test_cells.py", "-W", "ignore::pytest.PytestAssertRewriteWarning",
                                  "-k", "openai-chat", "--endpoint", f"http://127.0.0.1:{port}",
                                  "--requests", "4", "--concurrency", "1", "--ready-timeout", "30")
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
    proc.assert_outcomes(passed=1)
    (written,) = (pytester.path / "results").rglob("openai_*.json")
    assert not (sub / "results").exists()

    capsys.readouterr()
    assert cellbench(["report"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [str(written.parent / "comparison.json"),
                                                        str(written.parent / "REPORT.md")]
    assert cellbench(["clean", "--dry-run"]) == 0
    assert capsys.readouterr().out.endswith("1 result(s) kept, 0 refused\n"), "its newest result is kept"
    assert cellbench(["report", "--results-dir", str(pytester.path / "empty")]) == 1, "--results-dir still wins"
