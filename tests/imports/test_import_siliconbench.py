"""`cellbench import siliconbench`: SiliconBench's own result files become cellbench results
labelled `imported`, and every reader (the store's suspicious check, the journal, comparison.json,
REPORT.md, the merged report) keeps them apart from measured ones.

The SiliconBench files are written here, field by field in the order its `scripts/benchmark.py`
writes them: a newer file (machine, framework_version, run_config), an older one without those,
one whose requests all failed, levels it skipped or lost to a crash, and files it would never
write. The last test imports SiliconBench numbers for llama.cpp and then runs the real llama.cpp
cell of the same model, split and machine: the journal compares the two, labelled as imported.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, get_type_hints

import jsonschema
import pytest

from bench.base.paths import PROJECT_ROOT, cache_root
from bench.cli.main import main as cellbench
from bench.core.result import imported, model
from bench.core.result.files import cell_paths, read_result, result_schema, validate
from bench.core.result.store import LoadedResult, previous_of, suspicious
from bench.host.machine import detect
from bench.imports import siliconbench, siliconbench_file, tree
from bench.reports.journal import IMPORTED_COMPARISON, CellEntry, Journal
from bench.reports.merged.gather import result_cell
from bench.reports.merged.render import cell_text
from bench.run.cell_result import CellHistory
from bench.run.config import BudgetSettings, CellConfig
from bench.setup import profiles
from tests.support.busy import HOST_LOCK_WAIT_S, SESSION_TIMEOUT_S, TEST_TIMEOUT_S
from tests.support.results import MACHINE as SYNTHETIC_MACHINE
from tests.support.results import Spec, synthetic_result, write_cell

MACHINE = "m5pro"
SLUG = SYNTHETIC_MACHINE["slug"]  # the machine of tests.support.results' synthetic cells
SILENT = "silent failure: server returned OK but generated only 0 token(s) for prompt '{}' (requested max_tokens=256)"


# ------------------------------------------------------------------ SiliconBench's files, written here


def sb_level(concurrency: int, *, requests: int = 20, failed: int = 0, out_tps: float = 150.0, ttft_ms: float = 90.0,
             itl_ms: float = 6.0, tokens: int = 46, per_chunk: float = 1.0, newer: bool = True,
             warnings: tuple[str, ...] = ()) -> dict[str, Any]:
    """One level of `concurrency_results` as benchmark.py's summarize() writes it."""
    ok = requests - failed
    out = ok * tokens
    wall = out / out_tps
    level: dict[str, Any] = {"concurrency": concurrency, "num_requests": requests, "successful": ok, "failed": failed,
                             "total_tokens_generated": round(out / per_chunk), "total_output_tokens": out}
    if newer:
        level["tokens_per_chunk"] = per_chunk
    level.update({
        "total_input_tokens": ok * 997, "server_usage_available": True,
        "ttft_avg_ms": ttft_ms, "ttft_p50_ms": ttft_ms * 0.9, "ttft_p99_ms": ttft_ms * 3,
        "throughput_avg_tps": 1000 / itl_ms, "throughput_p50_tps": 990 / itl_ms,
        "itl_avg_ms": itl_ms, "itl_p50_ms": itl_ms * 0.98,
        "latency_avg_s": 0.4, "latency_p50_s": 0.38, "latency_p99_s": 1.2,
        "output_throughput_tps": out_tps, "input_throughput_tps": ok * 997 / wall,
        "total_token_throughput_tps": (ok * 997 + out) / wall, "wall_time_s": wall,
        "error_samples": [SILENT.format(f"p{i:03d}_short_out64") for i in range(min(failed, 5))],
    })
    if warnings:
        level["sanity_warnings"] = list(warnings)
    return level


def failed_level(concurrency: int, requests: int = 20, samples: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A level with no success: SiliconBench keeps only the counts, the wall time and samples."""
    return {"concurrency": concurrency, "num_requests": requests, "successful": 0, "failed": requests,
            "wall_time_s": 1.57, "error": "no successful requests",
            "error_samples": list(samples if samples is not None else
                                  (SILENT.format(f"a{i:03d}_vlong_hermes") for i in range(5)))}


def newer_file(framework: str = "llamacpp", timestamp: str = "2026-09-03T19:59:07", **level_kw: Any) -> dict:
    """A September 2026 file: machine, framework_version and run_config, one server per level."""
    levels = [sb_level(c, **level_kw) for c in (1, 8)]
    return {
        "framework": framework,
        "framework_version": {"version": "b6500", "commit": "4f1c2a9", "commit_date": "2026-09-01"},
        "run_config": {"concurrency_levels": [1, 8], "levels_share_server": False, "requests_per_level": 20,
                       "warmup": 3, "split": "chat", "serve_env": {"LLAMACPP_CTX_SIZE": "65536"}},
        "model": "Qwen3-0.6B-BF16.gguf", "endpoint": "http://localhost:8001", "timestamp": timestamp,
        "machine": {"host": "studio", "chip": "Apple M5 Pro", "os": "Darwin 25.6.0"},
        "concurrency_results": levels,
        "total_duration_s": sum(lv["wall_time_s"] for lv in levels) + 30,
    }


def older_file(framework: str = "llamacpp", timestamp: str = "2026-04-23T03:04:11", model: str = "Qwen3-0.6B-BF16.gguf",
               levels: tuple[int, ...] = (1, 8, 16), **level_kw: Any) -> dict:
    """An April 2026 file: no machine, no run_config, no framework_version; chunk-era ITL."""
    results = [sb_level(c, newer=False, **level_kw) for c in levels]
    return {"framework": framework, "model": model, "endpoint": "http://localhost:8001", "timestamp": timestamp,
            "concurrency_results": results, "total_duration_s": sum(lv["wall_time_s"] for lv in results)}


def all_failed_file() -> dict:
    return {"framework": "vllm_mlx", "model": "/Users/me/sb/.models/Qwen3-0.6B-bf16-mlx",
            "endpoint": "http://localhost:8008", "timestamp": "2026-04-23T13:35:38",
            "concurrency_results": [failed_level(c) for c in (1, 8, 16)], "total_duration_s": 5.9}


def write_sb(folder: Path, name: str, data: Any) -> Path:
    """Where run_all.sh leaves it: `<results>/<MODEL>/[<machine>/]<split>/<fw>_<YYYYmmdd_HHMMSS>.json`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data, indent=2) if not isinstance(data, str) else data)
    return path


def utc_id(timestamp: str) -> str:
    """The run id's time part for a SiliconBench timestamp (local, no zone)."""
    return f"{datetime.fromisoformat(timestamp).astimezone(timezone.utc):%Y%m%dT%H%M%SZ}"


def convert_file(path: Path, split: str = "chat", machine: str = MACHINE) -> model.Result:
    source = siliconbench_file.read(path)
    return siliconbench.convert(source, machine=machine, results_name="Qwen3-0.6B", profile="qwen3-0.6b",
                                split=split, model_format="gguf", imported_at="2026-12-01T10:00:00+00:00")


# ------------------------------------------------------------------ conversion


def test_a_newer_file_keeps_its_numbers_machine_and_config_and_labels_each_metric(tmp_path):
    divergence = ("6/20 requests had server completion_tokens diverging >5% from SSE chunk count (avg ratio "
                  "1.20x): throughput_avg_tps and itl_avg_ms use the server token count and are unaffected")
    path = write_sb(tmp_path / "Qwen3-0.6B" / "m5pro" / "chat", "llamacpp_20260903_195907.json",
                    newer_file(per_chunk=1.2, warnings=(divergence,)))
    result = convert_file(path)
    validate(result)
    source = siliconbench_file.read(path)
    assert result["run_id"] == f"{utc_id('2026-09-03T19:59:07')}-{source.sha256[:4]}"
    assert result["imported"]["file"] == str(path) and result["imported"]["timestamp"] == "2026-09-03T19:59:07"
    assert result["imported"]["source_machine"] == {"host": "studio", "chip": "Apple M5 Pro", "os": "Darwin 25.6.0"}
    assert result["machine"] == {"slug": MACHINE, "host": "studio", "os": "Darwin 25.6.0", "chip": "Apple M5 Pro"}
    assert result["framework"]["version"] == "b6500" and result["framework"]["install"]["commit"] == "4f1c2a9"
    assert result["framework"]["install"]["serve_env"] == {"LLAMACPP_CTX_SIZE": "65536"}
    assert result["run_config"] == {"levels": [1, 8], "requests_per_level": 20, "request_timeout_s": 300.0,
                                    "warmup": 3, "levels_share_server": False}
    level = result["levels"][0]
    assert level["output_throughput_tps"] == 150.0 and level["output_tokens_total"] == 20 * 46
    assert level["ttft_ms"]["mean"] == 90.0 and level["ttft_ms"]["p99"] == pytest.approx(270.0)
    assert level["ttft_ms"]["p90"] is None and level["ttft_ms"]["n"] == 20  # never recorded, never invented
    assert level["e2el_ms"]["p50"] == pytest.approx(380.0)
    assert level["itl_per_chunk"] and level["tokens_per_chunk"] == pytest.approx(1.2, rel=1e-3)
    assert level["chunk_divergence"] == {"fraction": 0.3, "warning": True}
    assert not {"client", "warmup", "ttfb_ms", "tpot_ms", "schedule_lag_ms", "started_at"} & set(level)
    assert "servers" not in result and "requests_file" not in result
    methods = result["imported"]["methods"]
    assert methods["output_throughput_tps"]["comparable"] and methods["ttft_ms.mean"]["comparable"]
    assert not methods["itl_ms.mean"]["comparable"] and not methods["ttft_ms.p99"]["comparable"]
    assert methods["itl_ms.mean"]["note"] == "SiliconBench's avg is the first-to-last chunk span per token"
    assert methods["ttft_ms.p50"]["note"] == "SiliconBench's percentiles are nearest-rank"
    assert result["verdict"]["verdict"] == "ok" and result["verdict"]["annotations"][0] == "imported"
    assert result["verdict"]["reason"].startswith("imported from SiliconBench: 40/40 requests ok")
    assert any(w.startswith("c=1: 6/20 requests had server completion_tokens") for w in result["imported"]["warnings"])


def test_an_older_file_without_a_machine_block_takes_the_slug_and_says_what_it_inferred(tmp_path):
    path = write_sb(tmp_path / "results" / "Qwen3-0.6B" / "chat", "llamacpp_20260423_030410.json", older_file())
    source = siliconbench_file.read(path)
    assert tree.split_of(source) == "chat" and tree.model_of(source) == "Qwen3-0.6B"
    result = convert_file(path)
    validate(result)
    assert result["machine"] == {"slug": MACHINE} and result["imported"]["source_machine"] is None
    assert result["framework"]["version"] == "unknown" and "warmup" not in result["run_config"]
    assert result["run_config"]["levels_share_server"] is True  # its old orchestrator: one server for all levels
    warnings = result["imported"]["warnings"]
    assert any(w.startswith("levels_share_server: not recorded") for w in warnings)
    assert any(w.startswith("timestamp: recorded without a zone") for w in warnings)
    assert result["imported"]["methods"]["itl_ms.mean"]["note"] == "SiliconBench's is per chunk, averaged per request"
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 8, 16]


def test_a_file_whose_requests_all_failed_is_all_failed_with_its_messages(tmp_path):
    path = write_sb(tmp_path / "Qwen3-0.6B" / "agent", "vllm_mlx_20260423_133537.json", all_failed_file())
    result = convert_file(path, split="agent")
    validate(result)
    assert result["verdict"]["verdict"] == "all-failed"
    assert result["verdict"]["reason"] == "imported from SiliconBench: 60/60 requests failed, mostly unclassified (60x)"
    level = result["levels"][0]
    assert level["output_throughput_tps"] == 0.0 and level["ttft_ms"]["n"] == 0 and level["ttft_ms"]["mean"] is None
    assert level["stop_reason"] is None and not level["partial"]  # it ran to its end; it only failed
    assert level["errors"] == {"unclassified": 20}
    assert level["dominant_error"] == {"type": "unclassified", "http_status": None, "count": 20}
    assert [s["prompt_name"] for s in level["error_samples"]["unclassified"]][:2] == ["a000_vlong_hermes",
                                                                                      "a001_vlong_hermes"]
    assert not result["imported"]["methods"]["failed"]["comparable"]  # agent: tool-call answers fail there


def test_every_request_answered_404_is_wrong_model_as_cellbench_decides(tmp_path):
    data = all_failed_file()
    data["concurrency_results"] = [failed_level(c, samples=("404, message='Not Found', url='http://localhost:8008"
                                                            "/v1/chat/completions'",)) for c in (1, 8)]
    result = convert_file(write_sb(tmp_path / "m" / "chat", "vllm_mlx_20260601_101010.json", data))
    assert result["verdict"]["verdict"] == "wrong-model"
    assert result["levels"][0]["dominant_error"]["http_status"] == 404


@pytest.mark.parametrize("error, verdict, reason", [
    ("skipped (previous level too slow)", "capped", "SiliconBench skipped c=16 (previous level too slow)"),
    ("server crashed: Server disconnected", "failed", "SiliconBench: server crashed: Server disconnected at c=16"),
])
def test_a_level_it_skipped_or_lost_to_a_crash_is_capped_or_failed(tmp_path, error, verdict, reason):
    data = older_file(levels=(1, 8))
    data["concurrency_results"].append({"concurrency": 16, "num_requests": 20, "successful": 0, "failed": 20,
                                        "wall_time_s": 0, "error": error})
    result = convert_file(write_sb(tmp_path / "m" / "chat", "hf_transformers_20260423_061155.json", data))
    validate(result)
    assert result["verdict"]["verdict"] == verdict
    assert reason in result["verdict"]["reason"]
    last = result["levels"][-1]
    assert last["stop_reason"] == f"SiliconBench: {error}" and last["output_throughput_tps"] is None
    if verdict == "capped":  # it never sent them: SiliconBench's "100 failed" are not failures
        assert (last["num_requests"], last["failed"], last["partial"]) == (0, 0, True)


@pytest.mark.parametrize("content, reason", [
    ('{"framework": "llamacpp", "concurrency_results": [', "not JSON"),
    ("[1, 2]", "a JSON list, not an object"),
    (json.dumps({"model_name": "Qwen3-0.6B", "split": "chat", "frameworks": [], "results": {}}),
     "SiliconBench's comparison.json"),
    (json.dumps({"schema_version": 1, "run_id": "x", "levels": []}), "a cellbench result already"),
    (json.dumps({**older_file(), "timestamp": None}), "timestamp: expected an ISO date and time"),
    (json.dumps({**older_file(), "framework": "../evil"}), "framework: expected a framework name"),
    (json.dumps({**older_file(), "concurrency_results": []}), "concurrency_results: expected a non-empty list"),
    (json.dumps({**older_file(), "concurrency_results": [{**sb_level(1), "successful": 19}]}),
     "concurrency_results[0]: successful + failed (19 + 0) is not num_requests (20)"),
    (json.dumps({**older_file(), "concurrency_results": [{**sb_level(1), "concurrency": 0}]}),
     "concurrency_results[0].concurrency: expected a positive integer, got 0"),
    (json.dumps({**older_file(), "concurrency_results": [{k: v for k, v in sb_level(1).items()
                                                          if k != "ttft_avg_ms"}]}),
     "concurrency_results[0]: 20 successful requests but no number for ttft_avg_ms"),
    (json.dumps({**older_file(), "concurrency_results": [sb_level(1), sb_level(1)]}), "concurrency 1 appears twice"),
])
def test_a_malformed_file_is_refused_with_the_reason(tmp_path, content, reason):
    path = write_sb(tmp_path / "Qwen3-0.6B" / "chat", "llamacpp_20260423_030410.json", content)
    outcome = tree.import_one(path, machine=MACHINE, results_root=tmp_path / "results")
    assert outcome.status == "refused" and reason in outcome.detail, outcome.detail
    assert not (tmp_path / "results").exists()


def test_a_file_of_another_machine_is_refused_naming_both(tmp_path):
    path = write_sb(tmp_path / "results" / "Qwen3-0.6B" / "m5pro" / "chat", "llamacpp_20260903_195907.json",
                    newer_file())
    outcome = tree.import_one(path, machine="m2max", results_root=tmp_path / "out")
    assert outcome.status == "refused"
    assert "records machine 'Apple M5 Pro' (host studio), whose slug is m5pro, not m2max (--machine)" in outcome.detail
    assert tree.import_one(path, machine="m5pro", results_root=tmp_path / "out").status == "imported"


def test_a_file_whose_split_or_model_cannot_be_told_is_refused_saying_what_to_pass(tmp_path):
    path = write_sb(tmp_path / "somewhere", "llamacpp_20260423_030410.json", older_file())
    outcome = tree.import_one(path, machine=MACHINE, results_root=tmp_path / "results")
    assert outcome.status == "refused" and "split unknown" in outcome.detail
    flat = write_sb(tmp_path / "chat", "llamacpp_20260423_030410.json", older_file())
    assert "pass --results-name" in tree.import_one(flat, machine=MACHINE, results_root=tmp_path / "results").detail
    assert tree.import_one(flat, machine=MACHINE, results_root=tmp_path / "results", model="tiny").status == "imported"


# ------------------------------------------------------------------ the schema stays strict for measured results


def _else() -> dict[str, Any]:
    return result_schema()["else"]


def test_a_measured_result_is_still_checked_as_strictly_as_before():
    for path in (("servers",), ("requests_file",), ("levels", 0, "client"), ("levels", 0, "warmup"),
                 ("levels", 0, "tpot_ms"), ("run_config", "prompts"), ("machine", "cpu"), ("model", "served")):
        result: Any = copy.deepcopy(synthetic_result())
        holder = result
        for key in path[:-1]:
            holder = holder[key]
        del holder[path[-1]]
        with pytest.raises(jsonschema.ValidationError, match=f"'{path[-1]}' is a required property"):
            validate(result)


def test_only_an_imported_result_may_lack_them_and_it_must_say_so(tmp_path):
    result = convert_file(write_sb(tmp_path / "m" / "chat", "llamacpp_20260423_030410.json", older_file()))
    validate(result)
    result["verdict"]["annotations"].remove("imported")
    with pytest.raises(jsonschema.ValidationError):
        validate(result)


def test_the_measured_only_keys_are_the_typed_dicts_optional_ones():
    typed = {"#": model.Result, "machine": model.MachineBlock, "model": model.Model, "run_config": model.RunConfig,
             "levels": model.Level}
    for where, block in [("#", _else()), *_else()["properties"].items()]:
        required = set(block.get("required") or block.get("items", {}).get("required", ()))
        hints = typed[where]
        assert required <= set(get_type_hints(hints)) - hints.__required_keys__, where
    block = result_schema()["properties"]["imported"]
    assert set(get_type_hints(model.Imported)) == set(block["properties"]) == set(block["required"])
    assert set(get_type_hints(model.MetricMethod)) == set(result_schema()["$defs"]["metric_method"]["properties"])


# ------------------------------------------------------------------ comparing with an imported result


def imported_cell(root: Path, *, split_model: str = "tiny", tps: float = 150.0, levels: tuple[int, ...] = (1, 2),
                  timestamp: str = "2026-11-20T10:15:00") -> model.Result:
    """Import an older-style SiliconBench file into the results tree of the synthetic cells."""
    sb = write_sb(root / "sb" / split_model / "chat", "llamacpp_20261120_101500.json",
                  older_file(model="tiny", timestamp=timestamp, levels=levels, out_tps=tps))
    outcome = tree.import_one(sb, machine=SLUG, results_root=root / "results", model=split_model)
    assert outcome.status == "imported", outcome.detail
    assert outcome.target is not None
    return read_result(outcome.target)


def test_suspicious_against_an_imported_result_compares_output_only_and_names_what_it_left_out(tmp_path):
    before = imported_cell(tmp_path, tps=50000.0)
    now = read_result(write_cell(tmp_path / "results", Spec(run_id="20261130T100000Z-aaaa")))
    reason = suspicious(now, before)
    assert reason is not None
    assert reason.startswith("output throughput against imported SiliconBench result of 2026-11-20 "
                             "(llamacpp_20261120_101500.json): c=1: ")
    assert "ITL avg not compared (SiliconBench's avg is the first-to-last chunk span per token)" in reason
    assert "TTFT p50, TTFT p99, latency p50, latency p99 not compared (SiliconBench's percentiles are nearest-rank)" \
        in reason
    before["imported"]["methods"]["output_throughput_tps"]["comparable"] = False
    assert suspicious(now, before) is None  # nothing comparable: nothing compared


def test_the_journal_line_compares_comparable_metrics_at_common_levels_even_when_nothing_is_suspicious(tmp_path):
    before = imported_cell(tmp_path, tps=150.0, levels=(1, 8))
    path = write_cell(tmp_path / "results", Spec(run_id="20261130T100000Z-aaaa", levels=(1, 2)))
    now = read_result(path)
    current = LoadedResult(path, now)
    previous = previous_of(current)
    assert previous is not None and previous.data == before
    line = imported.comparison_line(now, before)
    assert line is not None
    tps = now["levels"][0]["output_throughput_tps"]
    assert line.startswith(f"llamacpp / chat vs imported SiliconBench result of 2026-11-20 "
                           f"(llamacpp_20261120_101500.json): output tok/s 150.0 -> {tps:.1f} at c=1; TTFT avg 90 ms")
    assert "ITL avg not compared (SiliconBench's avg is the first-to-last chunk span per token)" in line
    assert "ITL p50 not compared (SiliconBench's is per chunk, the median of per-request means)" in line
    assert "c=2" not in line.split(";")[0]  # c=2 is not a level SiliconBench measured
    assert imported.comparison_line(now, now) is None  # a measured previous result: the usual checks only


def test_the_journal_lists_the_comparison_in_its_own_section(tmp_path):
    journal = Journal.open(tmp_path, model="tiny", machine="m", day="2026-11-30")
    line = "llamacpp / chat vs imported SiliconBench result of 2026-11-20 (x.json): output tok/s 41.2 -> 39.8 at c=4"
    journal.record(CellEntry("llamacpp", "chat", "ok", "fine", evidence={IMPORTED_COMPARISON: line}))
    journal.record(CellEntry("vllm", "chat", "ok", "fine"))
    text = journal.md_path.read_text()
    assert f"## Compared With Imported Results\n\n- {line}\n" in text
    assert "## Suspicious Results\n\nNone." in text
    empty = Journal.open(tmp_path / "other", model="tiny", machine="m", day="2026-11-30")
    empty.record(CellEntry("vllm", "chat", "ok", "fine"))
    assert "Imported" not in empty.md_path.read_text()


def test_a_merged_report_labels_an_imported_cell(tmp_path):
    result = imported_cell(tmp_path)
    cell = result_cell(result, "x.json")
    assert cell["imported"] == "imported (SiliconBench)"
    assert cell_text(cell).startswith("ok, imported (SiliconBench) · c=1 150.0")


def test_skip_existing_never_keeps_an_imported_result_as_if_cellbench_had_measured_it(tmp_path):
    imported_cell(tmp_path)
    cfg = CellConfig("llamacpp", "chat", profiles.load_profile("tiny"), tmp_path / "results", "20261201T000000Z-bbbb",
                     budget=BudgetSettings(skip_existing_s=1e12))
    paths = cell_paths(cfg.results_root, "tiny", SLUG, "chat", "llamacpp", cfg.run_id)
    assert CellHistory.read(paths.split_dir).existing(cfg, SLUG) is None
    kept = write_cell(tmp_path / "results", Spec(run_id="20261130T100000Z-aaaa"))
    found = CellHistory.read(paths.split_dir).existing(cfg, SLUG)
    assert found is not None and found.path == kept


# ------------------------------------------------------------------ the command, end to end


def sb_tree(root: Path) -> Path:
    """A SiliconBench results folder: two chat results, its comparison.json, an agent result
    that all failed, and one file it would never write."""
    chat = root / "results" / "Qwen3-0.6B" / "chat"
    write_sb(chat, "llamacpp_20260423_030410.json", older_file())
    write_sb(chat, "mlx_lm_20260423_030835.json", older_file("mlx_lm", "2026-04-23T03:08:35",
                                                               model="/Users/me/.models/Qwen3-0.6B-bf16-mlx"))
    write_sb(chat, "comparison.json", {"model_name": "Qwen3-0.6B", "split": "chat", "frameworks": [], "results": {}})
    write_sb(root / "results" / "Qwen3-0.6B" / "agent", "vllm_mlx_20260423_133537.json", all_failed_file())
    write_sb(chat, "notes.json", {"written": "by hand"})
    return root / "results"


def _files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


@pytest.mark.session
def test_the_command_imports_a_folder_then_reports_them_labelled_and_reimports_nothing(tmp_path, capsys):
    source, results = sb_tree(tmp_path / "sb"), tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "import", "siliconbench", str(source),
                           "--machine", MACHINE, "--results-dir", str(results)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr  # notes.json was refused; the others are in
    assert "refused: " in proc.stderr and "notes.json: not a SiliconBench result" in proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("3 imported, 1 refused")
    chat = results / "Qwen3-0.6B" / MACHINE / "chat"
    assert sorted(p.name.split("_2026")[0] for p in chat.glob("*.json")) == ["llamacpp", "mlx_lm"]
    assert len(list((results / "Qwen3-0.6B" / MACHINE / "agent").glob("vllm_mlx_*.json"))) == 1

    assert cellbench(["report", "--results-dir", str(results)]) == 0
    report = (chat / "REPORT.md").read_text()
    assert "| Metric | llamacpp, imported (SiliconBench) | mlx_lm, imported (SiliconBench) |" in report
    assert "(imported (SiliconBench) from llamacpp_20260423_030410.json)" in report
    assert "| ok (imported) | imported from SiliconBench: 60/60 requests ok" in report
    # every imported figure is marked so (docs/results.md, Standing), one SiliconBench derived otherwise also so
    assert "| ITL avg (ms) | 6.0 (SiliconBench, imported) | 6.0 (SiliconBench, imported) |" in report
    assert "| Output throughput (tok/s) | 150.0 (imported) | 150.0 (imported) |" in report  # comparable
    assert "## Imported results\n\n- llamacpp: imported (SiliconBench) from " in report
    comparison = json.loads((chat / "comparison.json").read_text())
    assert comparison["imported"]["llamacpp"] == \
        f"imported (SiliconBench) from {source / 'Qwen3-0.6B' / 'chat' / 'llamacpp_20260423_030410.json'}"
    assert comparison["results"]["llamacpp"]["imported"]["sha256"]

    before = _files(results)
    capsys.readouterr()
    assert cellbench(["import", "siliconbench", str(source), "--machine", MACHINE, "--results-dir", str(results)]) == 1
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("3 already imported, 1 refused")
    assert _files(results) == before  # nothing written, nothing touched
    moved = tmp_path / "elsewhere" / "chat"
    moved.parent.mkdir()
    (source / "Qwen3-0.6B" / "chat").rename(moved)  # the same files, found at another path
    assert cellbench(["import", "siliconbench", str(moved), "--machine", MACHINE, "--results-dir", str(results),
                      "--results-name", "Qwen3-0.6B"]) == 1
    assert "2 already imported" in capsys.readouterr().out and _files(results) == before


def test_a_dry_run_says_what_it_would_write_and_writes_nothing(tmp_path, capsys):
    source, results = sb_tree(tmp_path / "sb"), tmp_path / "results"
    assert cellbench(["import", "siliconbench", str(source), "--machine", MACHINE, "--results-dir", str(results),
                      "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "would import: " in out and "3 would import, 1 refused" in out and not results.exists()


def test_a_bad_machine_slug_or_path_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cellbench(["import", "siliconbench", str(tmp_path), "--machine", "Apple M5 Pro"])
    assert "is not a machine slug" in capsys.readouterr().err
    assert cellbench(["import", "siliconbench", str(tmp_path / "nothing"), "--machine", MACHINE]) == 1


def test_a_measured_result_is_never_overwritten_nor_shadowed(tmp_path):
    sb = write_sb(tmp_path / "sb" / "tiny" / "chat", "llamacpp_20261120_101500.json",
                  older_file(model="tiny", timestamp="2026-11-20T10:15:00"))
    slug = SLUG
    run_id = f"{utc_id('2026-11-20T10:15:00')}-{siliconbench_file.read(sb).sha256[:4]}"
    target = write_cell(tmp_path / "results", Spec(run_id=run_id))  # a cell that wrote exactly that name
    split_dir = target.parent
    measured, text = read_result(target), target.read_text()
    outcome = tree.import_one(sb, machine=slug, results_root=tmp_path / "results", model="tiny")
    assert outcome.status == "refused" and "is never overwritten" in outcome.detail
    assert target.read_text() == text and read_result(target) == measured
    # a newer measured result of the same cell stays the one the reports choose
    target.unlink()
    newer = read_result(write_cell(tmp_path / "results", Spec(run_id="20261130T100000Z-aaaa")))
    assert tree.import_one(sb, machine=slug, results_root=tmp_path / "results", model="tiny").status == "imported"
    assert cellbench(["report", "--results-dir", str(tmp_path / "results")]) == 0
    comparison = json.loads((split_dir / "comparison.json").read_text())
    assert comparison["provenance"]["llamacpp"]["run_id"] == newer["run_id"] and comparison["imported"] == {}


# ------------------------------------------------------------------ the verification: import, then a real cell


def _private_cache(tmp_path: Path) -> Path:
    """A cache of its own (so this session's host lock is not the real cache's), sharing the real
    cache's framework builds and models by symlink."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for part in ("frameworks", "models"):
        (cache / part).symlink_to(cache_root() / part, target_is_directory=True)
    return cache


@pytest.mark.integration
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_imported_siliconbench_results_then_a_real_llamacpp_cell_the_journal_compares_them(tmp_path):
    results, slug = tmp_path / "results", detect().slug
    sb = write_sb(tmp_path / "sb" / "tiny" / "chat", "llamacpp_20261120_101500.json",
                  older_file(model="tiny", timestamp="2026-11-20T10:15:00", levels=(1, 2), out_tps=41.2))
    assert cellbench(["import", "siliconbench", str(sb), "--machine", slug, "--results-name", "tiny",
                      "--results-dir", str(results)]) == 0
    env = {**os.environ, "CELLBENCH_CACHE": str(_private_cache(tmp_path))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "llamacpp",
                           "--requests", "4", "--warmup", "1", "--concurrency", "1,2", "--port", "0",
                           "--results-dir", str(results), "--host-lock-timeout", str(HOST_LOCK_WAIT_S)],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=SESSION_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    split_dir = results / "tiny" / slug / "chat"
    measured = [r for p in split_dir.glob("llamacpp_*.json") if "imported" not in (r := read_result(p))]
    assert len(measured) == 1
    now = measured[0]
    journal = next((results / "tiny" / slug).glob("weekly_*.journal.md")).read_text()
    section = journal.split("## Compared With Imported Results\n\n", 1)[1].split("\n\n", 1)[0]
    tps = {lv["concurrency"]: lv["output_throughput_tps"] for lv in now["levels"]}
    assert section.startswith("- llamacpp / chat vs imported SiliconBench result of 2026-11-20 "
                              f"(llamacpp_20261120_101500.json): output tok/s 41.2 -> {tps[1]:.1f} at c=1, "
                              f"41.2 -> {tps[2]:.1f} at c=2"), section
    assert "ITL p50 not compared (SiliconBench's is per chunk, the median of per-request means)" in section
    if "suspicious" in now["verdict"]:  # a 10-fold change against it is flagged, saying against what
        assert now["verdict"]["suspicious"].startswith("output throughput against imported SiliconBench result")
    report = (split_dir / "REPORT.md").read_text()
    assert f"| llamacpp | {now['run_id']} |" in report and "imported (SiliconBench)" not in report.split("## Plots")[0]
