"""The journal in SiliconBench's shape: its file name and Summary, the prior journals it reads
(SiliconBench's own Journal Format among them), skips on a diagnosis, triage and telemetry lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.reports.journal import DIAGNOSED_SKIP, LAST_PASS, TELEMETRY, CellEntry, Journal
from bench.reports.journal.names import journal_files
from bench.reports.journal.prior import parse_markdown, recent
from bench.reports.journal.skips import clear_skip, diagnosed_skips, lapse, record_skip
from bench.reports.journal.telemetry import failure_reading
from bench.reports.journal.triage import PRIOR_FAILURE, decision

SILICONBENCH = Path(__file__).resolve().parent.parent / "data" / "siliconbench" / "weekly_2026-11-24.journal.md"


def test_the_summary_has_the_runbooks_lines_in_its_order_then_cellbenchs_own(tmp_path):
    j = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    j.branch, j.push = "weekly/2026-12-01", "pushed weekly/2026-12-01 to origin (../remote.git)"
    j.record(CellEntry("llamacpp", "chat", "ok", "8/8 requests ok"))
    j.record(CellEntry("llamacpp", "agent", "ok", "8/8 requests ok"))
    assert "- Reports: (none yet)" in j.md_path.read_text()
    for split in ("chat", "agent"):  # as a session's end rebuilds them, before it finishes the journal
        (tmp_path / split).mkdir()
        (tmp_path / split / "REPORT.md").write_text("# report\n")
    j.finish(interrupted=False)
    assert j.md_path.name == "weekly_2026-12-01.journal.md" and j.state_path.name == "weekly_2026-12-01.journal.json"
    lines = j.md_path.read_text().splitlines()
    assert lines[:3] == ["# Weekly Bench Run — 2026-12-01", "", "## Summary"]
    keys = [line.split(":", 1)[0] for line in lines[3:13]]
    assert keys == ["- Started", "- Finished", "- Model", "- Splits run", "- Status", "- Branch", "- Reports",
                    "- Machine", "- Push", ""]
    assert "- Splits run: chat, agent" in lines and "- Branch: weekly/2026-12-01" in lines
    assert "- Reports: chat/REPORT.md, agent/REPORT.md" in lines


def test_a_pytest_session_says_it_commits_to_no_branch(tmp_path):
    j = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    j.record(CellEntry("llamacpp", "chat", "ok", "fine"))
    assert "- Branch: none (a pytest session; `cellbench weekly` commits to weekly/<date>)" in j.md_path.read_text()


def test_an_earlier_runs_journal_under_the_old_name_is_continued_and_found(tmp_path):
    old = Journal.open(tmp_path, model="tiny", machine="m", day="2026-11-24")
    old.record(CellEntry("omlx", "chat", "skipped", "omlx runs on darwin-arm64"))
    old.state_path.rename(tmp_path / "journal_2026-11-24.json")
    old.md_path.rename(tmp_path / "journal_2026-11-24.md")
    again = Journal.open(tmp_path, model="tiny", machine="m", day="2026-11-24")
    assert ("omlx", "chat") in again.cells, "the same day continues a journal_<day>.json"
    week = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    week.record(CellEntry("omlx", "chat", "skipped", "omlx runs on darwin-arm64"))
    assert week.cells[("omlx", "chat")].carried_from == "2026-11-24"
    assert [f.day for f in journal_files(tmp_path)] == ["2026-12-01", "2026-11-24"]


def test_siliconbenchs_journal_format_gives_its_skips_and_fixes():
    prior = parse_markdown(SILICONBENCH.read_text(), SILICONBENCH, "2026-11-24")
    skips = {(s.framework, s.split): s.reason for s in prior.skips}
    assert skips[("llamacpp", "chat")].startswith("llama-server rejects --jinja since b7000; the fix needs")
    assert skips[("vllm_metal", "chat")] == skips[("vllm_metal", "agent")] == \
        "the vllm-metal wheel needs macOS 15; this host runs 14.6"  # bold with the colon inside
    assert skips[("inferrs", "chat")] == "not installed"  # a table row with no block of its own
    assert ("llamacpp", "agent") not in skips and ("ollama", "agent") not in skips, "ok and oom are no skips"
    (fix,) = prior.fixes
    assert (fix.framework, fix.split, fix.day) == ("mistralrs", "agent", "2026-11-24")
    assert fix.reference == "https://github.com/EricLBuehler/mistral.rs/pull/1234"
    assert fix.what == "scripts/serve_mistralrs.sh: --port-num -> --port" and fix.commit.startswith("1a2b3c4 ")


def test_a_single_split_journal_without_splits_in_its_headings_takes_the_summarys_split(tmp_path):
    text = ("# Weekly Bench Run — 2026-10-05\n\n## Summary\n- Split: agent\n\n## Frameworks\n"
            "| Framework | Status | Notes |\n|---|---|---|\n| omlx | skipped | served another model |\n\n"
            "## Skipped Frameworks\n\n### omlx\n- Why skipped: served Qwen3-4B for a 0.6B profile\n")
    prior = parse_markdown(text, tmp_path / "weekly_2026-10-05.journal.md", "2026-10-05")
    assert [(s.framework, s.split, s.reason) for s in prior.skips] == \
        [("omlx", "agent", "served Qwen3-4B for a 0.6B profile")]


def test_the_two_most_recent_prior_journals_are_read_newest_first(tmp_path):
    shutil.copy(SILICONBENCH, tmp_path / SILICONBENCH.name)
    for day in ("2026-11-10", "2026-11-17"):
        (tmp_path / f"weekly_{day}.journal.md").write_text(f"# Weekly Bench Run — {day}\n")
    cellbench = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    cellbench.record(CellEntry("sglang", "agent", "skipped", "diagnosed, not fixed: x",
                               evidence={DIAGNOSED_SKIP: {"reason": "x", "since": "2026-11-30", "source": "s"}}))
    assert [p.day for p in recent(tmp_path, "2026-12-08")] == ["2026-12-01", "2026-11-24"]
    assert [p.day for p in recent(tmp_path, "2026-12-01")] == ["2026-11-24", "2026-11-17"]
    assert [(s.framework, s.since) for s in recent(tmp_path, "2026-12-08")[0].skips] == [("sglang", "2026-11-30")]


def test_a_recorded_skip_holds_until_cleared_and_a_clear_ends_the_prior_journals_skip_too(tmp_path):
    shutil.copy(SILICONBENCH, tmp_path / SILICONBENCH.name)
    assert diagnosed_skips(tmp_path, "2026-12-01")["llamacpp/chat"]["since"] == "2026-11-24"
    record_skip(tmp_path, "vllm/agent", "upstream bug #4321", "2026-11-30", "a" * 64)
    found = diagnosed_skips(tmp_path, "2026-12-01")
    assert found["vllm/agent"]["reason"] == "upstream bug #4321"
    assert "cellbench weekly skip" in found["vllm/agent"]["source"]
    assert clear_skip(tmp_path, "vllm/agent", "2026-12-01") is True
    assert clear_skip(tmp_path, "llamacpp/chat", "2026-12-01") is False  # only a prior journal had it
    assert {"vllm/agent", "llamacpp/chat"}.isdisjoint(diagnosed_skips(tmp_path, "2026-12-08"))


def test_a_skip_lapses_when_the_framework_moved_or_its_adapter_changed():
    skip = {"reason": "r", "since": "2026-11-24", "adapter_sha256": "a" * 64}
    moved = {"framework": "vllm", "before": "0.6.1", "after": "0.6.2"}
    assert lapse(skip, moved, "a" * 64) == "vllm moved from 0.6.1 to 0.6.2 this run"
    assert lapse(skip, None, "b" * 64) == "its adapter module changed since the skip was recorded"
    assert lapse(skip, {"framework": "vllm", "before": "0.6.1", "after": "0.6.1"}, "a" * 64) is None
    assert lapse(skip, {"framework": "vllm", "before": None, "after": "0.6.2"}, None) == \
        "vllm 0.6.2 was installed this run"
    assert lapse(skip, {"framework": "vllm", "before": "0.6.1", "after": None}, None) is None, "a failed install"


def _failed(reason="server exited with code 1 while starting", **evidence) -> CellEntry:
    return CellEntry("llamacpp", "chat", "failed", reason, evidence=evidence)


def test_each_failure_gets_a_decision_line_fix_retry_or_skip_with_why():
    moved = {LAST_PASS: {"file": "llamacpp_1.json", "version_then": "b7000", "version_now": "b7100"}}
    assert decision(_failed(**moved), None).startswith("fix — llamacpp moved from b7000 to b7100 since its last pass")
    assert decision(_failed("port 8080 is already held by pid 7"), None).startswith("retry — it looks transient")
    same = {LAST_PASS: {"file": "llamacpp_1.json", "version_then": "b7000", "version_now": "b7000"}}
    assert decision(_failed(**same), None).startswith("skip — nothing changed upstream since llamacpp_1.json")
    assert decision(_failed(**{PRIOR_FAILURE: "it ended failed the same way on 2026-11-24"}), None) \
        .startswith("skip — it ended failed the same way on 2026-11-24")
    assert decision(_failed(**{TELEMETRY: "memory pressure: available memory fell to 2%"}), None).startswith("skip —")
    attempt = {"edited": "adapters/llamacpp.py", "outcome": "failed"}
    assert "no second attempt this run" in decision(_failed(**moved), attempt)


def _result_with_samples(tmp_path: Path, samples: list[dict], exit_block: dict) -> Path:
    split = tmp_path / "chat"
    split.mkdir()
    (split / "llamacpp_r.c1.resources.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    result = {"servers": [{"levels": [1], "ready_after_s": 1.0, "exit": exit_block,
                           "resources": {"path": "llamacpp_r.c1.resources.jsonl", "interval_s": 1.0,
                                         "samples": len(samples), "peak": {}, "gpu_source": None, "errors": []}}]}
    (split / "llamacpp_r.json").write_text(json.dumps(result))
    return split / "llamacpp_r.json"


def test_the_telemetry_line_tells_a_crash_and_memory_pressure_apart(tmp_path):
    total = 16 * 2**30
    samples = [{"t": t, "tree": {"alive": t < 3, "rss_bytes": 2**30 * (1 + t)},
                "system": {"mem_total_bytes": total, "mem_available_bytes": total // (2 + 10 * t)},
                "pressure": {"some_avg10": 4.0 * t, "full_avg10": 0.0}} for t in range(5)]
    path = _result_with_samples(tmp_path, samples, {"returncode": -9, "signal": "SIGKILL", "stopped_by_us": False})
    line = failure_reading(path)
    assert line.startswith("server exited by itself (SIGKILL)")
    assert "the server's process tree was gone at 3 s of sampling" in line
    assert "memory pressure: available memory fell to 2%, PSI memory stalls up to 16%" in line
    assert decision(CellEntry("llamacpp", "chat", "failed", "exited", evidence={TELEMETRY: line}), None) \
        .startswith("skip — the samples show memory pressure")


def test_a_calm_machine_says_so_and_a_cell_without_samples_says_that(tmp_path):
    total = 16 * 2**30
    calm = [{"t": t, "tree": {"alive": True, "rss_bytes": 2**29},
             "system": {"mem_total_bytes": total, "mem_available_bytes": total // 2}} for t in range(3)]
    path = _result_with_samples(tmp_path, calm, {"returncode": 0, "signal": None, "stopped_by_us": True})
    assert failure_reading(path) == "memory: at least 50% available throughout, peak server RSS 0.50 GiB"
    (tmp_path / "bare.json").write_text(json.dumps({"servers": [{"levels": [1], "start_error": "boom"}]}))
    assert "no resource samples" in failure_reading(tmp_path / "bare.json")
    assert failure_reading(None) is None


def test_a_sessions_failed_cell_gets_its_decision_and_telemetry_lines(pytester, monkeypatch):
    """A real pytest session: an --endpoint nobody listens on fails the `openai` cell, and the
    journal's entry under Failures carries the triage line and what the result's telemetry says."""
    from bench.base.paths import PROJECT_ROOT

    monkeypatch.setenv("CELLBENCH_CACHE", str(pytester.path / "cache"))
    pytester.makepyfile(test_cells=(PROJECT_ROOT / "bench" / "test_cells.py").read_text())
    proc = pytester.runpytest("-p", "bench.plugins.cells", "-p", "fixtures.cells", "-p", "fixtures.servers",
                              "-W", "ignore::pytest.PytestAssertRewriteWarning", "--endpoint", "http://127.0.0.1:9",
                              "--results-dir", "results", "-k", "openai-chat", "--ready-timeout", "1")
    proc.assert_outcomes(failed=1)
    (journal,) = (pytester.path / "results").rglob("weekly_*.journal.md")
    failure = journal.read_text().split("## Failures\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert failure[0] == "### openai / chat: failed"
    assert failure[2].startswith("- Decision: skip — ")
    (cell,) = json.loads(journal.with_suffix(".json").read_text())["cells"]
    assert cell["evidence"][TELEMETRY] == "no resource samples recorded for its servers"
    assert f"- Telemetry: {cell['evidence'][TELEMETRY]}" in failure


def test_a_skip_ends_once_a_newer_journal_ran_the_cell(tmp_path):
    shutil.copy(SILICONBENCH, tmp_path / SILICONBENCH.name)
    week = Journal.open(tmp_path, model="tiny", machine="m", day="2026-12-01")
    week.record(CellEntry("llamacpp", "chat", "ok", "8/8 requests ok"))  # it ran, and passed, after its skip lapsed
    assert "llamacpp/chat" not in diagnosed_skips(tmp_path, "2026-12-08")
    assert "vllm_metal/chat" in diagnosed_skips(tmp_path, "2026-12-08"), "other skips of the older journal hold"
    prior = parse_markdown(SILICONBENCH.read_text(), SILICONBENCH, "2026-11-24")
    assert {("mlx_lm", "chat"), ("llamacpp", "agent"), ("ollama", "agent")} <= prior.ran
    assert ("llamacpp", "chat") not in prior.ran


def test_an_oom_cells_reading_leaves_out_the_kernel_line_its_reason_already_quotes(tmp_path):
    oom = {"source": "kernel log", "pid": 42, "process": "llama-server", "line": "Killed process 42 (llama-server)"}
    calm = [{"t": 0, "tree": {"alive": True, "rss_bytes": 2**30},
             "system": {"mem_total_bytes": 2**34, "mem_available_bytes": 2**33}}]
    path = _result_with_samples(tmp_path, calm, {"returncode": -9, "signal": "SIGKILL", "stopped_by_us": False,
                                                 "oom": oom})
    assert failure_reading(path).startswith("killed for memory (kernel log): Killed process 42 (llama-server); ")
    assert failure_reading(path, with_oom=False) == \
        "memory: at least 50% available throughout, peak server RSS 1.00 GiB"


def test_the_merge_reads_journals_under_both_names_newest_day_first(tmp_path):
    from bench.reports.merged.gather import find_machines

    scoped = tmp_path / "tiny" / "m2"
    old = Journal.open(scoped, model="tiny", machine="m2", day="2026-11-23")
    old.record(CellEntry("vllm", "agent", "failed", "server exited with code 1 while starting"))
    old.state_path.rename(scoped / "journal_2026-11-23.json")  # as a run before the rename wrote it
    new = Journal.open(scoped, model="tiny", machine="m2", day="2026-11-30")
    new.record(CellEntry("vllm", "chat", "skipped", "vllm is not installed"))
    (md,) = find_machines(tmp_path)
    assert [path.name for path, _ in md.journals] == ["weekly_2026-11-30.journal.json", "journal_2026-11-23.json"]
    assert md.splits == {"chat", "agent"}, "the old journal's split still shows"
    assert md.journal_cells("agent")["vllm"][0].name == "journal_2026-11-23.json"
