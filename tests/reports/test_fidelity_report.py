"""Fidelity in REPORT.md (bench.reports.lenses): each stack's answers compared again, from the answers
files, with the reference's as the comparison chose it; the side-by-side table's column and the
words a sentence calling one stack faster adds."""

from __future__ import annotations

import json
from pathlib import Path

from bench.core.lenses.fidelity import Answer, agreement
from bench.core.result.files import write_result
from bench.reports.comparison import read_comparison, write_comparison
from bench.reports.markdown import write_report
from tests.support.results import write_cell


def _answers(path: Path, first: list[list[int]], second: list[list[int]], reference: str) -> None:
    """Give the result at `path` a fidelity block and its answers file: two passes of the prompts."""
    result = json.loads(path.read_text())
    name = path.name.replace(".json", ".fidelity.jsonl")
    lines = [{"pass": k, "prompt": f"p{i}", "text": "", "tokens": tokens, "finish_reason": "length", "margins": None}
             for k, answers in ((1, first), (2, second)) for i, tokens in enumerate(answers)]
    (path.parent / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    own = agreement([Answer(f"p{i}", tuple(t)) for i, t in enumerate(first)],
                    [Answer(f"p{i}", tuple(t)) for i, t in enumerate(second)])
    result["fidelity"] = {"prompts": len(first), "max_tokens": 32, "unit": "tokens", "answers": name,
                          "logprobs": False, "self": own, "reference_framework": reference}
    write_result(path, result)


def test_the_table_and_the_faster_sentence_say_each_stacks_fidelity(tmp_path):
    root = tmp_path / "results"
    same = [list(range(32))] * 16
    reference = write_cell(root, framework="llamacpp", speed=1.0)
    _answers(reference, same, same, "llamacpp")
    # vllm: 4x as fast; 12 answers alike, 4 that leave the reference's at their first token
    other = write_cell(root, framework="vllm", speed=4.0)
    _answers(other, same[:12] + [[99, *range(31)]] * 4, same[:12] + [[99, *range(31)]] * 4, "llamacpp")
    report = write_report(other.parent, read_comparison(write_comparison(other.parent))).read_text()
    c1 = report.split("## Between frameworks\n", 1)[1].split("### Concurrency 1\n", 1)[1].split("###", 1)[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in c1.splitlines() if line.startswith("| ")}
    assert rows["Framework"].rstrip(" |").endswith("| Fidelity")
    assert rows["llamacpp"].endswith("| the reference; itself: 16/16 alike to 16 tokens |")
    # 4 of 16 diverged where the reference never diverged from itself: p = 0.051 one-sided, not under 5%
    assert "| 12/16 alike to 16 tokens vs llamacpp, median divergence 32" in rows["vllm"]
    assert "(flagged)" not in rows["vllm"]
    faster = [line for line in c1.splitlines() if " is faster than " in line]
    words = ("; fidelity: vllm 12/16 alike to 16 tokens vs llamacpp, llamacpp the reference; itself: 16/16 alike "
             "to 16 tokens")
    assert faster and all(line.endswith(words) for line in faster), faster
