"""The servers' own metrics: the exposition text as llama-server and vLLM served it, read under
cellbench's names; and the scraper against a server that does not answer."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from adapters import llamacpp, sglang, vllm
from bench.host.ports import free_port
from bench.run.scrape.exposition import parse
from bench.run.scrape.scraper import Scraper, read

DATA = Path(__file__).parent.parent / "data" / "server-metrics"


def text(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize(("adapter", "file"), [(llamacpp.ADAPTER, "llama-server-b11434.txt"),
                                                (vllm.ADAPTER, "vllm-0.32.0-cpu.txt"),
                                                (sglang.ADAPTER, "sglang-format.txt")])
def test_three_requests_of_32_tokens_read_as_96_generated_under_every_servers_names(adapter, file):
    declared = adapter.server_metrics
    scrape = read(text(file), declared, 1.0)
    assert scrape.counters["generated_tokens"] == 96  # 3 requests x 32 tokens, by the server's count
    assert scrape.gauges["running"] == 0 or adapter is sglang.ADAPTER
    assert set(scrape.counters) == set(declared.counters), "every declared counter is in the server's text"
    assert set(scrape.gauges) == set(declared.gauges)
    assert set(scrape.histograms) == set(declared.histograms)
    for total, count in scrape.histograms.values():
        assert count >= 3 and total > 0 or count == 0


def test_vllms_families_types_and_label_sets():
    families = parse(text("vllm-0.32.0-cpu.txt"))
    ttft = families["vllm:time_to_first_token_seconds"]
    assert ttft.type == "histogram"
    buckets = [s for s in ttft.samples if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 3.0
    assert {s.labels["model_name"] for s in ttft.samples} == {"tiny"}
    success = [s for f in families.values() for s in f.samples if s.name == "vllm:request_success_total"]
    assert {s.labels["finished_reason"]: s.value for s in success}["length"] == 3.0  # ignore_eos: every one ran out
    assert families["vllm:num_requests_running"].type == "gauge"


def test_llama_servers_prompt_counter_leaves_out_its_cached_tokens():
    families = parse(text("llama-server-b11434.txt"))
    assert families["llamacpp:prompt_tokens_total"].total() == 29  # 27 + 1 + 1: 26 reused twice
    assert families["llamacpp:prompt_tokens_cached_total"].total() == 52


def test_escaped_labels_special_values_and_what_is_not_a_sample():
    families = parse('# TYPE x gauge\nx{path="C:\\\\a\\"b\\nc",k="}"} +Inf 1767000000\ny NaN\nz -Inf\n')
    (sample,) = families["x"].samples
    assert sample.labels == {"path": 'C:\\a"b\nc', "k": "}"} and sample.value == math.inf
    assert math.isnan(families["y"].samples[0].value) and families["z"].samples[0].value == -math.inf
    with pytest.raises(ValueError, match="line 2"):
        parse("x 1\nnot a sample line\n")
    with pytest.raises(ValueError, match="not a value"):
        parse("x one\n")


def test_a_server_that_does_not_answer_costs_a_mark_its_timeout_and_is_noted_once(tmp_path):
    port = free_port()  # nothing listens there
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics", vllm.ADAPTER.server_metrics, tmp_path / "s.jsonl",
                      interval_s=0.05, timeout_s=0.5)
    with scraper:
        began = time.monotonic()
        assert scraper.mark() is None
        assert time.monotonic() - began < 5.0  # bounded by the timeout, not by the server
        time.sleep(0.3)  # several more failed scrapes
    assert scraper.scrapes == [] and len(scraper.errors) == 1 and "URLError" in scraper.errors[0]


def test_reading_a_vllm_scrape(benchmark):
    """What one scrape of vLLM's 600 lines costs the process the client runs in (a figure, not a
    bound: `pytest tests/run/test_scrape.py -k vllm_scrape`)."""
    page = text("vllm-0.32.0-cpu.txt")
    scrape = benchmark(read, page, vllm.ADAPTER.server_metrics, 1.0)
    assert scrape.counters["generated_tokens"] == 96 and scrape.histograms["ttft"][1] == 3
