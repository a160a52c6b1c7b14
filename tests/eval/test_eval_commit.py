"""The refresh's commit on real git repositories in tmp_path: what it holds, says and prints."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.eval.tables.commit import NOTHING, commit_tables, uncommitted, utc_ts

SUMMARY = {"replaced": 2, "appended": 1}
RUN = "20261202T015540Z-ab12"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "sglang-omni"
    (repo / "benchmarks" / "eval").mkdir(parents=True)
    for name in ("benchmark_omni_mmsu.py", "benchmark_tts_seedtts.py"):
        (repo / "benchmarks" / "eval" / name).write_text('"""tables"""\n')
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "Omni Dev")
    _git(repo, "config", "user.email", "dev@example.com")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "tables")
    return repo


def test_only_the_edited_files_are_committed_with_the_seeds_subject(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    edited = repo / "benchmarks" / "eval" / "benchmark_omni_mmsu.py"
    edited.write_text('"""tables, refreshed"""\n')
    (repo / "benchmarks" / "eval" / "benchmark_tts_seedtts.py").write_text('"""the user\'s own edit"""\n')
    (repo / "notes.txt").write_text("staged by the user\n")
    _git(repo, "add", "notes.txt")
    run_dir = tmp_path / "results" / RUN
    done = commit_tables([edited], run_dir, "H200", SUMMARY, "main 1234567")
    assert done.ok
    sha = _git(repo, "rev-parse", "--short=7", "HEAD").strip()
    subject = "[Docs] Refresh reference benchmarks via /running-eval-suite (20261202T015540Z)"
    assert done.lines == [f"Committed {sha} in {repo}: {subject}", "Review:   git show HEAD",
                          "Revert:   git reset --soft HEAD~1   # keeps the edits, staged", f"Run dir:  {run_dir}"]
    assert _git(repo, "log", "-1", "--format=%B").strip().splitlines() == [
        subject, "", "Hardware: H200; 2 row(s) replaced, 1 appended.",
        f"Measured on main 1234567 by cellbench eval, run {RUN}.", f"Run dir: {run_dir}"]
    assert _git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["benchmarks/eval/benchmark_omni_mmsu.py"]
    assert _git(repo, "status", "--porcelain").splitlines() == [" M benchmarks/eval/benchmark_tts_seedtts.py",
                                                               "A  notes.txt"]
    assert done.record == {"status": "ok", "commit": sha, "repository": str(repo), "subject": subject,
                           "files": ["benchmarks/eval/benchmark_omni_mmsu.py"]}
    assert _git(repo, "branch", "-r") == "", "nothing pushed (no remote was ever touched)"


def test_the_first_line_says_where_to_run_them_from_outside_the_repo(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edited = repo / "benchmarks" / "eval" / "benchmark_omni_mmsu.py"
    edited.write_text('"""refreshed"""\n')
    done = commit_tables([edited], tmp_path / RUN, "H200", SUMMARY, "main 1234567")
    assert f"in {repo} (cd there to run these): [Docs]" in done.lines[0]


def test_nothing_edited_is_one_line_and_files_in_no_repository_fail_saying_so(tmp_path):
    assert commit_tables([], tmp_path / RUN, "H200", SUMMARY, "x").lines == [NOTHING]
    loose = tmp_path / "benchmark_x.py"
    loose.write_text('"""x"""\n')
    done = commit_tables([loose], tmp_path / RUN, "H200", SUMMARY, "x")
    assert not done.ok and done.lines == [f"commit FAILED (not all in one git repository): {loose}; the edits are in "
                                          "the working tree"]


def test_a_commit_git_refuses_fails_with_gits_words(repo, tmp_path):
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'tables are frozen this week' >&2\nexit 1\n")
    hook.chmod(0o755)
    edited = repo / "benchmarks" / "eval" / "benchmark_omni_mmsu.py"
    edited.write_text('"""refreshed"""\n')
    done = commit_tables([edited], tmp_path / RUN, "H200", SUMMARY, "x")
    assert not done.ok and done.lines == ["commit FAILED (git commit): tables are frozen this week; the edits are in "
                                          "the working tree"]
    assert done.record == {"status": "fail", "reason": "(git commit): tables are frozen this week"}


def test_the_timestamp_is_the_run_ids_else_now():
    assert utc_ts(RUN) == "20261202T015540Z"
    assert len(utc_ts("my-run")) == 16 and utc_ts("my-run").endswith("Z")


def test_a_table_file_edited_before_the_run_is_committed_with_a_warning(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(repo)
    mmsu, tts = (repo / "benchmarks" / "eval" / name for name in ("benchmark_omni_mmsu.py", "benchmark_tts_seedtts.py"))
    mmsu.write_text('"""tables, with a note the user is still writing"""\n')
    before = uncommitted([mmsu, tts])
    assert before == {mmsu}
    mmsu.write_text('"""tables, with a note the user is still writing, refreshed"""\n')
    tts.write_text('"""refreshed"""\n')
    done = commit_tables([mmsu, tts], tmp_path / RUN, "H200", SUMMARY, "dirty 1234567", before)
    assert done.lines[0] == ("WARNING: benchmarks/eval/benchmark_omni_mmsu.py had uncommitted edits before the run; "
                             "they are in this commit too")
    assert done.lines[1].startswith("Committed ") and done.lines[-3] == "Review:   git show HEAD"
    body = _git(repo, "log", "-1", "--format=%b")
    assert "benchmarks/eval/benchmark_omni_mmsu.py also carries edits made before the run." in body
    assert "benchmark_tts_seedtts.py also" not in body
