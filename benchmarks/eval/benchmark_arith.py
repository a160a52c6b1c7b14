"""Integer arithmetic accuracy of a chat model behind an OpenAI-compatible server.

Usage:
    python benchmarks/eval/benchmark_arith.py --model tiny --port 8001 \\
        --output-dir results/eval/arith --max-samples 50 --concurrency 4
    python benchmarks/eval/benchmark_arith.py --help

The set is fixed: 200 questions in data/arith.jsonl ("What is 281 - 670? Reply with the number
only."), rebuilt byte for byte by data/make_arith.py. --max-samples N takes the first N. Each
question is one user message; the reply's content is scored by the rule in README.md ("the last
number in the reply, when it is an integer"). Writes arith_results.json into --output-dir.

Reference Results

Reproducibility references for the named config and subset (Source: n=samples, c=concurrency), NOT CI thresholds.

Accuracy (summary)

| Model | Config        | accuracy | correct | parseable_samples | unparseable_samples | total_samples | failed_requests | Source                                |
| ----- | ------------- | -------- | ------- | ----------------- | ------------------- | ------------- | --------------- | ------------------------------------- |
| tiny  | llamacpp, c=4 | 0.00%    | 0       | 0                 | 50                  | 50            | 0               | main 5a5f61f [Intel Xeon, n=50, c=4]  |
| tiny  | vllm, c=4     | 0.00%    | 0       | 0                 | 50                  | 50            | 0               | main 5a5f61f [Intel Xeon, n=50, c=4]  |

Speed (speed)

| Model | Config        | latency_mean_s | latency_p50_s | latency_p95_s | throughput_qps | output_tok_per_s | Source                                |
| ----- | ------------- | -------------- | ------------- | ------------- | -------------- | ---------------- | ------------------------------------- |
| tiny  | llamacpp, c=4 | 0.366          | 0.125         | 2.439         | 10.58          | 677.1            | main 5a5f61f [Intel Xeon, n=50, c=4]  |
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

from _evalclient import (
    ClientError,
    base_url,
    build_parser,
    chat_body,
    config_block,
    finish,
    first_errors,
    main_wrapper,
    print_speed,
    run_requests,
    speed_block,
    wait_for_server,
)

NAME = "arith"
DATASET = Path(__file__).resolve().parent / "data" / "arith.jsonl"
REPLY_CHARS = 200  # the reply kept per sample is cut to this length
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}

# A number token: an optional minus sign touching the digits (ASCII "-" or U+2212), digits with
# optional thousands commas ("1,365"), an optional fraction. Not glued to letters, digits or a
# dot on either side, so "x2", "v1.2" and "85km" are not numbers. A minus after a digit or
# letter is an operator, not a sign: "5-3" gives 5 and 3.
NUMBER = re.compile(r"(?<![\w.])([-\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?!\w)")
THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def extract_answer(text: str | None) -> int | None:
    """The reply's answer: the LAST number token, if it is an integer; else None (unparseable).

    Before searching, `<think>...</think>` blocks are removed (an unclosed `<think>` hides the
    rest of the reply). A token with a fraction counts only if the fraction is all zeros
    ("85.0" is 85); otherwise, as with no number at all, the reply is unparseable.
    """
    if not text:
        return None
    found = NUMBER.findall(THINK.sub(" ", text))
    if not found:
        return None
    sign, digits, fraction = found[-1]
    if fraction and fraction.strip("0"):
        return None
    value = int(digits.replace(",", ""))
    return -value if sign else value


def load_items(path: Path) -> list[dict]:
    """The question set, each answer re-checked against its operands."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ClientError(f"cannot read the dataset {path}: {exc}", 2) from None
    items = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            ok = OPS[item["op"]](item["a"], item["b"]) == item["answer"] and isinstance(item["question"], str)
        except (ValueError, KeyError, TypeError) as exc:
            raise ClientError(f"{path}:{lineno}: bad item ({type(exc).__name__}: {exc})", 2) from None
        if not ok:
            raise ClientError(f"{path}:{lineno}: answer {item['answer']} does not match its operands", 2)
        items.append(item)
    if not items:
        raise ClientError(f"{path}: no items", 2)
    return items


def score(items: list[dict], replies: list) -> tuple[dict, list[dict]]:
    per_sample = []
    per_op: dict[str, dict] = {}
    for item, reply in zip(items, replies, strict=True):
        prediction = extract_answer(reply.content) if reply.ok else None
        correct = prediction is not None and prediction == item["answer"]
        per_sample.append({
            "id": item["id"],
            "question": item["question"],
            "op": item["op"],
            "answer": item["answer"],
            "prediction": prediction,
            "parseable": prediction is not None,
            "correct": correct,
            "reply": reply.content[:REPLY_CHARS],
            "finish_reason": reply.finish_reason,
            "latency_s": round(reply.latency_s, 4),
            "completion_tokens": reply.completion_tokens,
            "error": reply.error,
        })
        bucket = per_op.setdefault(item["op"], {"total": 0, "correct": 0})
        bucket["total"] += 1
        bucket["correct"] += int(correct)
    total = len(per_sample)
    correct = sum(s["correct"] for s in per_sample)
    parseable = sum(s["parseable"] for s in per_sample)
    for bucket in per_op.values():
        bucket["accuracy"] = round(bucket["correct"] / bucket["total"], 4)
    summary = {
        "accuracy": round(correct / total, 4) if total else 0.0,
        "correct": correct,
        "wrong": total - correct,
        "parseable_samples": parseable,
        "unparseable_samples": total - parseable,
        "total_samples": total,
        "failed_requests": sum(not r.ok for r in replies),
        "per_op": dict(sorted(per_op.items())),
    }
    return summary, per_sample


def run(args) -> int:
    dataset = Path(args.dataset)
    items = load_items(dataset)
    selected = items[: args.max_samples] if args.max_samples else items
    url = base_url(args)
    wait_for_server(url, args.server_wait_s)
    bodies = [chat_body(args, [{"role": "user", "content": item["question"]}]) for item in selected]
    replies, wall_s = run_requests(url, bodies, concurrency=args.concurrency, timeout_s=args.timeout_s)
    summary, per_sample = score(selected, replies)
    speed = speed_block(replies, wall_s)
    config = config_block(args, client=NAME, dataset_size=len(items), samples_run=len(selected),
                          dataset_sha256=hashlib.sha256(dataset.read_bytes()).hexdigest())
    result = {"summary": summary, "speed": speed, "config": config, "per_sample": per_sample}

    print(f"arith: {summary['total_samples']} samples from {dataset.name} against {url} (model {args.model})")
    print(f"  accuracy   {summary['accuracy']:.2%} ({summary['correct']}/{summary['total_samples']}), "
          f"parseable {summary['parseable_samples']}, unparseable {summary['unparseable_samples']}")
    print_speed(speed)
    if speed["failed_requests"]:
        print(f"  failures   {first_errors(replies)}")
    return finish(NAME, args, result, replies)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("Integer arithmetic accuracy over /v1/chat/completions.", max_tokens=64,
                          output_dir="results/eval/arith")
    parser.add_argument("--dataset", default=str(DATASET), help="the question set (JSONL)")
    args = parser.parse_args(argv)
    return main_wrapper(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
