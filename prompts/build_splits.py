"""Build cellbench's chat and agent prompt splits from self-written text, deterministically.

    python prompts/build_splits.py            # rewrite prompts/chat.json and prompts/agent.json
    python prompts/build_splits.py --check    # exit 1 if the committed files differ from a rebuild
    python prompts/build_splits.py --out DIR  # write the files somewhere else

Every byte comes from `corpus.py` and `agent_domains.py` (written for cellbench, CC0-1.0) and a
`random.Random` seeded from SEED; nothing is downloaded. `chat_split.py` composes the chat
prompts, `agent_split.py` the agent traces, both sized by `estimate_tokens` (`token_estimate.py`),
a character-class estimate fitted to the tiny model's byte-level BPE tokenizer (vocabulary 2,048:
about two letters per token, a token per digit), so the build needs no tokenizer and gives the
same bytes everywhere; `token_stats.py` then measures the real counts with a tokenizer and its
chat template and writes them to stats.json. This script writes the split files around them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the sibling modules, whether run as a script or imported

from agent_split import build_agent  # noqa: E402
from chat_split import build_chat  # noqa: E402
from provenance import LICENSE  # noqa: E402

SEED = 4004
VERSION = 1


def dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=1) + "\n"


def split_file(split: str, seed: int, prompts: list[dict], warmup: list[dict]) -> dict:
    return {"split": split, "version": VERSION, "seed": seed, "license": LICENSE,
            "generator": "prompts/build_splits.py", "prompts": prompts, "warmup": warmup}


def build(seed: int = SEED) -> dict[str, str]:
    """File name -> exact content."""
    return {"chat.json": dump(split_file("chat", seed, *build_chat(seed))),
            "agent.json": dump(split_file("agent", seed, *build_agent(seed)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write (default: prompts/)")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out; write nothing")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    files = build(args.seed)
    if args.check:
        stale = [n for n, text in files.items()
                 if not (args.out / n).is_file() or (args.out / n).read_text(encoding="utf-8") != text]
        for n in stale:
            print(f"{args.out / n}: differs from a rebuild; run python prompts/build_splits.py", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for n, text in files.items():
        (args.out / n).write_text(text, encoding="utf-8")
        print(f"wrote {args.out / n} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
