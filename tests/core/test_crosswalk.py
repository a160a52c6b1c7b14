"""The crosswalk (bench.core.crosswalk): it covers every figure cellbench reports, each entry is one
the peer really has (its field is in the peer's source where that source is installed here), and
docs/metrics.md's "Names in other tools" shows exactly the code's entries."""

from __future__ import annotations

import glob
import re
import subprocess
import sys
from pathlib import Path
from typing import get_type_hints

import pytest

from bench.base.paths import PROJECT_ROOT, frameworks_dir
from bench.core import crosswalk, figures
from bench.core.crosswalk import KEYS, TOOLS, PeerMetric, peer_formula, peer_metric, peer_name
from bench.core.metrics.blocks import Goodput, Level
from bench.core.metrics.table import METRICS
from bench.core.schema import docs

DOC = PROJECT_ROOT / "docs" / "metrics.md"
SECTION = "## Names in other tools"
PACKAGES = {"vllm": "vllm", "aiperf": "aiperf", "guidellm": "guidellm"}  # SiliconBench has no package
# vLLM's request function computes what serve.py names in its result ("mean_<metric>_ms"); the
# others name each figure where they define it.
NAMED_IN = {"vllm": "vllm/benchmarks/serve.py"}


def test_every_metric_of_the_table_and_every_level_wide_figure_is_covered():
    assert [m.key for m in METRICS] == list(KEYS[:len(METRICS)]), "the metric table's keys first, in its order"
    level_keys = get_type_hints(Level)
    for key in KEYS[len(METRICS):]:
        head, _, sub = key.partition(".")
        declared = figures.BY_KEY.get(head)
        assert head in level_keys or declared is not None, f"{key} is not a level key"
        if sub:
            assert sub in get_type_hints(Goodput if declared is None else declared.block), key
    for tool in TOOLS:
        assert [e.key for e in crosswalk.crosswalk(tool)] == list(KEYS), tool


def test_the_names_that_trip_people_up():
    # vLLM's TPOT is AIPerf's ITL and guidellm's ITL; vLLM's ITL is AIPerf's ICL; guidellm has no per-gap ITL.
    assert peer_name("vllm", "tpot_ms") == "TPOT"
    assert peer_name("aiperf", "tpot_ms") == "Inter Token Latency"
    assert peer_name("guidellm", "tpot_ms") == "ITL"
    assert peer_name("vllm", "itl_ms") == "ITL"
    assert peer_name("aiperf", "itl_ms") == "Inter Chunk Latency"
    assert peer_name("guidellm", "itl_ms") is None and peer_metric("guidellm", "itl_ms").likeness == "none"
    assert "(output_tokens − 1)" in peer_formula("guidellm", "tpot_ms")
    assert "first token included" in peer_metric("guidellm", "tpot_ms").note


def test_unknown_tools_and_keys_are_refused():
    with pytest.raises(ValueError, match="unknown tool 'genai-perf'"):
        peer_name("genai-perf", "ttft_ms")
    with pytest.raises(KeyError, match="tokens_per_chunk"):
        peer_name("vllm", "tokens_per_chunk")


def test_an_entry_without_a_name_must_say_none():
    with pytest.raises(AssertionError):
        PeerMetric("ttft_ms", None, "time_to_first_token", "x − y", "same", "", "f.py")


def test_importing_it_pulls_in_nothing_else():
    code = ("import sys, bench.core.crosswalk; "
            "print(sorted(m for m in sys.modules if m.startswith(('bench', 'matplotlib', 'numpy'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)  # a printed list of module names
    assert [m for m in loaded if not m.startswith("bench.core.crosswalk")] == ["bench", "bench.core"]


def _site_packages(package: str) -> Path | None:
    """Where `package` is installed on this machine, if anywhere: a venv in cellbench's framework
    cache (`cellbench install vllm`, `aiperf`, `guidellm` put the peers there)."""
    found = glob.glob(f"{frameworks_dir()}/*/*/venv/lib/python3*/site-packages")
    return next((Path(p) for p in found if (Path(p) / package / "__init__.py").is_file()), None)


@pytest.mark.parametrize("tool", sorted(PACKAGES))
def test_each_field_is_in_the_peers_own_source(tool):
    site = _site_packages(PACKAGES[tool])
    if site is None:
        pytest.skip(f"{tool} is not installed here")
    for entry in crosswalk.crosswalk(tool):
        path = site / entry.source
        assert path.exists(), f"{tool} {entry.key}: {entry.source} is not in {site}"
        if entry.field is None:
            continue
        named_in = NAMED_IN.get(tool, entry.source)
        text = (site / named_in).read_text()
        field = entry.field.removeprefix("mean_").removesuffix("_ms") if tool == "vllm" else entry.field
        assert re.search(rf"\b{field}\b", text), f"{tool} {entry.key}: {field!r} is not named in {named_in}"


# ---------------------------------------------------------------- docs/metrics.md


def section() -> str:
    text = DOC.read_text()
    assert SECTION + "\n" in text, f"docs/metrics.md has no {SECTION!r}"
    return text.split(SECTION + "\n", 1)[1].split("\n## ", 1)[0]


def test_the_docs_summary_table_is_the_code_crosswalk():
    assert docs.crosswalk_summary() in section()


@pytest.mark.parametrize("tool", TOOLS)
def test_the_docs_table_of_each_tool_is_its_code_entries(tool):
    part = section().split(f"### {crosswalk.tool_label(tool)}\n", 1)
    assert len(part) == 2, f"no ### {crosswalk.tool_label(tool)} under {SECTION}"
    assert docs.crosswalk_tool(tool) in part[1].split("\n### ", 1)[0]


def test_the_docs_check_fails_on_a_changed_name(monkeypatch):
    from bench.core.crosswalk import aiperf
    changed = tuple(e if e.key != "tpot_ms" else PeerMetric(e.key, "TPOT", e.field, e.formula, e.likeness,
                                                              e.note, e.source) for e in aiperf.ENTRIES)
    monkeypatch.setattr(aiperf, "ENTRIES", changed)
    assert docs.crosswalk_summary() not in section()
    assert docs.crosswalk_tool("aiperf") not in section()
