"""`cellbench site RESULTS OUT` (bench.cli.site): per model, machine and split a table whose rows
that do not stand ok sit below, marked; sparklines over levels; provenance in each row's tooltip;
per framework a trend across runs whose marks are the decisions `cellbench compare` makes; and a
page that works offline in headless Chromium, checked as a person sees it (what is drawn, where,
in which order after a click: tests/support/layout.py). On hand-made trees, and on one made by
real cells on two machines over two runs, the second with the server on one CPU and a failed
cell beside it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.cli.decisions.compare import judge_pair, with_floor
from bench.cli.site import main as site_main
from bench.core.result.store import load_results
from bench.host.ports import free_port
from bench.reports.standing import standing_of
from tests.cells.test_open_loop_cells import private_cache
from tests.reports.test_html_report import chromium, rendered
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S
from tests.support.layout import boxes, overlap
from tests.support.results import MACHINE, write_cell


class Page(HTMLParser):
    """What the page shows: per section (model-machine-split) its rows in order (framework, verdict
    text, tooltip) and per framework its trend marks ((figure, run id) -> decision)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.sections: dict[str, dict] = {}
        self._section: dict | None = None
        self._row: dict | None = None
        self._cell: list[str] | None = None
        self._framework = self._figure = self._run = ""
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section":
            self._section = self.sections.setdefault(a["id"], {"rows": [], "marks": {}, "sparks": []})
        elif tag == "tr" and "cell" in a.get("class", "") and self._section is not None:
            self._row = {"framework": a["data-framework"], "ok": a["data-ok"], "title": a["title"], "cells": []}
            self._section["rows"].append(self._row)
        elif tag == "td" and self._row is not None:
            self._cell = []
            self._row["cells"].append(self._cell)
        elif tag == "svg" and a.get("class") == "spark" and self._section is not None:
            self._section["sparks"].append(a["aria-label"])
        elif tag == "div" and a.get("class") == "trend":
            self._framework = a["data-framework"]
        elif tag == "svg" and a.get("class") == "trend-chart":
            self._figure = a["data-figure"]
        elif tag == "g" and a.get("class") == "week":
            self._run = a["data-run"]
        elif tag == "text" and a.get("class") == "decision" and self._section is not None:
            self._section["marks"][(self._framework, self._figure, self._run)] = a["data-decision"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        elif tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def rows(self, section: str) -> list[tuple[str, str]]:
        return [(r["framework"], "".join(r["cells"][1]).strip()) for r in self.sections[section]["rows"]]


def compare_marks(split_dir: Path) -> dict[tuple[str, str, str], str]:
    """What `compare` decides for each run against the framework's run before, at the site's level."""
    loaded, _ = load_results(split_dir)
    marks: dict[tuple[str, str, str], str] = {}
    for fw in {r.framework for r in loaded}:
        history = sorted((r for r in loaded if r.framework == fw), key=lambda r: (r.data["finished_at"], r.run_id))
        top = max((lv["concurrency"] for lv in history[-1].data["levels"]), default=None)
        for old, new in zip(history, history[1:], strict=False):
            pair = judge_pair(with_floor(old), with_floor(new))
            for change in pair.levels.get(f"c={top}", []):
                if change.figure.key in ("output_throughput_tps", "ttft_ms.p50"):
                    marks[(fw, change.figure.key, new.run_id)] = change.decision
    return marks


def hand_made_tree(root: Path) -> Path:
    """Two machines, three weekly runs of llamacpp, vllm (half as fast in week 3) and ollama (3x as
    fast, degraded in week 3); returns lab-b's chat folder."""
    for week, day in enumerate(("2026-11-23", "2026-11-30", "2026-12-07"), start=1):
        run_id = f"{day.replace('-', '')}T100000Z-{week:04x}"
        for slug in ("lab-a", "lab-b"):
            for fw, speed in (("llamacpp", 1.0), ("vllm", 1.6 if week < 3 else 0.5), ("ollama", 3.0)):
                split_dir = write_cell(root, framework=fw, run_id=run_id, finished_at=f"{day}T10:00:30+00:00",
                                       levels=(1, 2, 4), requests=24, speed=speed, machine={**MACHINE, "slug": slug},
                                       failed=12 if (fw, week) == ("ollama", 3) else 0).parent
    return split_dir


def test_a_hand_made_tree_of_two_machines_and_three_weeks(tmp_path, capsys):
    root = tmp_path / "results"
    split_dir = hand_made_tree(root)
    out = tmp_path / "site"
    assert site_main([str(root), str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"{out / 'index.html'}: 2 splits, 6 cells")
    page = Page((out / "index.html").read_text())
    assert list(page.sections) == ["tiny-lab-a-chat", "tiny-lab-b-chat"]
    rows = page.rows("tiny-lab-b-chat")
    # the ok ones first, by output tok/s; ollama, 3x faster but degraded this week, below them, marked
    assert [fw for fw, _ in rows] == ["llamacpp", "vllm", "ollama"], rows
    assert rows[0][1] == "✔ ok" and rows[2][1] == "✖ degraded"
    assert "verdict: degraded: " in page.sections["tiny-lab-b-chat"]["rows"][2]["title"], "why, on hover"
    first = page.sections["tiny-lab-b-chat"]["rows"][0]
    assert "run id: 20261207T100000Z-0003" in first["title"] and "harness commit: 5eed5eed5eed" in first["title"]
    assert "framework version: 1.0.0" in first["title"]
    assert all(re.fullmatch(r"c=1: [\d.]+ tok/s, c=2: [\d.]+ tok/s, c=4: [\d.]+ tok/s", s)
               for s in page.sections["tiny-lab-b-chat"]["sparks"])
    # each mark is what compare decided of that run against the one before; vLLM's halving is marked
    marks = page.sections["tiny-lab-b-chat"]["marks"]
    assert marks == compare_marks(split_dir), "the trend marks exactly compare's decisions"
    assert marks[("vllm", "output_throughput_tps", "20261207T100000Z-0003")] == "regression"
    assert ("ollama", "output_throughput_tps", "20261207T100000Z-0003") not in marks, "a run not ok is not judged"
    data = json.loads((out / "site.json").read_text())
    assert [(v["machine"], len(v["trends"])) for v in data] == [("lab-a", 3), ("lab-b", 3)]
    assert site_main([str(tmp_path / "empty"), str(out)]) == 1
    # two trees holding the same split (two nights' artifacts of one machine) are one split
    night = tmp_path / "next-night"
    write_cell(night, framework="llamacpp", run_id="20261214T100000Z-0004", finished_at="2026-12-14T10:00:30+00:00",
               levels=(1, 2, 4), requests=24, machine={**MACHINE, "slug": "lab-b"})
    assert site_main([str(root), str(night), str(out)]) == 0
    both = json.loads((out / "site.json").read_text())
    (llamacpp,) = [t for t in both[1]["trends"] if t["framework"] == "llamacpp"]
    assert [w["run_id"][:8] for w in llamacpp["weeks"]] == ["20261123", "20261130", "20261207", "20261214"]


def cells(tmp_path: Path, machine: str, *args: str) -> subprocess.CompletedProcess:
    """One session of chat cells as a user runs them, on results of `machine`, in that machine's cache."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", *args, "--port", "0",
           "--results-dir", str(tmp_path / "results"), "--host-lock-timeout", str(HOST_LOCK_WAIT_S)]
    cache = tmp_path / machine / "x-cache"
    if not cache.exists():
        (tmp_path / machine).mkdir()
        private_cache(tmp_path / machine)
    env = {**os.environ, "CELLBENCH_CACHE": str(cache), "CELLBENCH_MACHINE": machine}
    return subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=SESSION_TIMEOUT_S)


@pytest.mark.integration
@pytest.mark.session
@pytest.mark.browser
def test_real_cells_of_two_machines_and_two_runs_make_a_site_that_works_offline(tmp_path):
    profile = tmp_path / "tiny-endpoint.yaml"  # the tiny model's results, served by nobody
    profile.write_text("name: tiny-endpoint\nresults_name: tiny\nbuiltin: tiny\nformats:\n  gguf: {served_id: tiny}\n")
    for machine in ("lab-a", "lab-b"):
        for extra in ((), ("--server-cpus", "0")):  # the second run: llama-server on one CPU
            done = cells(tmp_path, machine, "-k", "llamacpp", "--requests", "8", "--concurrency", "1,2", *extra)
            assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    failed = cells(tmp_path, "lab-b", "-k", "openai", f"--model={profile}", "--ready-timeout", "2",
                   f"--endpoint=http://127.0.0.1:{free_port()}/v1")
    assert failed.returncode == 1, failed.stdout[-3000:]
    out = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "bench.cli", "site", str(tmp_path / "results"), str(out)],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    html = (out / "index.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import""", html), \
        "nothing is fetched at view time"
    page = Page(rendered(out / "index.html"))  # as headless Chromium built it, scripts run, offline
    assert list(page.sections) == ["tiny-lab-a-chat", "tiny-lab-b-chat"]
    rows = page.rows("tiny-lab-b-chat")
    assert [fw for fw, _ in rows] == ["llamacpp", "openai"] and rows[1][1].startswith("✖ "), rows
    tooltip = page.sections["tiny-lab-b-chat"]["rows"][0]["title"]
    assert all(f"{what}: " in tooltip for what in ("framework version", "run id", "adapter sha256", "profile sha256"))
    for machine in ("lab-a", "lab-b"):
        split_dir = tmp_path / "results" / "tiny" / machine / "chat"
        marks = page.sections[f"tiny-{machine}-chat"]["marks"]
        assert marks == compare_marks(split_dir), f"{machine}: the marks are compare's decisions"
        runs, _ = load_results(split_dir)
        if all(standing_of(r.data).ok for r in runs if r.framework == "llamacpp"):  # else not judged: no mark
            assert {key[1] for key in marks} == {"output_throughput_tps", "ttft_ms.p50"}, marks
    # as a person sees it: every section, table and chart drawn, inside the page, none over another
    ok, sunk = "#tiny-lab-b-chat tbody.ok tr", "#tiny-lab-b-chat tbody.sunk tr"
    drawn = boxes(chromium(), out / "index.html", ["section", "svg.spark", "svg.trend-chart", ok, sunk])
    assert len(drawn["section"]) == 2 and all(b["shown"] for kind in drawn.values() for b in kind)
    charts = drawn["svg.trend-chart"]
    assert len(charts) == 2 * 2 and all(b["x"] >= 0 and b["x"] + b["w"] <= 1200 and b["h"] > 50 for b in charts)
    assert not any(overlap(a, b) for i, a in enumerate(charts) for b in charts[i + 1:]), charts
    assert drawn[ok][0]["y"] + drawn[ok][0]["h"] <= drawn[sunk][0]["y"], "the failed cell is drawn below"


@pytest.mark.browser
def test_sorting_the_site_by_a_column_keeps_what_is_not_ok_below(tmp_path):
    root = tmp_path / "results"
    hand_made_tree(root)
    assert site_main([str(root), str(tmp_path / "site")]) == 0
    header = "#tiny-lab-b-chat th[data-sort=num]"  # output tok/s: a first click sorts highest first, a second lowest
    rows = "#tiny-lab-b-chat tr.cell td:first-child"
    for clicks, order in (((header,), ["llamacpp", "vllm", "ollama"]),
                          ((header, header), ["vllm", "llamacpp", "ollama"])):
        drawn = boxes(chromium(), tmp_path / "site" / "index.html", [rows], clicks)
        shown = [b["text"] for b in sorted(drawn[rows], key=lambda b: b["y"])]
        assert shown == order, (clicks, shown)  # ollama, 3x faster but degraded, below whatever the sort

