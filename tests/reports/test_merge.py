"""`cellbench report --merge`: one report from the result folders of several machines.

Three machines send synthetic results (tests/support/results.py: no server), each at its own
speed so a number taken from the wrong machine, or averaged, cannot pass: m1 as a CI artifact
(`nightly-m1/results/...`, with an older, faster llamacpp run that must lose to its newest, a
macOS-only skip in its journal and a model it only has a journal for), m2 as a bare results
root (its agent vllm cell failed before writing a result: the journal says so), m3 without the
agent split (one of its results is from before the harness block). m4 is expected and sends
nothing. The report is built once, through `cellbench report`, and read back in each test.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.cli.main import main as cellbench
from bench.core import figures
from bench.core.figures.declare import Sampled
from bench.core.figures.memory import MIB
from bench.core.result.model import MachineBlock
from bench.host.samples import MemorySample
from bench.reports.journal import CellEntry, Journal
from bench.reports.merged import gather, render
from tests.support.results import MACHINE, Spec, synthetic_result, write_cell

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SPEED = {"m1": 1.0, "m2": 2.0, "m3": 0.5}
NEW, OLD = "20261130T100000Z-aaaa", "20261129T100000Z-bbbb"
FAILED_REASON = "server exited during start: <libcuda.so.1 | not found>"
SKIP_REASON = "mlx_lm runs on darwin-arm64; this is linux-x86_64"


def machine(slug: str) -> MachineBlock:
    return {**MACHINE, "slug": slug, "host": f"{slug}-host"}


def commit_of(slug: str) -> str:
    return (slug * 20)[:40]


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _journal(machine_dir: Path, slug: str, day: str, *entries: CellEntry, model: str = "tiny") -> None:
    journal = Journal.open(machine_dir, model=model, machine=slug, day=day)
    for entry in entries:
        journal.record(entry)


def build_folders(base: Path) -> dict[str, Path]:
    """The three machines' folders, as they arrive from CI; returns the folder of each machine."""
    folders = {"m1": base / "nightly-m1", "m2": base / "m2", "m3": base / "from-m3"}
    roots = {"m1": folders["m1"] / "results", "m2": folders["m2"], "m3": folders["m3"]}
    for slug, root in roots.items():
        splits = ("chat",) if slug == "m3" else ("chat", "agent")
        for split in splits:
            for fw in ("llamacpp", "vllm"):
                if (slug, split, fw) == ("m2", "agent", "vllm"):
                    continue  # failed before writing a result: only the journal knows
                write_cell(root, Spec(framework=fw, split=split, run_id=NEW, speed=SPEED[slug], levels=(1, 4),
                                      requests=4, warmup=0, commit=commit_of(slug)), machine=machine(slug))
    # m1's older llamacpp chat run was faster: the newest run must stand for m1, not this one
    write_cell(roots["m1"], Spec(run_id=OLD, speed=5.0, levels=(1, 4), requests=4, warmup=0,
                                 finished_at="2026-11-29T10:00:30+00:00"), machine=machine("m1"))
    _journal(roots["m1"] / "tiny" / "m1", "m1", "2026-11-30", CellEntry("mlx_lm", "chat", "skipped", SKIP_REASON))
    _journal(roots["m1"] / "big" / "m1", "m1", "2026-11-30",
             CellEntry("llamacpp", "chat", "skipped", "model needs 200 GiB"), model="big")
    m2 = roots["m2"] / "tiny" / "m2"
    _journal(m2, "m2", "2026-11-29", CellEntry("vllm", "agent", "ok", "an older journal: not this one"))
    _journal(m2, "m2", "2026-11-30", CellEntry("vllm", "agent", "failed", FAILED_REASON))
    m3_chat = roots["m3"] / "tiny" / "m3" / "chat"
    _edit(m3_chat / f"vllm_{NEW}.json", lambda r: r["harness"].update(dirty=True))
    _edit(m3_chat / f"llamacpp_{NEW}.json", lambda r: r.pop("harness"))  # from before the harness block
    return folders


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cellbench(["report", *argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict[str, Any]:
    """The folders, `cellbench report --merge` run over them, and what it wrote and said."""
    base = tmp_path_factory.mktemp("merge")
    folders = build_folders(base)
    out = base / "merged"
    rc, stdout, stderr = run_cli("--merge", *map(str, folders.values()), "--expect", "m1,m2,m3,m4", "--out", str(out))
    return {"folders": folders, "out": out, "rc": rc, "stdout": stdout, "stderr": stderr,
            "merged": json.loads((out / gather.MERGED_JSON).read_text()),
            "md": (out / render.MERGED_MD).read_text(), "html": (out / render.INDEX_HTML).read_text()}


def table(merged: dict[str, Any], model: str, split: str) -> dict[str, Any]:
    (found,) = [t for t in merged["tables"] if (t["model"], t["split"]) == (model, split)]
    return found


def md_section(md: str, heading: str) -> dict[str, list[str]]:
    """The first table under `## heading`, by first cell; the header row is under "header"."""
    block = md.split(f"## {heading}\n", 1)[1].split("\n#", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in block.splitlines() if line.startswith("| ")]
    return {"header": rows[0], **{r[0]: r[1:] for r in rows[1:]}}


def test_the_report_is_written_and_its_files_printed(report):
    assert report["rc"] == 0
    printed = report["stdout"].split()
    out = report["out"]
    assert str(out / "merged.json") in printed and str(out / "MERGED.md") in printed
    assert str(out / "index.html") in printed
    merged = report["merged"]
    assert merged["schema_version"] == 1 and merged["machines"] == ["m1", "m2", "m3", "m4"]
    tables = [(t["model"], t["split"]) for t in merged["tables"]]
    assert tables == [("big", "chat"), ("tiny", "chat"), ("tiny", "agent")]  # chat before agent, as journals list


def test_each_cell_is_that_machines_own_newest_result(report):
    merged, folders = report["merged"], report["folders"]
    for split in ("chat", "agent"):
        t = table(merged, "tiny", split)
        for fw in ("llamacpp", "vllm"):
            for m in t["machines"]:
                cell = t["cells"][fw][m]
                if cell["source"] != "result":
                    continue
                own = json.loads((folders[m] / cell["file"]).read_text())
                assert own["machine"]["slug"] == m and own["run_id"] == NEW
                levels = {str(lv["concurrency"]): lv["output_throughput_tps"] for lv in own["levels"]}
                assert cell["output_tps"] == levels
    chat = table(merged, "tiny", "chat")["cells"]["llamacpp"]
    peaks = {m: chat[m]["output_tps"]["4"] for m in ("m1", "m2", "m3")}
    assert peaks["m3"] < peaks["m1"] < peaks["m2"]  # each machine at its own speed: nothing pooled
    assert chat["m1"]["file"] == f"results/tiny/m1/chat/llamacpp_{NEW}.json"  # the newest, not the faster old run


def test_a_machine_that_sent_nothing_keeps_its_column_in_every_view(report):
    merged, md, html = report["merged"], report["md"], report["html"]
    agent, chat, big = (table(merged, m, s) for m, s in (("tiny", "agent"), ("tiny", "chat"), ("big", "chat")))
    assert agent["missing"] == {"m3": "no result from m3", "m4": "no result from m4"}
    assert chat["missing"] == {"m4": "no result from m4"}
    assert big["missing"] == {m: f"no result from {m}" for m in ("m2", "m3", "m4")}
    for t in (agent, chat, big):
        assert t["machines"] == ["m1", "m2", "m3", "m4"]
        for fw in t["frameworks"]:
            for m, note in t["missing"].items():
                assert t["cells"][fw][m]["reason"] == note and t["cells"][fw][m]["source"] == "missing"
    assert {(m["model"], m["split"], m["machine"]) for m in merged["missing"]} == {
        ("tiny", "agent", "m3"), ("tiny", "agent", "m4"), ("tiny", "chat", "m4"),
        ("big", "chat", "m2"), ("big", "chat", "m3"), ("big", "chat", "m4")}
    rows = md_section(md, "tiny — agent")
    assert rows["header"] == ["Framework", "m1", "m2", "m3", "m4"]
    assert all(r[2:] == ["no result from m3", "no result from m4"] for k, r in rows.items() if k != "header")
    assert all(r[3] == "no result from m4" for k, r in md_section(md, "tiny — chat").items() if k != "header")
    assert "Sent nothing: m4." in md
    assert html.count('<td class="missing">no result from m4</td>') == 6  # 1 + 3 + 2 rows: one per framework
    assert html.count('<td class="missing">no result from m3</td>') == 3  # agent's 2 rows and big's 1
    assert "no result from m4" in report["stderr"]


def test_cell_text_gives_the_verdict_and_each_levels_tok_s(report):
    rows = md_section(report["md"], "tiny — chat")
    cell = table(report["merged"], "tiny", "chat")["cells"]["vllm"]["m2"]["output_tps"]
    assert rows["vllm"][1] == f"ok · c=1 {cell['1']:.1f} · c=4 {cell['4']:.1f} tok/s"
    assert rows["mlx_lm"] == [f"skipped: {SKIP_REASON}", "not run", "not run", "no result from m4"]


def test_provenance_carries_run_id_harness_commit_and_file(report):
    cells = table(report["merged"], "tiny", "chat")["cells"]
    assert cells["vllm"]["m2"]["run_id"] == NEW and cells["vllm"]["m2"]["harness_commit"] == commit_of("m2")
    assert cells["vllm"]["m2"]["framework_version"] == "1.0.0"
    assert cells["vllm"]["m3"]["harness_dirty"] is True
    assert cells["llamacpp"]["m3"]["harness_commit"] is None  # a file from before the harness block
    assert cells["vllm"]["m2"]["file"] == f"tiny/m2/chat/vllm_{NEW}.json"  # a bare root: relative to it
    md = report["md"]
    provenance = md.split("### Provenance — tiny chat\n", 1)[1].split("\n#", 1)[0]
    assert f"| m2 | vllm | {NEW} | {commit_of('m2')[:12]} | 1.0.0 | tiny/m2/chat/vllm_{NEW}.json |" in provenance
    assert f"| m3 | vllm | {NEW} | {commit_of('m3')[:12]}+dirty |" in provenance
    assert f"| m3 | llamacpp | {NEW} | N/A |" in provenance
    assert commit_of("m2")[:12] in report["html"]


def test_a_journal_only_cell_shows_its_verdict_and_is_a_failure(report):
    merged = report["merged"]
    cell = table(merged, "tiny", "agent")["cells"]["vllm"]["m2"]
    assert (cell["source"], cell["verdict"], cell["reason"]) == ("journal", "failed", FAILED_REASON)
    assert cell["file"] == "tiny/m2/weekly_2026-11-30.journal.json"  # the newest journal that has the cell
    assert merged["failures"] == [{"model": "tiny", "split": "agent", "machine": "m2", "framework": "vllm",
                                   "verdict": "failed", "reason": FAILED_REASON}]
    assert md_section(report["md"], "tiny — agent")["vllm"][1] == f"failed: {FAILED_REASON.replace('|', chr(92) + '|')}"
    assert "&lt;libcuda.so.1 | not found&gt;" in report["html"] and "<libcuda" not in report["html"]
    assert '<td class="failure">failed:' in report["html"]
    assert f"failure: tiny agent on m2: vllm failed: {FAILED_REASON}" in report["stderr"]


def test_plots_are_pngs_and_only_tables_with_numbers_have_them(report):
    pngs = sorted(p.name for p in (report["out"] / "plots").glob("*.png"))
    assert pngs == ["tiny_agent_by_machine.png", "tiny_agent_vs_concurrency.png",
                    "tiny_chat_by_machine.png", "tiny_chat_vs_concurrency.png"]  # big: nothing to draw
    for name in pngs:
        assert (report["out"] / "plots" / name).read_bytes()[:8] == PNG_SIGNATURE
        assert f"(plots/{name})" in report["md"]


def test_index_html_is_self_contained(report):
    html = report["html"]
    assert html.count('src="data:image/png;base64,') == 4
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html) and "<link" not in html and "<script" not in html
    assert "<h2>Failures</h2>" in html


def test_a_machine_in_two_folders_is_refused(report, tmp_path):
    twin = tmp_path / "nightly-again"
    shutil.copytree(report["folders"]["m1"] / "results" / "tiny" / "m1", twin / "tiny" / "m1")
    rc, stdout, stderr = run_cli("--merge", str(report["folders"]["m1"]), str(twin), "--out", str(tmp_path / "out"))
    assert rc == 2 and stdout == ""
    assert "machine m1" in stderr and str(report["folders"]["m1"]) in stderr and str(twin) in stderr
    assert not (tmp_path / "out").exists()


def test_no_results_at_all_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    rc, _, stderr = run_cli("--merge", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert rc == 2 and "no results" in stderr
    rc, _, stderr = run_cli("--merge", str(tmp_path / "nowhere"))
    assert rc == 2 and "no such folder" in stderr


def test_sources_name_each_folder_and_its_machines(report):
    folders = report["folders"]
    assert report["merged"]["sources"] == [{"dir": str(folders[m]), "machines": [m]} for m in ("m1", "m2", "m3")]
    assert report["merged"]["expected"] == ["m1", "m2", "m3", "m4"]


def test_cell_text_puts_memory_and_fidelity_beside_speed():
    result = synthetic_result(Spec(levels=(1, 4)))
    for level, mib in zip(result["levels"], (181, 190), strict=True):
        seen = Sampled.over(0.0, 2.0, 1.0, [MemorySample(1.0, mib * MIB, None, None, None)], [])
        figures.attach(level, figures.watched(seen))
    cell = gather.result_cell(result, "x.json", fidelity="16/16 alike to 16 tokens vs hf_transformers")
    tps = cell["output_tps"]
    assert render.cell_text(cell) == (f"ok · c=1 {tps['1']:.1f} · c=4 {tps['4']:.1f} tok/s · peak memory c=1 181 · "
                                      "c=4 190 MiB · fidelity: 16/16 alike to 16 tokens vs hf_transformers")
    # a cell of an earlier merged.json, without either, reads as before
    earlier = {k: v for k, v in cell.items() if k not in ("peak_memory_mib", "fidelity")}
    assert render.cell_text(earlier) == f"ok · c=1 {tps['1']:.1f} · c=4 {tps['4']:.1f} tok/s"


def test_a_framework_that_stands_ok_on_no_machine_is_the_last_row(report):
    # mlx_lm: skipped on m1 (macOS only), not run on m2 and m3: below the two that ran, not between them
    assert table(report["merged"], "tiny", "chat")["frameworks"] == ["llamacpp", "vllm", "mlx_lm"]
    rows = list(md_section(report["md"], "tiny — chat"))
    assert rows[-3:] == ["llamacpp", "vllm", "mlx_lm"]
