"""`cellbench report` on a SiliconBench user's own tree: it names the import command that converts
it (and that command, run as printed, works), never writes its reports over SiliconBench's, and
says nothing once every file is imported.

The files are written here in SiliconBench's format, as its benchmark.py writes them (a result
per framework run, `comparison.json` of collect_results.py, REPORT.md of generate_report.py).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from bench.cli import imports
from bench.reports import rebuild
from tests.support.results import Spec, write_cell

MODEL = "Qwen3-0.6B"


def _level(concurrency: int) -> dict:
    return {"concurrency": concurrency, "num_requests": 100, "successful": 100, "failed": 0,
            "total_tokens_generated": 15334, "total_output_tokens": 15585, "total_input_tokens": 99277,
            "server_usage_available": True, "ttft_avg_ms": 180.2, "ttft_p50_ms": 99.4, "ttft_p99_ms": 859.4,
            "throughput_avg_tps": 175.9, "throughput_p50_tps": 176.3, "itl_avg_ms": 5.71, "itl_p50_ms": 5.69,
            "latency_avg_s": 1.05, "latency_p50_s": 1.15, "latency_p99_s": 2.51, "output_throughput_tps": 148.4,
            "input_throughput_tps": 945.6, "total_token_throughput_tps": 1094.1, "wall_time_s": 105.0,
            "error_samples": []}


def siliconbench_split(split_dir: Path, runs: dict[str, str], *, chip: str | None = None,
                       comparison: bool = True) -> dict[Path, bytes]:
    """SiliconBench's files of one split folder: `runs` is framework -> its YYYYMMDD_HHMMSS.
    Returns every file's bytes, to prove later that nothing touched them."""
    split_dir.mkdir(parents=True)
    for framework, stamp in runs.items():
        data = {"framework": framework, "model": "Qwen3-0.6B-BF16.gguf", "endpoint": "http://localhost:8080",
                "timestamp": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:]}",
                "concurrency_results": [_level(c) for c in (1, 8, 16)], "total_duration_s": 320.5}
        if chip is not None:
            data["machine"] = {"host": "studio.local", "chip": chip, "os": "Darwin 25.0.0"}
        (split_dir / f"{framework}_{stamp}.json").write_text(json.dumps(data, indent=2))
    if comparison:
        (split_dir / "comparison.json").write_text(json.dumps(
            {"model_name": MODEL, "split": split_dir.name, "frameworks": sorted(runs), "results": {}}, indent=2))
        (split_dir / "REPORT.md").write_text(f"# AppleBench Results — {MODEL} ({split_dir.name})\n")
    return {p: p.read_bytes() for p in split_dir.iterdir()}


def report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    rc = rebuild.main(list(args))
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def command_of(line: str, machine: str) -> list[str]:
    """The argv of the command a line names, SLUG filled in as a user would."""
    argv = shlex.split(line.split("convert them: ", 1)[1].split(" (SLUG:")[0].split("; then: ")[0])
    assert argv[:3] == ["cellbench", "import", "siliconbench"], line
    return [machine if arg == "SLUG" else arg for arg in argv[2:]]


def test_the_legacy_tree_names_the_import_that_converts_it_and_that_import_works(tmp_path, capsys):
    root = tmp_path / "results"
    kept = {**siliconbench_split(root / MODEL / "chat", {"llamacpp": "20260423_030410", "mlx_lm": "20260423_030835"}),
            **siliconbench_split(root / MODEL / "agent", {"llamacpp": "20260423_103055"})}

    rc, out, err = report(capsys, "--results-dir", str(root))
    assert rc == 1 and out == []
    assert err == [f"{root} holds 3 SiliconBench result files (its <model>/[<machine>/]<split>/ layout), not "
                   f"cellbench results (<model>/<machine>/<split>/); convert them: cellbench import siliconbench "
                   f"{root} --machine SLUG --results-dir {root} (SLUG: the machine that ran them, as `cellbench "
                   "doctor` names it there; neither their folder nor their files say)"]
    assert {p: p.read_bytes() for p in kept} == kept and len(list(root.rglob("*"))) == 3 + len(kept)

    assert imports.main(command_of(err[0], "m2max")) == 0
    capsys.readouterr()
    rc, out, err = report(capsys, "--results-dir", str(root))
    assert rc == 0 and err == [], "every file is imported: nothing left to say"
    assert f"{root}/{MODEL}/m2max/chat/comparison.json" in out and f"{root}/{MODEL}/m2max/agent/REPORT.md" in out
    comparison = json.loads((root / MODEL / "m2max" / "chat" / "comparison.json").read_text())
    assert sorted(comparison["results"]) == ["llamacpp", "mlx_lm"]
    assert {p: p.read_bytes() for p in kept} == kept, "SiliconBench's own files are never rewritten"


def test_a_machine_folder_or_a_recorded_chip_names_the_machine(tmp_path, capsys):
    root = tmp_path / "results"
    scoped = {**siliconbench_split(root / MODEL / "m5pro" / "chat", {"llamacpp": "20260822_101500"}),
              **siliconbench_split(root / MODEL / "m5pro" / "agent", {"llamacpp": "20260822_131500"})}
    siliconbench_split(root / MODEL / "chat", {"llamacpp": "20260901_090000"}, chip="Apple M2 Max")

    rc, _, err = report(capsys, "--results-dir", str(root))
    assert rc == 1 and len(err) == 2, err
    assert [command_of(line, "never") for line in err] == [
        ["siliconbench", str(root / MODEL / "chat"), "--machine", "m2max", "--results-dir", str(root)],
        ["siliconbench", str(root / MODEL / "m5pro"), "--machine", "m5pro", "--results-dir", str(root)]]
    assert {p: p.read_bytes() for p in scoped} == scoped, "a folder of SiliconBench's alone is never rebuilt"


def test_its_results_dir_habit_a_model_folder_without_comparison_gets_model(tmp_path, capsys, monkeypatch):
    """`--results-dir $RESULTS_DIR` (SiliconBench's results/<model>, here outside any results/
    folder and with no comparison.json to name the model): the command says --results-name, imports
    into the folder above, and works as printed."""
    model_dir = tmp_path / "sb" / MODEL
    siliconbench_split(model_dir / "chat", {"ollama": "20260423_040903"}, comparison=False)
    monkeypatch.chdir(tmp_path)

    rc, _, err = report(capsys, "--results-dir", f"sb/{MODEL}")
    assert rc == 1 and err[0].endswith("; then: cellbench report --results-dir sb (SLUG: the machine that ran "
                                       "them, as `cellbench doctor` names it there; neither their folder nor "
                                       "their files say)"), err
    argv = command_of(err[0], "m2max")
    assert argv == ["siliconbench", f"sb/{MODEL}", "--machine", "m2max", "--results-name", MODEL, "--results-dir", "sb"]
    assert imports.main(argv) == 0
    assert len(list((model_dir / "m2max" / "chat").glob("ollama_*.json"))) == 1
    capsys.readouterr()
    rc, out, err = report(capsys, "--results-dir", "sb")
    assert rc == 0 and err == [] and f"sb/{MODEL}/m2max/chat/comparison.json" in "\n".join(out)


def test_beside_cellbench_results_the_report_is_rebuilt_and_the_rest_named(tmp_path, capsys):
    root = tmp_path / "results"
    write_cell(root, Spec(model=MODEL))
    siliconbench_split(root / MODEL / "chat", {"llamacpp": "20260423_030410"})

    rc, out, err = report(capsys, "--results-dir", str(root))
    assert rc == 0 and any(line.endswith("/chat/comparison.json") for line in out)
    (line,) = err
    assert command_of(line, "m2max") == ["siliconbench", str(root / MODEL / "chat"), "--machine", "m2max",
                                         "--results-dir", str(root)]
