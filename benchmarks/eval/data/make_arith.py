"""Write arith.jsonl, the fixed question set of benchmark_arith.py (200 integer questions).

    python benchmarks/eval/data/make_arith.py          # rewrite arith.jsonl next to this file
    python benchmarks/eval/data/make_arith.py --check  # exit 1 if arith.jsonl differs from a rebuild

Deterministic: one `random.Random(SEED)` draws every operand and the final order, so a rebuild
gives the same bytes (the client's tests check that). The mix: 80 additions and 70 subtractions
of numbers from 10 to 999 (a subtraction's answer may be negative), 50 multiplications of numbers
from 2 to 99. Each line: {"id", "question", "a", "op", "b", "answer"}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

SEED = 20261129
OUT = Path(__file__).with_name("arith.jsonl")
MIX = (("+", 80, 10, 999), ("-", 70, 10, 999), ("*", 50, 2, 99))  # op, count, low, high
QUESTION = "What is {a} {op} {b}? Reply with the number only."


def answer(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unknown operator {op!r}")


def build() -> list[dict]:
    rng = random.Random(SEED)
    drawn = []
    for op, count, low, high in MIX:
        for _ in range(count):
            a, b = rng.randint(low, high), rng.randint(low, high)
            drawn.append((a, op, b))
    rng.shuffle(drawn)  # a --max-samples prefix then mixes the three operators
    return [
        {"id": f"arith_{i:03d}", "question": QUESTION.format(a=a, op=op, b=b), "a": a, "op": op, "b": b,
         "answer": answer(a, op, b)}
        for i, (a, op, b) in enumerate(drawn)
    ]


def render(items: list[dict]) -> str:
    return "".join(json.dumps(item, separators=(", ", ": ")) + "\n" for item in items)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = parser.parse_args()
    text = render(build())
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT}: {'up to date' if same else 'differs from a rebuild'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({text.count(chr(10))} items)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
