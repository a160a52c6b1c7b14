"""The server's own view in real llamacpp cells: a server holding requests it cannot start yet
reads as server-bound, in the result, REPORT.md and the HTML review; `--server-metrics off`
neither turns the metrics on nor scrapes them."""

from __future__ import annotations

import pytest

from bench.reports.review import columns
from tests.cells.test_cells_llamacpp import load_valid, no_leaked_servers, result_files, run_pytest  # noqa: F401
from tests.support.busy import TEST_TIMEOUT_S, assert_ok_unless_client_limited

pytestmark = [pytest.mark.integration, pytest.mark.timeout(TEST_TIMEOUT_S),
              pytest.mark.usefixtures("no_leaked_servers")]

SLOTS = 4  # llama-server's --parallel on CPU (adapters/llamacpp.py)


def test_requests_the_server_queues_make_the_level_server_bound(tmp_path):
    """16 requests at once on a server of 4 slots: 12 wait in it while the first 4 run, then 8, then
    4 (256 tokens each at most, ignore_eos): four waves of up to 256 decode steps, whatever the
    host's speed. Scraped every 20 ms, the waiting gauge's mean is well above the 0.5 that makes
    the level server-bound; the server's queue is not the client's fault, so the verdict stays ok.

    llama-server b11434 held a /metrics request sent as the 16 arrived until its first requests
    finished (for how long: docs/measurements.md): those scrapes time out and the block notes it once."""
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--requests", "16", "--concurrency", "16", "--warmup", "0",
                      "--server-metrics", "0.02", "--port", "0",
                      tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    verdict = assert_ok_unless_client_limited(result["verdict"], "llamacpp-chat")
    (level,) = result["levels"]
    assert level["successful"] == 16, level["errors"]
    seen = level["server_metrics"]
    assert seen["interval_s"] == 0.02 and all(e.startswith("TimeoutError") for e in seen["errors"]), seen
    assert seen["counters"]["generated_tokens"] == level["output_tokens_total"] > 0  # no warm-up: the same requests
    waiting, running = seen["gauges"]["waiting"], seen["gauges"]["running"]
    assert running["max"] == SLOTS and 1 <= waiting["max"] <= 16 - SLOTS, seen["gauges"]
    assert waiting["mean"] >= 0.5 and seen["scrapes"] >= 3, seen
    client = level["client"]
    assert client["server_queue"].startswith(f"server queue: {waiting['mean']:.1f} requests waiting on average")
    if verdict == "ok":
        assert client["limited_by"] == "server", client
    else:  # a late client keeps its own cause: its delay is in the numbers, whatever the server did
        assert client["limited_by"] in ("client", "host", "unknown"), client
    report = (path.parent / "REPORT.md").read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in report.splitlines() if line.startswith("| ")}
    assert rows["Server: waiting mean / max"].endswith(f"| {waiting['mean']:.1f} / {waiting['max']:.1f} |")
    assert rows["Server: generated tokens"].endswith(f"| {level['output_tokens_total']} |")
    if verdict == "ok":
        assert "| server (server queue: " in rows["Limited by"]
    assert "Server rows: the server's own /metrics over each level" in report
    # the HTML review's level table, as its expanded row shows it
    review = columns.summary_html({"verdict": verdict, "reason": result["verdict"]["reason"]}, result, [])
    assert "<th>server waiting mean / max</th>" in review and "<th>limited by</th>" in review
    assert f"<td>{waiting['mean']:.1f} / {waiting['max']:.1f}</td>" in review


def test_server_metrics_off_neither_turns_them_on_nor_scrapes(tmp_path):
    proc = run_pytest("-m", "chat", "-k", "llamacpp", "--requests", "3", "--concurrency", "1", "--warmup", "1",
                      "--server-metrics", "off", "--port", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (path,) = result_files(tmp_path)
    result = load_valid(path)
    assert result["run_config"]["server_metrics"] is False
    (server,) = result["servers"]
    assert "--metrics" not in server["command"]["argv"], server["command"]["argv"]
    assert all("server_metrics" not in level for level in result["levels"])
    assert not list(path.parent.glob("*.server-metrics.jsonl"))
    assert "Server: " not in (path.parent / "REPORT.md").read_text()
