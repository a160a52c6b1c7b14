"""No number without its standing, on real cells: one split folder holding the real llamacpp chat
cell and a degraded cell (the suite's fault server failing every third request, run as the
`openai` cell from a model profile's command), both in one pytest session; then a second session
that runs the degraded cell alone (`-k openai`), so llamacpp's figures are of the earlier run.

What is asserted is what a user reads: REPORT.md's tables and *Between frameworks*, the rendered
HTML review (its Result column, figures and summary), comparison.csv's flag and the journal's
comparison with the previous run. A busy host may make llamacpp `degraded` by its client's timing
(tests/support/busy.py): its expected marks then follow its verdict, never the host's speed.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from tests.reports.test_html_report import ResultsTable, rendered
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2 * TEST_TIMEOUT_S)]

RESULTS_NAME = "standing"
ROW = "bench/test_cells.py::test_cell[{}-chat]"


def write_profile(directory: Path) -> Path:
    """The tiny model for llama-server, and the fault server failing every 3rd chat request as its `openai` server."""
    argv = [sys.executable, "-m", "tests.support.faultserver", "--port", "{port}", "--mode", "fail_share"]
    path = directory / "standing.yaml"
    path.write_text("\n".join([
        "name: standing", f"results_name: {RESULTS_NAME}", "builtin: tiny", "sampling: {temperature: 1.0}",
        "ignore_eos: true", "formats: {gguf: {served_id: tiny}}",
        "openai:", f"  command: {json.dumps(argv)}", f"  env: {{PYTHONPATH: {json.dumps(str(PROJECT_ROOT))}}}",
        "  served_id: tiny"]) + "\n")
    return path


def session(directory: Path, cells: str, html: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", cells,
           f"--model={write_profile(directory)}", f"--results-dir={directory / 'results'}", "--port", "0",
           "--requests", "6", "--concurrency", "1,2", "--warmup", "1", "--progress-interval", "0",
           "--host-lock-timeout", str(HOST_LOCK_WAIT_S), f"--html={directory / html}", "--self-contained-html"]
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})


def split_dir(directory: Path) -> Path:
    (found,) = (directory / "results" / RESULTS_NAME).glob("*/chat")
    return found


def result(split: Path, framework: str, run_id: str | None = None) -> dict:
    paths = sorted(split.glob(f"{framework}_*.json"))
    return json.loads((paths[-1] if run_id is None else split / f"{framework}_{run_id}.json").read_text())


def table(report: str, heading: str) -> dict[str, list[str]]:
    block = report.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in block.splitlines() if line.startswith("| ")]
    return {"header": rows[0], **{r[0]: r[1:] for r in rows[1:]}}


def csv_flags(split: Path) -> dict[str, set[str]]:
    with (split / "comparison.csv").open() as f:
        rows = list(csv.DictReader(f))
    return {fw: {r["standing"] for r in rows if r["framework"] == fw} for fw in {r["framework"] for r in rows}}


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("standing")
    first = session(directory, "llamacpp or openai", "first.html")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    (directory / "first").mkdir()
    split = split_dir(directory)
    for name in ("REPORT.md", "comparison.csv", "comparison.json"):
        (directory / "first" / name).write_text((split / name).read_text())
    second = session(directory, "openai", "second.html")
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-2000:]
    return directory


def test_one_session_marks_the_degraded_cells_figures_and_orders_none_of_them(sessions):
    split = split_dir(sessions)
    runs = sorted(p.stem.split("_", 1)[1] for p in split.glob("openai_*.json"))
    llamacpp, openai = result(split, "llamacpp"), result(split, "openai", runs[0])
    assert openai["verdict"]["verdict"] == "degraded" and re.match(r"4/12 requests failed \(33\.3%",
                                                                  openai["verdict"]["reason"])
    verdict = assert_ok_unless_client_limited(llamacpp["verdict"], "llamacpp")
    mark = "" if verdict == "ok" else " (degraded)"
    report = (sessions / "first" / "REPORT.md").read_text()
    c2 = table(report, "Concurrency 2")
    assert c2["header"] == ["Metric", f"llamacpp{mark}", "openai (degraded)"]
    throughput = c2["Output throughput (tok/s)"]
    assert throughput[1].endswith(" (degraded)") and re.match(r"^\d+\.\d", throughput[1])
    assert throughput[0].endswith(mark) and (mark or "(degraded)" not in throughput[0])
    assert "Marked figures (docs/results.md, Standing): " in report and "openai (degraded): degraded: 4/12" in report
    between = report.split("## Between frameworks\n", 1)[1].split("\n## ", 1)[0]
    left = "llamacpp (degraded), openai (degraded)" if mark else "openai (degraded)"
    assert f"\n- Not judged: {left}.\n" in between.split("### Concurrency 1\n", 1)[1]
    assert "faster than" not in between and not re.search(r"^- output tok/s", between, re.M)
    assert csv_flags(sessions / "first") == {"llamacpp": {verdict}, "openai": {"degraded"}}

    dom = rendered(sessions / "first.html")
    rows = ResultsTable(dom)
    assert rows.column("result")[ROW.format("openai")] == "DEGRADED"  # not pytest's "Passed"
    assert rows.column("result")[ROW.format("llamacpp")] == ("Passed" if verdict == "ok" else "DEGRADED")
    assert rows.column("output_tps")[ROW.format("openai")].endswith(" degraded")
    summary = re.findall(r"<tr><td>(\w+) chat([^<]*)</td><td[^>]*>[\w-]+</td>(.*?)</tr>", dom)
    assert [(fw, marks.startswith(" (degraded)")) for fw, marks, _ in summary] == \
        ([("llamacpp", False), ("openai", True)] if verdict == "ok" else [("llamacpp", True), ("openai", True)])
    assert all(figure.endswith(" (degraded)") for figure in re.findall(r"<td>([^<]*)</td>", summary[1][2]))


def test_a_second_session_marks_the_first_cells_figures_with_their_run(sessions):
    split = split_dir(sessions)
    first_run, second_run = sorted(p.stem.split("_", 1)[1] for p in split.glob("openai_*.json"))
    llamacpp = result(split, "llamacpp")
    assert llamacpp["run_id"] == first_run
    day = llamacpp["finished_at"][:10]
    report = (split / "REPORT.md").read_text()
    assert (f"This run: {second_run} (this pytest session's). From other runs, marked `not this run` "
            f"and in no order: llamacpp: run {first_run} of {day}.") in report
    verdict = llamacpp["verdict"]["verdict"]
    marks = "not this run" if verdict == "ok" else "degraded, not this run"
    assert table(report, "Concurrency 1")["header"] == ["Metric", f"llamacpp ({marks})", "openai (degraded)"]
    assert table(report, "Runs")["llamacpp"][-1].endswith(f"not from this run (run {first_run} of {day})")
    assert table(report, "Concurrency 1")["Output throughput (tok/s)"][0].endswith(f" ({marks})")
    assert f"- Not judged: llamacpp ({marks}), openai (degraded)." in report
    earlier = f"not from this run (run {first_run} of {day})"
    assert csv_flags(split)["llamacpp"] == {earlier if verdict == "ok" else f"degraded; {earlier}"}
    comparison = json.loads((split / "comparison.json").read_text())
    assert comparison["this_run"] == {"run_id": second_run, "chosen_by": "this pytest session's"}
    assert comparison["standing"]["llamacpp"]["marks"][-1]["kind"] == "not from this run"
    (journal,) = split.parent.glob("weekly_*.journal.md")
    assert f"- openai / chat against run {first_run}: not judged: this run: degraded: " in journal.read_text()
