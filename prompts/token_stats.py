"""Measure the shipped splits with real tokenizers and chat templates; write prompts/stats.json.

    python prompts/token_stats.py                          # tiny model's tokenizer (bench.setup.tinymodel)
    python prompts/token_stats.py --tokenizer T.json --template chat_template.jinja
    python prompts/token_stats.py --qwen3-tokenizer Qwen3/tokenizer.json [--qwen3-template ...]
    python prompts/token_stats.py --check                  # exit 1 if stats.json is out of date

Input tokens are counted the way a server counts `usage.prompt_tokens`: the chat template is
rendered (with the generation prompt) and the result tokenized without adding special tokens.
Structure figures (messages, roles, tool calls) need no tokenizer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.setup.prompt_files import SPLITS, load_split  # noqa: E402
from bench.setup.prompts import Prompt, PromptSet  # noqa: E402

STATS_PATH = HERE / "stats.json"
QWEN3_MISSING = ("Qwen3's tokenizer.json is not in this checkout and cannot be downloaded here; "
                 "run prompts/token_stats.py --qwen3-tokenizer PATH where it is available")


@dataclass(frozen=True)
class TokenCounter:
    """A tokenizer plus the chat template that wraps messages the way its server would."""

    label: str
    count: Callable[[Prompt], int]
    source: dict


def render_template(source: str, special: dict[str, str]) -> Callable[..., str]:
    """Compile a Hugging Face chat template the way `apply_chat_template` runs it."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(f"chat template: {message}")

    def tojson(value: object, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime(2026, 1, 1, tzinfo=timezone.utc).strftime(fmt)
    template = env.from_string(source)

    def render(messages: list[dict], tools: list[dict] | None) -> str:
        return template.render(messages=messages, tools=tools, add_generation_prompt=True,
                               enable_thinking=False, **special)
    return render


def make_counter(label: str, origin: str, tokenizer_path: Path, template_path: Path | None) -> TokenCounter:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path))
    source, where = _template_source(tokenizer_path, template_path)
    special = _special_tokens(tokenizer_path)
    render = render_template(source, special)

    def count(p: Prompt) -> int:
        text = render([dict(m) for m in p.messages], list(p.tools) if p.tools else None)
        return len(tok.encode(text, add_special_tokens=False).ids)

    # Hashes, not paths: the file must not change with the machine that measured it.
    return TokenCounter(label, count, {"origin": origin, "tokenizer_sha256": _sha(tokenizer_path),
                                       "template": where,
                                       "template_sha256": hashlib.sha256(source.encode()).hexdigest()})


def _template_source(tokenizer_path: Path, template_path: Path | None) -> tuple[str, str]:
    if template_path is not None:
        return template_path.read_text(encoding="utf-8"), template_path.name
    beside = tokenizer_path.parent / "chat_template.jinja"
    if beside.is_file():
        return beside.read_text(encoding="utf-8"), beside.name
    config = tokenizer_path.parent / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, str):
            return template, "tokenizer_config.json:chat_template"
    raise SystemExit(f"no chat template beside {tokenizer_path}; pass --template")


def _special_tokens(tokenizer_path: Path) -> dict[str, str]:
    config = tokenizer_path.parent / "tokenizer_config.json"
    out = {"bos_token": "", "eos_token": ""}
    if config.is_file():
        data = json.loads(config.read_text(encoding="utf-8"))
        for key in out:
            value = data.get(key)
            out[key] = value.get("content", "") if isinstance(value, dict) else (value or "")
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def summary(values: list[int]) -> dict:
    ordered = sorted(values)
    return {"n": len(ordered), "min": ordered[0], "p50": statistics.median_low(ordered),
            "mean": round(statistics.fmean(ordered), 1), "max": ordered[-1], "total": sum(ordered)}


def structure(ps: PromptSet) -> dict:
    """Tokenizer-free figures of one split."""
    calls = [sum(len(m.get("tool_calls") or ()) for m in p.messages) for p in ps.prompts]
    sizes = [len(p.messages) for p in ps.prompts]
    return {
        "count": len(ps.prompts), "warmup_count": len(ps.warmup),
        "buckets": dict(sorted(Counter(p.meta.get("bucket") for p in ps.prompts).items())),
        "max_tokens": {str(k): v for k, v in sorted(Counter(p.max_tokens for p in ps.prompts).items())},
        "messages_per_prompt": {"min": min(sizes), "mean": round(statistics.fmean(sizes), 2), "max": max(sizes)},
        "last_role": dict(sorted(Counter(p.messages[-1]["role"] for p in ps.prompts).items())),
        "tool_calls": {"total": sum(calls), "prompts_with_tool_calls": sum(1 for c in calls if c),
                       "per_prompt": {"min": min(calls), "mean": round(statistics.fmean(calls), 2), "max": max(calls)}},
        "tool_messages": sum(1 for p in ps.prompts for m in p.messages if m["role"] == "tool"),
        "characters": summary([sum(len(m.get("content") or "") for m in p.messages) for p in ps.prompts]),
    }


def tokens(ps: PromptSet, counter: TokenCounter, tools_ps: PromptSet | None) -> dict:
    counts = {p.name: counter.count(p) for p in ps.prompts}
    buckets: dict[str, list[int]] = {}
    for p in ps.prompts:
        buckets.setdefault(str(p.meta.get("bucket")), []).append(counts[p.name])
    out = {"all": summary(list(counts.values())),
           "by_bucket": {b: summary(v) for b, v in sorted(buckets.items())},
           "warmup": summary([counter.count(p) for p in ps.warmup]),
           "per_prompt": dict(sorted(counts.items()))}
    if tools_ps is not None:
        # The same agent prompts with the tools in the request's `tools` parameter instead.
        out["tools_param"] = summary([counter.count(p) for p in tools_ps.prompts])
    return out


def build_stats(counters: dict[str, TokenCounter | None], notes: dict[str, str]) -> dict:
    splits = {}
    for split in SPLITS:
        ps = load_split(split)
        tools_ps = load_split(split, tools_param=True) if split == "agent" else None
        entry = structure(ps)
        entry["input_tokens"] = {k: (tokens(ps, c, tools_ps) if c else None) for k, c in counters.items()}
        splits[split] = entry
    return {"generator": "prompts/token_stats.py",
            "tokenizers": {k: (c.source if c else None) for k, c in counters.items()},
            "notes": notes, "splits": splits}


def tiny_model_files() -> tuple[Path, Path]:
    from bench.setup.tinymodel import ensure_tiny_model  # built locally; no download

    model = ensure_tiny_model()
    return Path(model.hf_dir) / "tokenizer.json", Path(model.hf_dir) / "chat_template.jinja"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: the tiny model's)")
    parser.add_argument("--template", type=Path, help="chat template (default: beside the tokenizer)")
    parser.add_argument("--qwen3-tokenizer", type=Path, help="Qwen3's tokenizer.json, where available")
    parser.add_argument("--qwen3-template", type=Path, help="Qwen3's chat template (default: beside it)")
    parser.add_argument("--out", type=Path, default=STATS_PATH)
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args(argv)
    if args.tokenizer:
        tok, tpl, origin = args.tokenizer, args.template, f"--tokenizer {args.tokenizer.name}"
    else:
        (tok, tpl), origin = tiny_model_files(), "bench.setup.tinymodel.ensure_tiny_model()"
    notes = {}
    qwen3 = None
    if args.qwen3_tokenizer:
        qwen3 = make_counter("qwen3", f"--qwen3-tokenizer {args.qwen3_tokenizer.name}",
                             args.qwen3_tokenizer, args.qwen3_template)
    else:
        notes["qwen3"] = QWEN3_MISSING
    stats = build_stats({"tiny": make_counter("tiny", origin, tok, tpl), "qwen3": qwen3}, notes)
    text = json.dumps(stats, ensure_ascii=False, sort_keys=True, indent=1) + "\n"
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        if not same:
            print(f"{args.out}: out of date; run python prompts/token_stats.py", file=sys.stderr)
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    for split, entry in stats["splits"].items():
        tiny = entry["input_tokens"]["tiny"]
        by = ", ".join(f"{b} {s['mean']}" for b, s in tiny["by_bucket"].items())
        print(f"{split}: {entry['count']} prompts, tiny tokens mean {tiny['all']['mean']} "
              f"(min {tiny['all']['min']}, max {tiny['all']['max']}); by bucket: {by}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
