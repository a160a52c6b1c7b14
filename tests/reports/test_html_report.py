"""The pytest-html report, checked where a reader sees it: rendered by headless Chromium.

pytest-html 4 builds its rows with JavaScript from a JSON blob, so the raw file does not hold
them; `chromium --dump-dom` gives the DOM after the scripts ran. Plugin-level sessions use stand-in
cells (real cell ids, outcomes from results written by hand: tests/plugins/test_plugin.py); one session
runs the real llamacpp chat cell. Chromium comes from the system (`make test` installs Debian's
`chromium` when it is missing); without it these tests fail with what to install.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.host.machine import detect
from bench.reports.comparison import settings_of
from bench.reports.review import columns
from bench.reports.review import summary as html_summary
from tests.plugins.test_plugin import cell_dir, hand_result, stand_in_cells
from tests.support.busy import HOST_LOCK_WAIT_S, assert_ok_unless_client_limited
from tests.support.layout import boxes

CHROMIUM_HINT = ("tests/reports/test_html_report.py needs Chromium: "
                 "apt-get install -y --no-install-recommends chromium (as root), or set CHROMIUM=/path/to/chromium")
XSS = "<script>alert(1)</script>"


# ---------------------------------------------------------------- rendering


def chromium() -> str:
    found = os.environ.get("CHROMIUM") or next(
        filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if not found:
        pytest.fail(CHROMIUM_HINT, pytrace=False)
    return found


def rendered(html: Path, query: str = "") -> str:
    """The DOM of `html` after its scripts ran, in a fresh profile (pytest-html keeps the sort
    direction in sessionStorage; a fresh profile starts from the defaults)."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", html.as_uri() + query]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


class ResultsTable(HTMLParser):
    """The rendered results table: its header cells, per row the text of each `col-*` cell, and
    the environment table's texts. `<template>` content (pytest-html's row blueprints) is skipped."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []
        self.rows: list[dict[str, str]] = []
        self.environment: list[str] = []
        self._cell: str | None = None
        self._in_head = self._in_env = False
        self._templates = 0
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "template" or self._templates:
            self._templates += tag == "template"
        elif tag == "thead" and a.get("id") == "results-table-head":
            self._in_head = True
        elif tag == "table" and a.get("id") == "environment":
            self._in_env = True
        elif tag == "th" and self._in_head:
            self.headers.append(a)
        elif tag == "tr" and "collapsible" in a.get("class", "").split():
            self.rows.append({})
        elif tag == "td" and self.rows and (kind := re.match(r"col-(\w+)", a.get("class", ""))):
            self._cell = kind.group(1)
            self.rows[-1][self._cell] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "template":
            self._templates -= 1
        elif tag == "thead":
            self._in_head = False
        elif tag == "table":
            self._in_env = False
        elif tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell:
            self.rows[-1][self._cell] += data
        elif self._in_env and data.strip():
            self.environment.append(data.strip())

    def column(self, kind: str) -> dict[str, str]:
        """testId -> the text of column `kind`, for every row."""
        return {row["testId"]: " ".join(row[kind].split()) for row in self.rows}


# ---------------------------------------------------------------- units


def test_row_numbers_are_the_highest_level_and_the_failure_rate_is_over_all_levels(tmp_path):
    result = hand_result(cell_dir(tmp_path), run_id="20261129T100000Z-bbbb", levels=(1, 8, 2), failed=1,
                         tps=321.0, write=False)
    top = next(lv for lv in result["levels"] if lv["concurrency"] == 8)
    assert columns.row_data(result) == {
        "level": 8, "output_tps": 321.0, "ttft_p50_ms": top["ttft_ms"]["p50"], "tpot_p50_ms": top["tpot_ms"]["p50"],
        "failure_rate": 3 / 12,
        "tps_by_level": {str(lv["concurrency"]): lv["output_throughput_tps"] for lv in result["levels"]},
        "latency_by_level": {str(lv["concurrency"]): [lv["ttft_ms"]["p50"], lv["ttft_ms"]["p90"], lv["e2el_ms"]["p50"]]
                             for lv in result["levels"]},  # the summary's latency frontier
        "settings": settings_of(result["run_config"]),  # for the summary's not-comparable marks
        "standing_facts": {k: result[k] for k in ("run_id", "finished_at", "verdict")}  # its standing, decided
        | {"model": {k: result["model"][k] for k in ("requested", "served")}},  # on the controller
        # c=8's rate rests on time windows of its own run: 8 requests are too few for four of them
        "output_tps_ci95": top["throughput_ci95"]["output_throughput_tps"],
        "interval_basis": "within-run only: a second run on this host can differ by more",
    }
    assert columns.row_data({})["level"] is None  # a skipped cell: no numbers


def test_sort_keys_order_numbers_as_numbers_and_verdicts_by_severity():
    values = [9.5, 100.0, 12.0, 0.0, None, 1234567.25]
    keys = [columns.number_key(v) for v in values]
    assert [v for _, v in sorted(zip(keys, values, strict=True))] == [None, 0.0, 9.5, 12.0, 100.0, 1234567.25]
    cells = {v: columns.row_cells({"verdict": v, "reason": "r", "annotations": []})[0]
             for v in ("ok", "failed", "degraded", "skipped", "wrong-model")}
    assert sorted(cells, key=cells.get) == ["failed", "wrong-model", "degraded", "ok", "skipped"]


def test_server_text_is_escaped_in_every_extra(tmp_path):
    result = hand_result(cell_dir(tmp_path), run_id="20261129T100000Z-bbbb", log_text=f"boot\n{XSS}\n", write=False)
    data = {"verdict": "ok", "reason": f"fine {XSS}", "annotations": ["suspicious"],
            "evidence": {"suspicious": f"10x {XSS}"}, "result_path": "r.json"}
    extras = columns.extras_for(data, result)
    assert [e["format_type"] for e in extras] == ["html", "image", "json", "text", "text"]
    html = extras[0]["content"]
    assert XSS not in html and html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 4  # reason, flag, 2 logs
    assert XSS not in "".join(columns.row_cells(data))
    assert base64.b64decode(extras[1]["content"]).startswith(b"\x89PNG")
    assert extras[3]["content"] == f"boot\n{XSS}" and extras[3]["name"] == "server log c1 (last 60 lines)"


def test_log_tail_is_the_last_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(10000)) + b"\xff bad byte\n")
    tail = columns.tail_lines(log, 3)
    assert tail == "line 9998\nline 9999\n\ufffd bad byte"


# ---------------------------------------------------------------- sessions with stand-in cells


def project_ini(directory: Path) -> None:
    """The project's own pytest.ini (generate_report_on_test, strict markers) in `directory`."""
    shutil.copy(PROJECT_ROOT / "pytest.ini", directory / "pytest.ini")


def pytest_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "bench.plugins.cells", "-p", "no:cacheprovider",
            "--results-dir", "results",
            "--html", "report.html", "--self-contained-html", *args]


def four_cells(root: Path) -> dict[str, dict]:
    """ok (suspicious), degraded, all-failed and a second ok; throughputs whose string order is
    not their numeric order. One server log carries a script tag."""
    chat = cell_dir(root)
    suspicious = "output throughput against run 20261122T100000Z-aaaa: c=2: 9.5 tok/s vs 950.0 tok/s (100.0x lower)"
    cells = {
        "llamacpp-chat": hand_result(chat, run_id="20261129T100000Z-bbbb", tps=9.5, log_text=f"ready\n{XSS}\n",
                                     write=False),
        "vllm-chat": hand_result(chat, run_id="20261129T100000Z-bbbb", framework="vllm", tps=100.0, failed=1,
                                 write=False),
        "mlx_lm-chat": hand_result(chat, run_id="20261129T100000Z-bbbb", framework="mlx_lm", tps=12.0, failed=4,
                                   write=False),
        "hf_transformers-chat": hand_result(chat, run_id="20261129T100000Z-bbbb", framework="hf_transformers",
                                            tps=1234.0, write=False),
    }
    v = cells["llamacpp-chat"]["verdict"]
    cells["llamacpp-chat"]["verdict"] = {**v, "annotations": ["suspicious"], "suspicious": suspicious}
    return cells


CELL_IDS = "llamacpp-chat or vllm-chat or mlx_lm-chat or hf_transformers-chat"
STAND_IN_RUN = "20261129T100000Z-bbbb"
VERDICTS = {  # 8 requests a cell: too few to place a failure rate on either side of 20%, so `uncertain`
    "test_stand_in_cells.py::test_cell[hf_transformers-chat]": "ok uncertain",
    "test_stand_in_cells.py::test_cell[llamacpp-chat]": "ok suspicious",
    "test_stand_in_cells.py::test_cell[mlx_lm-chat]": "all-failed",
    "test_stand_in_cells.py::test_cell[vllm-chat]": "degraded uncertain",
}


@dataclass
class Session:
    html: Path
    proc: subprocess.CompletedProcess
    dom: str  # the report as rendered, default sort


@pytest.fixture(scope="module", params=[pytest.param([], id="single"), pytest.param(["-n", "2"], id="xdist")])
def stand_in_report(request, tmp_path_factory) -> Session:
    """One session of four stand-in cells with --html, without and with xdist."""
    directory = tmp_path_factory.mktemp("stand-in-report")
    project_ini(directory)
    stand_in_cells(directory, four_cells(directory / "results"))
    # the session is the stand-ins' run, so their results are from this run (bench.reports.standing)
    proc = subprocess.run(pytest_command("-k", CELL_IDS, "--run-id", STAND_IN_RUN, *request.param), cwd=directory,
                          capture_output=True, text=True, timeout=600)
    return Session(directory / "report.html", proc, rendered(directory / "report.html"))


@pytest.mark.session
@pytest.mark.browser
def test_verdict_and_metric_columns_in_the_rendered_report(stand_in_report):
    proc = stand_in_report.proc
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout[-3000:]  # the all-failed cell
    assert "cellbench verdicts: 2 ok, 1 degraded, 1 all-failed" in proc.stdout
    table = ResultsTable(stand_in_report.dom)
    sortable = {h["data-column-type"] for h in table.headers if "sortable" in h.get("class", "").split()}
    assert {"verdict", "level", "output_tps", "ttft_p50", "tpot_p50", "failure_rate"} <= sortable
    assert table.column("verdict") == VERDICTS
    # pytest's Result column says the verdict where it is not ok, not pytest's "Passed"/"Failed"
    assert table.column("result") == {
        "test_stand_in_cells.py::test_cell[hf_transformers-chat]": "Passed",
        "test_stand_in_cells.py::test_cell[llamacpp-chat]": "Passed",
        "test_stand_in_cells.py::test_cell[mlx_lm-chat]": "ALL-FAILED",
        "test_stand_in_cells.py::test_cell[vllm-chat]": "DEGRADED"}
    # 8 requests at c=8 leave too few time windows for a rate's interval; it rests on one run
    assert table.column("output_tps")["test_stand_in_cells.py::test_cell[hf_transformers-chat]"] == \
        "1234.0 (n<8) within-run only"
    assert table.column("level")["test_stand_in_cells.py::test_cell[vllm-chat]"] == "c=2"
    assert table.column("failure_rate")["test_stand_in_cells.py::test_cell[mlx_lm-chat]"] == "100.0%"
    assert table.column("failure_rate")["test_stand_in_cells.py::test_cell[vllm-chat]"] == "25.0%"
    assert stand_in_report.dom.count('<img src="data:image/png;base64,') == 4  # one plot per cell, inlined


@pytest.mark.session
@pytest.mark.browser
def test_the_report_opens_on_a_summary_and_the_worst_verdicts(stand_in_report):
    """Above the rows: the verdict counts and every level's output tok/s per cell; the rows open
    sorted worst first (pytest.ini's initial_sort), each verdict in its own colour."""
    dom = stand_in_report.dom
    summary = dom[dom.index('<div class="cellbench-summary">'):]
    summary = summary[:summary.index("</div>")]
    assert dom.index('class="cellbench-summary"') < dom.index('id="results-table"'), "the summary comes first"
    counts = re.sub(r"<[^>]+>", "", summary.split("Verdicts (untick to hide those rows): ")[1].split("</p>")[0])
    assert counts.split() == ["1", "all-failed", "1", "degraded", "2", "ok"]
    assert summary.count('<img class="cellbench-throughput-plot"') == 1  # one split: one plot
    rows = re.findall(r"<tr><td>([\w_]+ chat)(?: \(([^)]+)\))?</td><td[^>]*>([\w-]+)</td>(.*?)</tr>", summary)
    # the ok cells first; the others marked with their verdict, at their name and at every figure
    assert [(cell, mark, verdict) for cell, mark, verdict, _ in rows] == [
        ("hf_transformers chat", "", "ok"), ("llamacpp chat", "", "ok"), ("mlx_lm chat", "all-failed", "all-failed"),
        ("vllm chat", "degraded", "degraded")]
    vllm = next(numbers for cell, _, _, numbers in rows if cell.startswith("vllm"))
    assert re.findall(r"<td>([^<]*)</td>", vllm) == ["100.0 (degraded)", "100.0 (degraded)"]
    hf = next(numbers for cell, _, _, numbers in rows if cell.startswith("hf_transformers"))
    assert "1234.0" in hf
    by_default = ResultsTable(dom).column("verdict")
    assert [v.split()[0] for v in by_default.values()] == ["all-failed", "degraded", "ok", "ok"], "worst first"
    css = columns.verdict_css()
    assert '.col-verdict span[data-sort="5-degraded"]' in css and "#b54708" in css  # amber, not ok's green
    assert '.col-verdict span[data-sort="7-ok"], .cellbench-verdict-ok {color: #067647' in css


@pytest.mark.session
@pytest.mark.browser
def test_a_verdict_unticked_in_the_summary_hides_its_rows_and_survives_a_resort(stand_in_report, tmp_path):
    """The filter runs in a real browser: a test-only script unticks `ok`, then sorts by a column
    (pytest-html renders every row again on a sort); the two ok rows stay hidden, the others shown."""
    click = """<script>window.addEventListener("load", () => setTimeout(() => {
  const box = document.querySelector('input.cellbench-filter[data-verdict="ok"]');
  box.checked = false; box.dispatchEvent(new Event("change"));
  document.querySelector('th[data-column-type="output_tps"]').click();
}, 100));</script></body>"""
    page = tmp_path / "clicked.html"
    page.write_text(stand_in_report.html.read_text().replace("</body>", click))
    dom = rendered(page)
    rows = re.findall(r'<tbody class="results-table-row ([\w -]+)" id="[^"]+\[(\w+)-chat\]">.*?col-verdict">'
                      r'<span data-sort="\d+-([\w-]+)"', dom, flags=re.S)
    assert sorted((verdict, "cellbench-filtered" in classes) for classes, _, verdict in rows) == [
        ("all-failed", False), ("degraded", False), ("ok", True), ("ok", True)]
    # sorted by output tok/s now (ascending: the cells that are not ok, all-failed and degraded, apart from the
    # ok ones), no longer worst first: rendered again
    assert [fw for _, fw, _ in rows] == ["mlx_lm", "vllm", "llamacpp", "hf_transformers"]


def test_skipped_cells_are_one_line_in_the_summary():
    cells = [{"verdict": "skipped", "framework": "omlx", "split": "chat", "row": {}},
             {"verdict": "ok", "framework": "llamacpp", "split": "chat",
              "row": {"tps_by_level": {"1": 148.44, "8": 512.0}}}]
    html = html_summary.session_summary_html(cells)
    assert "<p>Skipped: omlx chat.</p>" in html and "<th>c=1</th><th>c=8</th>" in html
    assert "<td>148.4</td><td>512.0</td>" in html
    assert html_summary.session_summary_html([]) == ""


def test_the_summary_draws_the_memory_frontier_of_the_ok_cells_only():
    def cell(fw: str, verdict: str, tps: float, mib: int) -> dict:
        return {"verdict": verdict, "framework": fw, "split": "chat",
                "row": {"tps_by_level": {"1": tps}, "memory_by_level": {"1": mib << 20}}}
    two = html_summary.session_summary_html([cell("llamacpp", "ok", 600.0, 300), cell("vllm", "ok", 1100.0, 2400)])
    (image,) = re.findall(r'<img class="cellbench-frontier-plot" alt="([^"]+)" src="data:image/png;base64,', two)
    assert image == "output tok/s against server peak memory, chat"
    # a degraded cell is no point: one ok cell left is no frontier to draw
    one = html_summary.session_summary_html([cell("llamacpp", "ok", 600.0, 300),
                                             cell("vllm", "degraded", 1100.0, 2400)])
    assert "cellbench-frontier-plot" not in one
    # a cell without a memory reading (an --endpoint) is not drawn either
    bare = html_summary.session_summary_html([cell("llamacpp", "ok", 600.0, 300),
                                              {"verdict": "ok", "framework": "vllm", "split": "chat",
                                               "row": {"tps_by_level": {"1": 1100.0}}}])
    assert "cellbench-frontier-plot" not in bare


def test_the_summary_draws_latency_against_throughput_with_cells_not_ok_on_no_frontier():
    def cell(fw: str, verdict: str, by_level: dict[str, tuple[float, float | None]]) -> dict:
        return {"verdict": verdict, "framework": fw, "split": "chat",
                "row": {"tps_by_level": {c: tps for c, (tps, _) in by_level.items()},
                        "latency_by_level": {c: [ttft, ttft, None] for c, (_, ttft) in by_level.items()}}}
    ok = cell("llamacpp", "ok", {"1": (50.0, 10.0), "2": (90.0, 15.0)})
    page = html_summary.session_summary_html([ok, cell("vllm", "degraded", {"1": (500.0, 1.0)})])
    (image,) = re.findall(r'<img class="cellbench-latency-frontier-plot" alt="([^"]+)" src="data:image/png;base64,',
                          page)
    assert image == "latency against output tok/s, chat"
    # one level of one ok cell is no frontier to draw, however many cells that are not ok beside it
    lone = html_summary.session_summary_html([cell("llamacpp", "ok", {"1": (50.0, 10.0)}),
                                              cell("vllm", "failed", {"1": (500.0, 1.0), "2": (600.0, 2.0)})])
    assert "cellbench-latency-frontier-plot" not in lone


@pytest.mark.session
@pytest.mark.browser
def test_columns_sort_numerically_in_the_browser(stand_in_report, tmp_path):
    html = stand_in_report.html
    by_tps = ResultsTable(rendered(html, "?sort=output_tps")).column("output_tps")
    # as strings, 9.5 would come last; the all-failed and degraded cells' figures are never sorted in among
    # the ok ones', and carry their verdict
    assert list(by_tps.values()) == ["0.0 (n<8) within-run only all-failed", "100.0 (n<8) within-run only degraded",
                                     "9.5 (n<8) within-run only", "1234.0 (n<8) within-run only"]
    twice = tmp_path / "twice.html"  # the other way, best first: the ok cells first
    twice.write_text(html.read_text().replace("</body>", """<script>window.addEventListener("load", () =>
  setTimeout(() => { const th = document.querySelector('th[data-column-type="output_tps"]'); th.click(); th.click(); },
  100));</script></body>"""))
    best_first = ResultsTable(rendered(twice)).column("output_tps")
    assert [v.split()[0] for v in best_first.values()] == ["1234.0", "9.5", "100.0", "0.0"]
    ttft = ResultsTable(rendered(html, "?sort=ttft_p50")).column("ttft_p50")
    assert [v.endswith(("degraded", "all-failed")) for v in ttft.values()][:2] == [False, False]
    by_verdict = ResultsTable(rendered(html, "?sort=verdict")).column("verdict")
    assert [v.split()[0] for v in by_verdict.values()] == ["all-failed", "degraded", "ok", "ok"]  # worst first


@pytest.mark.session
@pytest.mark.browser
def test_server_log_script_tags_stay_text(stand_in_report):
    assert XSS not in stand_in_report.html.read_text()
    dom = stand_in_report.dom
    assert XSS not in dom, "a server log line became markup"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown, as text, in the log tail
    assert "server log c1" in dom and "ready" in dom


@pytest.mark.session
@pytest.mark.browser
def test_environment_names_the_run_machine_and_framework_versions(stand_in_report):
    env = ResultsTable(stand_in_report.dom).environment
    run_id = re.search(r"^run (\S+);", stand_in_report.proc.stdout, re.M).group(1)
    assert env[env.index("cellbench run") + 1] == run_id
    assert "machine" in env and f"slug: {detect().slug}" in env
    assert "frameworks" in env and {"llamacpp: b9999", "vllm: b9999", "mlx_lm: b9999"} <= set(env)


@pytest.mark.session
@pytest.mark.browser
def test_report_of_a_killed_run_has_the_cells_that_finished(tmp_path):
    project_ini(tmp_path)
    stand_in_cells(tmp_path, {"llamacpp-chat": four_cells(tmp_path / "results")["llamacpp-chat"]})
    (tmp_path / "test_zz_hang.py").write_text(
        "import time\nfrom pathlib import Path\n\n\n"
        "def test_hang():\n    Path('hang-started').touch()\n    time.sleep(600)\n"
    )
    proc = subprocess.Popen(pytest_command("-k", "llamacpp-chat or hang"), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "hang-started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the session ended before its second test"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    html = tmp_path / "report.html"
    assert html.is_file(), "no report left by the killed run"
    table = ResultsTable(rendered(html))
    assert table.column("verdict") == {"test_stand_in_cells.py::test_cell[llamacpp-chat]": "ok suspicious"}
    assert "1/2 test done." in html.read_text()  # pytest-html's running state: the run did not finish


# ---------------------------------------------------------------- the real llamacpp cell


@pytest.mark.timeout(1900)  # waits up to 1500 s for another session's host lock
@pytest.mark.integration
@pytest.mark.browser
def test_real_session_leaves_every_report_and_a_rendered_verdict(tmp_path, llama_server):
    results = tmp_path / "results"
    chat = cell_dir(results)
    # A previous result of this cell, written by hand, 1000x faster than any real one: suspicious.
    hand_result(chat, run_id="20260101T000000Z-0000", tps=1e6, finished_at="2026-01-01T00:10:00+00:00")
    html = results / "report.html"
    # `--opt=PATH`: pytest would take an existing path given as a separate argument for a test path
    cmd = [sys.executable, "-m", "pytest", "-m", "chat", "-k", "llamacpp", "--requests", "4", "--concurrency", "1,2",
           "--port", "0", "-p", "no:cacheprovider", "--host-lock-timeout", str(HOST_LOCK_WAIT_S),
           f"--results-dir={results}", f"--html={html}", "--self-contained-html", "--progress-interval=2"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (result_path,) = [p for p in chat.glob("llamacpp_*.json") if "20260101" not in p.name]
    result = json.loads(result_path.read_text())
    # ok, or degraded because this busy host's client limited it (the cell says so, and it is warned)
    verdict = assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat")
    assert "suspicious" in result["verdict"]["annotations"]
    assert "against run 20260101T000000Z-0000" in result["verdict"]["suspicious"]
    # every artefact of the session, and the terminal lists them
    (journal,) = chat.parent.glob("weekly_*.journal.md")
    written = [chat / "comparison.json", chat / "REPORT.md", chat / "plots" / "throughput.png", journal, html]
    assert all(p.is_file() for p in written), [p for p in written if not p.is_file()]
    for path in (chat / "comparison.json", chat / "REPORT.md", journal, html):
        assert f"  {path}\n" in proc.stdout
    assert "## Suspicious Results\n\n- llamacpp / chat: output throughput against run 20260101T000000Z-0000" in \
        journal.read_text()
    # progress lines: load generator -> cell -> plugin -> terminal, only for levels longer than 2 s
    for level in result["levels"]:
        line = rf"^llamacpp-chat c={level['concurrency']}: \d/4 requests, \d+\.\d tok/s, \d+ s$"
        if level["wall_time_s"] > 3:
            assert re.search(line, proc.stdout, re.M), proc.stdout[-3000:]
        elif level["wall_time_s"] < 2:
            assert not re.search(line, proc.stdout, re.M)
    # the rendered report
    dom = rendered(html)
    table = ResultsTable(dom)
    shown = table.column("verdict")["bench/test_cells.py::test_cell[llamacpp-chat]"]
    # the verdict, then a badge per annotation of the result ("uncertain", "suspicious", and what
    # this run's server did: "chunk-bundling" when llama-server sent several tokens in one event)
    assert shown == " ".join([verdict, *result["verdict"]["annotations"]]), shown
    assert table.column("level") == {"bench/test_cells.py::test_cell[llamacpp-chat]": "c=2"}
    top = result["levels"][-1]
    bound = top["throughput_ci95"]["output_throughput_tps"]  # 4 requests: too few time windows to bound it
    interval = f" (n<{bound['needs_n']})" if bound["low"] is None else f" [{bound['low']:.1f}, {bound['high']:.1f}]"
    badge = "" if verdict == "ok" else f" {verdict}"  # a degraded cell's figures carry its verdict
    assert table.column("output_tps")["bench/test_cells.py::test_cell[llamacpp-chat]"] == \
        f"{top['output_throughput_tps']:.1f}{interval} within-run only{badge}"
    assert table.column("result")["bench/test_cells.py::test_cell[llamacpp-chat]"] == \
        ("Passed" if verdict == "ok" else verdict.upper())
    assert table.column("failure_rate")["bench/test_cells.py::test_cell[llamacpp-chat]"] == "0.0%"
    assert "server log c2" in dom and "data:image/png;base64," in dom
    assert result["framework"]["version"] in " ".join(table.environment)
    # a timeline per level, a bar per logged request (warm-ups included), as the browser built the page
    logged = [json.loads(line) for line in (chat / result["requests_file"]).read_text().splitlines()]
    drawn = Timelines(dom)
    assert list(drawn.levels) == ["c=1", "c=2"], drawn.levels
    for level in result["levels"]:
        c = level["concurrency"]
        assert drawn.levels[f"c={c}"] == sum(1 for r in logged if r["concurrency"] == c), drawn.levels
        caption = next(t for t in drawn.captions if t.startswith(f"llamacpp chat c={c}:"))
        lanes = re.search(r"on (\d+) lanes?,", caption)
        assert lanes is not None and 1 <= int(lanes.group(1)) <= c, caption
    # as a person sees it with every row's details shown: each level's timeline drawn, and the
    # summary's latency frontier where the cell stands ok (two levels: two points)
    plot = "img.cellbench-latency-frontier-plot"
    seen = boxes(chromium(), html, ["figure.timeline svg", plot], clicks=("#show_all_details",))
    timelines = seen["figure.timeline svg"]
    assert len(timelines) == 2 and all(b["shown"] and b["h"] > 20 for b in timelines), timelines
    assert [b["shown"] for b in seen[plot]] == ([True] if verdict == "ok" else [])


class Timelines(HTMLParser):
    """The request timelines in the rendered page: per level, how many request bars its SVG holds,
    and each figure's caption."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.levels: dict[str, int] = {}
        self.captions: list[str] = []
        self._level: str | None = None
        self._caption = False
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "figure" and a.get("class") == "timeline":
            self._level = a["data-level"]
            self.levels[self._level] = 0
        elif tag == "g" and a.get("class") == "request" and self._level is not None:
            self.levels[self._level] += 1
        elif tag == "figcaption":
            self._caption = True
            self.captions.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._level = None
        elif tag == "figcaption":
            self._caption = False

    def handle_data(self, data: str) -> None:
        if self._caption:
            self.captions[-1] += data
