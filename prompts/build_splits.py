"""Build cellbench's chat and agent prompt splits from self-written text, deterministically.

    python prompts/build_splits.py            # rewrite prompts/chat.json and prompts/agent.json
    python prompts/build_splits.py --check    # exit 1 if the committed files differ from a rebuild
    python prompts/build_splits.py --out DIR  # write the files somewhere else

Every byte comes from `corpus.py` and `agent_domains.py` (written for cellbench, CC0-1.0) and a
`random.Random` seeded from SEED; nothing is downloaded. Sizes are steered by `estimate_tokens`,
a character-class estimate fitted to the tiny model's byte-level BPE tokenizer (vocabulary 2,048:
about two letters per token, a token per digit), so the build needs no tokenizer and gives the
same bytes everywhere; `token_stats.py` then measures the real counts with a tokenizer and its
chat template and writes them to stats.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the sibling modules, whether run as a script or imported

import agent_domains  # noqa: E402
import corpus  # noqa: E402
from agent_domains import Domain, Task  # noqa: E402  (types only)

SEED = 4004
VERSION = 1
LICENSE = "CC0-1.0"
# Tokens per character class, least-squares fitted on this text with a tokenizer trained by the
# tiny model's recipe (real/estimate: mean 1.02, 5th-95th percentile 0.89-1.17).
TOKENS_PER_LETTER, TOKENS_PER_DIGIT, TOKENS_PER_SYMBOL = 0.5, 1.2, 0.6
CHARS_PER_TOKEN = 2.2       # to turn a token budget into a character budget for tool payloads
MESSAGE_OVERHEAD = 6        # <|im_start|>role\n ... <|im_end|>\n
TOOL_OVERHEAD = 10          # <tool_response> ... </tool_response> around each tool result
CALL_OVERHEAD = 16          # <tool_call>{"name": ..., "arguments": ...}</tool_call>
GENERATION_PROMPT = 3       # <|im_start|>assistant\n

# Chat buckets: (name, lowest, highest input tokens, prompts with max_tokens 64, with 256).
# SiliconBench's mix; targets are drawn inside the bounds with a margin so that a tokenizer a
# little different from the estimate still lands every prompt in its bucket.
CHAT_BUCKETS = (("short", 10, 80, 10, 10), ("medium", 80, 500, 10, 10),
                ("long", 500, 2000, 15, 15), ("vlong", 2000, 4000, 15, 15))
CHAT_TARGETS = {"medium": (110, 430), "long": (620, 1720), "vlong": (2250, 3550)}

# Agent buckets by input tokens, with SiliconBench's counts (5 medium, 17 long, 78 very long).
AGENT_BUCKETS = (("medium", 250, 1000, 5), ("long", 1000, 2000, 17), ("vlong", 2000, 10000, 78))
AGENT_END_USER = 35         # the rest end on a tool result, as 64 of SiliconBench's 100 do
MAX_MESSAGES = 20


_DIGIT, _SYMBOL, _SPACE = re.compile(r"\d"), re.compile(r"[^\w\s]"), re.compile(r"\s")


@functools.lru_cache(maxsize=4096)  # the same messages are re-estimated while a trace is sized
def estimate_tokens(text: str) -> int:
    digits, symbols = _DIGIT.subn("", text)[1], _SYMBOL.subn("", text)[1]
    letters = len(text) - digits - symbols - _SPACE.subn("", text)[1]
    return math.ceil(TOKENS_PER_LETTER * letters + TOKENS_PER_DIGIT * digits + TOKENS_PER_SYMBOL * symbols)


def estimate_request(messages: list[dict]) -> int:
    """Input tokens of a request after a ChatML chat template, estimated."""
    total = GENERATION_PROMPT
    for m in messages:
        total += MESSAGE_OVERHEAD + estimate_tokens(m.get("content") or "")
        total += TOOL_OVERHEAD if m.get("role") == "tool" else 0
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            total += CALL_OVERHEAD + estimate_tokens(fn["name"] + fn["arguments"])
    return total


def provenance(template: str) -> str:
    return f"self-written: cellbench prompts/build_splits.py, template {template} (text: prompts/corpus.py)"


def dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=1) + "\n"


# ---------------------------------------------------------------- chat documents
# Each generator yields the units of one document (a heading, a paragraph, an agenda item...);
# `compose` takes units until the document reaches its token target.

def digest_units(rng: random.Random) -> Iterator[str]:
    yield f"Community Digest, issue {rng.randint(12, 180)} ({rng.choice(corpus.TOWNS)} edition)"
    while True:
        for title, paras in rng.sample(corpus.TOPICS, len(corpus.TOPICS)):
            yield f"## {title}\n\n{paras[0]}"
            yield from paras[1:]


def minutes_units(rng: random.Random) -> Iterator[str]:
    people = [f"{rng.choice(corpus.FIRST_NAMES)} {rng.choice(corpus.LAST_NAMES)}" for _ in range(6)]
    yield (f"Minutes: {rng.choice(corpus.MEETING_KINDS)}, {rng.choice(corpus.TOWNS)}, "
           f"{rng.randint(1, 28)} {rng.choice(('March', 'June', 'September', 'November'))}\n"
           f"Present: {', '.join(people)}. Chair: {people[0]}.")
    n = 0
    while True:
        for item in rng.sample(corpus.AGENDA_ITEMS, len(corpus.AGENDA_ITEMS)):
            n += 1
            a, c = rng.sample(people, 2)
            fmt = {"a": a, "b": c, "n": rng.randint(3, 9), "m": rng.randint(0, 2),
                   "d": f"{rng.randint(1, 28)} {rng.choice(('April', 'July', 'October', 'December'))}"}
            lines = [f"{n}. {item[0].upper()}{item[1:]}"]
            lines += [d.format(**fmt) for d in rng.sample(corpus.DISCUSSION, rng.randint(2, 4))]
            lines.append(rng.choice(corpus.DECISIONS).format(**fmt))
            lines.append(rng.choice(corpus.ACTIONS).format(**fmt))
            yield "\n".join(lines)


def incident_units(rng: random.Random) -> Iterator[str]:
    yield f"Weekly incident review, platform group, week {rng.randint(1, 52)}"
    while True:
        svc = rng.choice(corpus.SERVICES)
        a, c = rng.choice(corpus.FIRST_NAMES), rng.choice(corpus.FIRST_NAMES)
        minute = rng.randint(0, 300)
        lines = [f"Incident: {svc} degradation (severity {rng.randint(2, 4)})", "Timeline (UTC):"]
        for event in rng.sample(corpus.TIMELINE_EVENTS, rng.randint(4, 7)):
            minute += rng.randint(2, 19)
            lines.append(f"- {minute // 60 + 8:02d}:{minute % 60:02d} "
                         + event.format(s=svc, a=a, b=c, p=rng.randint(2, 40)))
        lines.append("Analysis: " + " ".join(rng.sample(corpus.INCIDENT_ANALYSIS, 2)))
        yield "\n".join(lines)


def diary_units(rng: random.Random) -> Iterator[str]:
    yield f"Travel journal, {rng.choice(('spring', 'late summer', 'autumn'))} walking trip"
    day = 0
    while True:
        day += 1
        town = rng.choice(corpus.TOWNS)
        yield f"Day {day}, {town}\n" + " ".join(
            x.format(t=town) for x in rng.sample(corpus.DIARY_SENTENCES, rng.randint(4, 6)))


def reviews_units(rng: random.Random) -> Iterator[str]:
    product, kind = rng.choice(corpus.PRODUCTS)
    yield f"Customer reviews for the {product}"
    while True:
        points = " ".join(x.format(k=kind) for x in rng.sample(corpus.REVIEW_POINTS, rng.randint(2, 4)))
        opener = rng.choice(corpus.REVIEW_OPENERS).format(p=product, k=kind)
        yield (f"{rng.choice(corpus.FIRST_NAMES)} {rng.choice(corpus.LAST_NAMES)[0]}., rating "
               f"{rng.randint(1, 5)}/5\n{opener} {points}")


def report_units(rng: random.Random) -> Iterator[str]:
    yield (f"{rng.choice(corpus.COMPANIES)}: quarterly operating report, Q{rng.randint(1, 4)} 2026\n"
           "Prepared for the management board. Figures are unaudited.")
    places = list(corpus.REGIONS) + [f"{t} branch" for t in corpus.TOWNS]
    for place in places:
        fmt = {"r": place, "t": rng.choice(corpus.TOWNS), "x": rng.randint(120, 4800), "n": rng.randint(2, 60),
               "p": rng.randint(61, 94), "d": rng.choice(("up 4%", "down 7%", "up 12%", "flat", "down 2%"))}
        yield f"{place}\n" + " ".join(x.format(**fmt) for x in rng.sample(corpus.REPORT_SENTENCES, rng.randint(4, 6)))


def code_units(rng: random.Random) -> Iterator[str]:
    yield from rng.sample(corpus.CODE_SNIPPETS, len(corpus.CODE_SNIPPETS))


def email_units(rng: random.Random) -> Iterator[str]:
    yield f"Hi {rng.choice(corpus.FIRST_NAMES)},"
    yield from rng.sample(corpus.EMAIL_SENTENCES, len(corpus.EMAIL_SENTENCES))
    yield f"{rng.choice(corpus.FIRST_NAMES)}"


def paragraph_units(rng: random.Random) -> Iterator[str]:
    title, paras = rng.choice(corpus.TOPICS)
    yield rng.choice(paras)


# kind -> (unit generator, separator, instruction templates with {doc}, buckets it serves)
DocKind = tuple[Callable[[random.Random], Iterator[str]], str, tuple[str, ...], tuple[str, ...]]
DOC_KINDS: dict[str, DocKind] = {
    "digest": (digest_units, "\n\n", (
        "Please read the following article and provide a detailed summary:\n\n{doc}",
        "Summarise the newsletter below in five bullet points, then say which section a gardener "
        "would enjoy most.\n\n{doc}",
        "{doc}\n\nWhat are the three most surprising facts in the text above? Quote the sentence "
        "that supports each one.",
        "I don't have time to read all of this. Give me the gist of each section in one line.\n\n{doc}",
    ), ("medium", "long", "vlong")),
    "minutes": (minutes_units, "\n\n", (
        "Below are the minutes of a meeting. List every decision and every action item with its "
        "owner and due date.\n\n{doc}",
        "{doc}\n\nWrite a short email to members who missed this meeting, covering what was decided.",
    ), ("medium", "long", "vlong")),
    "incident": (incident_units, "\n\n", (
        "Here is this week's incident review. Write a two-paragraph summary for leadership and point "
        "out any pattern across the incidents.\n\n{doc}",
        "{doc}\n\nWhich of these incidents should get a follow-up action first, and why?",
    ), ("medium", "long", "vlong")),
    "diary": (diary_units, "\n\n", (
        "Read these travel journal entries and turn them into a day-by-day itinerary table "
        "(day, place, highlight).\n\n{doc}",
        "{doc}\n\nBased on the journal above, what would you tell a friend planning the same trip?",
    ), ("medium", "long", "vlong")),
    "reviews": (reviews_units, "\n\n", (
        "These are customer reviews of one product. Summarise the common praise and complaints, and "
        "estimate the average rating.\n\n{doc}",
        "{doc}\n\nShould the shop keep selling this product? Argue both sides briefly.",
    ), ("medium", "long", "vlong")),
    "report": (report_units, "\n\n", (
        "The following is an internal quarterly report. Which region performed best, which worst, "
        "and why? Answer in one paragraph each.\n\n{doc}",
        "{doc}\n\nDraft three questions the board should ask about this report.",
    ), ("medium", "long", "vlong")),
    "code": (code_units, "\n\n", (
        "Review the following Python code. Point out bugs, unclear names and missing tests.\n\n"
        "```python\n{doc}\n```",
        "```python\n{doc}\n```\n\nExplain what this code does, one function at a time.",
    ), ("medium",)),
    "email": (email_units, " ", (
        "Rewrite this email so it is polite, clear and short:\n\n{doc}",
        "{doc}\n\nHow would the recipient likely feel reading the message above? Suggest a kinder version.",
    ), ("medium",)),
    "paragraph": (paragraph_units, "\n\n", tuple(
        "{doc}\n\n" + q for q in corpus.PARAGRAPH_QUESTIONS), ("medium",)),
}


def compose(kind: str, rng: random.Random, target: int, cap: int) -> tuple[str, str]:
    """Fill one instruction template with units of `kind` until the request estimate reaches
    `target` tokens; never exceed `cap`. Returns (text, template id)."""
    make_units, sep, templates, _ = DOC_KINDS[kind]
    t = rng.randrange(len(templates))
    template = templates[t]
    units: list[str] = []
    text = template.format(doc="")
    misses = 0
    for unit in make_units(rng):
        candidate = template.format(doc=sep.join(units + [unit]).rstrip("\n"))
        if units and estimate_request([{"content": candidate}]) > cap:
            misses += 1  # this unit overshoots; a later, shorter one may still fit
            if misses > 40:
                break
            continue
        misses = 0
        units.append(unit)
        text = candidate
        if estimate_request([{"content": text}]) >= target:
            break
    return text, f"chat/{kind}/{t}"


def spread(rng: random.Random, lo: int, hi: int, n: int) -> list[int]:
    """n targets spread evenly over [lo, hi] (one per stratum), in random order."""
    out = [int(lo + (hi - lo) * (k + rng.random()) / n) for k in range(n)]
    rng.shuffle(out)
    return out


def in_bucket(name: str, est: int, lo: int, hi: int) -> None:
    """Fail the build rather than write a prompt whose estimate left its bucket."""
    if not lo <= est <= hi:
        raise AssertionError(f"{name}: estimated {est} input tokens, outside its bucket [{lo}, {hi}]")


def chat_prompt(name: str, bucket: str, max_tokens: int, text: str, template: str) -> dict:
    est = estimate_request([{"content": text}])
    return {"name": name, "description": f"Input ~{est} tokens, output max {max_tokens}",
            "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
            "meta": {"bucket": bucket, "provenance": provenance(template), "license": LICENSE}}


def build_chat(seed: int) -> dict:
    rng = random.Random(f"{seed}:chat")
    prompts: list[dict] = []
    index = 0
    for bucket, lo, hi, n64, n256 in CHAT_BUCKETS:
        if bucket == "short":
            # Brief questions get the small budget, open-ended ones the large one.
            texts = [(64, q, "chat/short-factual") for q in rng.sample(corpus.SHORT_FACTUAL, n64)]
            texts += [(256, q, "chat/short-open") for q in rng.sample(corpus.SHORT_OPEN, n256)]
            for max_tokens, text, template in texts:
                name = f"p{index:03d}_{bucket}_out{max_tokens}"
                prompts.append(chat_prompt(name, bucket, max_tokens, text, template))
                index += 1
            continue
        kinds = [k for k, v in DOC_KINDS.items() if bucket in v[3]]
        targets = spread(rng, *CHAT_TARGETS[bucket], n64 + n256)
        for j, target in enumerate(targets):
            max_tokens = 64 if j < n64 else 256
            kind = kinds[(j + rng.randrange(len(kinds))) % len(kinds)]
            text, template = compose(kind, rng, target, cap=hi - (hi - lo) // 7)
            prompts.append(chat_prompt(f"p{index:03d}_{bucket}_out{max_tokens}", bucket, max_tokens, text, template))
            index += 1
    for p in prompts:
        lo, hi = next((lo, hi) for b, lo, hi, *_ in CHAT_BUCKETS if b == p["meta"]["bucket"])
        in_bucket(p["name"], estimate_request(p["messages"]), lo, hi)
    rng.shuffle(prompts)
    warmup = [
        chat_prompt("w00_short_out64", "short", 64, corpus.WARMUP_CHAT[0], "chat/warmup"),
        chat_prompt("w01_medium_out256", "medium", 256,
                    corpus.WARMUP_CHAT[1] + rng.choice(rng.choice(corpus.TOPICS)[1]), "chat/warmup"),
    ]
    text, _ = compose("report", rng, 1400, cap=1800)
    warmup.append(chat_prompt("w02_long_out256", "long", 256,
                              "Warm-up document for the server to digest before measurement begins.\n\n" + text,
                              "chat/warmup"))
    return split_file("chat", seed, prompts, warmup)


def split_file(split: str, seed: int, prompts: list[dict], warmup: list[dict]) -> dict:
    return {"split": split, "version": VERSION, "seed": seed, "license": LICENSE,
            "generator": "prompts/build_splits.py", "prompts": prompts, "warmup": warmup}


# ---------------------------------------------------------------- agent traces

TOOLS_INTRO = ("You can call the following tools. Each entry gives the tool's name, what it does and "
               "a JSON schema for its arguments. To call one, reply with a tool call that names the "
               "tool and passes arguments matching the schema; you may call several tools at once "
               "when the calls are independent.\n\nAvailable tools:\n")
RULES = ("Guidelines:\n- Use the tools to look things up rather than guessing.\n"
         "- Ask before any action that changes or deletes data, unless the user already asked for it.\n"
         "- Keep answers short and say which tool results they are based on.\n"
         "- If a tool returns an error, explain it and suggest the next step.")
PREAMBLES = ("Let me check that first.", "I'll look this up.", "Starting with the most likely cause.",
             "Fetching the details now.", "Running the next check.")
FOLLOW_UPS = ("Thanks. Next thing: ", "Great, that helps. ", "OK. Also, ", "", "One more: ")


def call_id(rng: random.Random) -> str:
    # Nine alphanumerics: valid everywhere, including for Mistral templates, which reject others.
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(9))


def system_prompt(header: str, tools: list[dict], compact: bool) -> tuple[str, str]:
    """(text with the tool schemas, as SiliconBench sends it; text for the `tools` parameter mode).
    Compact prompts list the schemas on one line each, with no guidelines."""
    rules = "" if compact else "\n\n" + RULES
    schemas = ("[\n" + ",\n".join(json.dumps(t, ensure_ascii=False) for t in tools) + "\n]" if compact
               else json.dumps(tools, ensure_ascii=False, indent=2))
    return header + "\n\n" + TOOLS_INTRO + schemas + rules, header + rules


def conversation(rng: random.Random, domain: Domain, system: str, tasks: list[Task]) -> tuple[list[dict], list[tuple]]:
    """Episodes of (user request, tool steps, assistant answer), far longer than needed; the caller
    cuts it. Tool results are placeholders; their (index, tool, args, slots) come back alongside."""
    messages: list[dict] = [{"role": "system", "content": system}]
    pending: list[tuple] = []
    for n, task in enumerate(tasks):
        slots = domain.slots(rng)
        lead = rng.choice(FOLLOW_UPS) if n else ""
        messages.append({"role": "user", "content": lead + task.request.format(**slots)})
        for step in task.calls:
            calls: list[dict[str, Any]] = []
            for name, args in step:
                calls.append({"id": call_id(rng), "type": "function", "function": {
                    "name": name, "arguments": json.dumps(agent_domains.fill(args, slots), ensure_ascii=False)}})
            content = rng.choice(PREAMBLES) if rng.random() < 0.25 else None
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            for call in calls:
                function = call["function"]
                pending.append((len(messages), function["name"], json.loads(function["arguments"]), slots))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": ""})
        messages.append({"role": "assistant", "content": task.answer.format(**slots)})
    return messages, pending


def cut_point(messages: list[dict], want: int, end_role: str) -> int:
    """The length nearest `want` (2..20) whose last message has `end_role` and leaves no tool
    call unanswered."""
    valid = []
    for n in range(2, min(len(messages), MAX_MESSAGES) + 1):
        last = messages[n - 1]["role"]
        if last != end_role:
            continue
        if last == "tool" and n < len(messages) and messages[n]["role"] == "tool":
            continue  # a parallel call's result would be missing
        valid.append(n)
    return min(valid, key=lambda n: (abs(n - want), n))


def agent_prompt(seed: int, index: int, spec: dict) -> dict:
    rng = random.Random(f"{seed}:agent:{index}")
    domain: Domain = spec["domain"]
    tasks = rng.sample(domain.tasks, len(domain.tasks)) * 3
    full, full_pending = conversation(rng, domain, "", tasks)
    lo, hi = spec["bounds"]
    lo, hi = int(lo * 1.05), int(hi * 0.95)  # the same margin as the chat targets
    want = spec["messages"]
    for _ in range(12):
        messages, pending, tools, bare = trace(rng, spec, domain, tasks, full, full_pending, want)
        est = estimate_request(messages)
        # Fixed-size payloads (schemas, statuses) can push a long trace past its bucket, and a
        # short one may have too few results to reach it: then move the cut and try again.
        if est > hi:
            want = max(2, want - 2)
        elif est < lo:
            want = min(MAX_MESSAGES, want + 2)
        else:
            break
    calls = sum(len(m.get("tool_calls") or ()) for m in messages)
    return {"description": f"Agent trace ({domain.name}): {len(messages)} msgs, ~{est} input tokens, "
                           f"{calls} tool calls, ends on {messages[-1]['role']}",
            "messages": messages, "max_tokens": 256, "tools": tools,
            "meta": {"bucket": spec["bucket"], "domain": domain.name, "system_for_tools_param": bare,
                     "provenance": f"self-written: cellbench prompts/build_splits.py, template agent/{domain.name} "
                                   "(tools and payloads: prompts/agent_domains.py)",
                     "license": LICENSE}}


def trace(rng: random.Random, spec: dict, domain: Domain, tasks: list[Task], full: list[dict],
          full_pending: list[tuple], want: int) -> tuple[list[dict], list[tuple], list[dict], str]:
    """Cut the conversation near `want` messages, state the tools, size the tool results."""
    n = cut_point(full, want, spec["end"])
    messages = [dict(m) for m in full[:n]]
    pending = [p for p in full_pending if p[0] < n]
    # Medium traces state only the tools they use (the first step's, if they call none), compactly.
    medium = spec["bucket"] == "medium"
    used = {p[1] for p in pending} or {name for name, _ in tasks[0].calls[0]}
    tools = [t for t in domain.tools if not medium or t["function"]["name"] in used]
    listed, bare = system_prompt(spec["header"], tools, compact=medium)
    messages[0]["content"] = listed
    fill_results(rng, domain, messages, pending, spec["target"])
    return messages, pending, tools, bare


def fill_results(rng: random.Random, domain: Domain, messages: list[dict], pending: list[tuple], target: int) -> None:
    """Give each tool result a share of the tokens left after the fixed messages, then correct
    the shares twice for generators that over- or undershoot."""
    if not pending:
        return
    weights = [rng.uniform(0.5, 1.5) for _ in pending]
    scale = 1.0
    for _attempt in range(3):
        fixed = estimate_request(messages) - sum(estimate_tokens(messages[i]["content"]) for i, *_ in pending)
        left = max(target - fixed, 0) * scale
        for (i, name, args, slots), w in zip(pending, weights, strict=True):
            budget = int(left * w / sum(weights) * CHARS_PER_TOKEN)
            messages[i]["content"] = domain.result(name, args, rng, max(budget, 1), slots)
        got = estimate_request(messages) - fixed
        if left == 0 or abs(got - left / scale) < 0.03 * target:
            return
        scale *= (left / scale) / max(got, 1)


def agent_specs(rng: random.Random, count_user_end: int) -> list[dict]:
    buckets = [(name, lo, hi) for name, lo, hi, n in AGENT_BUCKETS for _ in range(n)]
    rng.shuffle(buckets)
    domains = [d for d in agent_domains.DOMAINS for _ in range(len(buckets) // len(agent_domains.DOMAINS))]
    rng.shuffle(domains)
    ends = ["user"] * count_user_end + ["tool"] * (len(buckets) - count_user_end)
    rng.shuffle(ends)
    n_vlong = buckets.count(("vlong", 2000, 10000))
    # Skewed like SiliconBench's: most very long traces at 2-5K tokens, a few near 9K.
    vlong_u = [((k + rng.random()) / n_vlong) ** 2 for k in range(n_vlong)]
    rng.shuffle(vlong_u)
    headers = header_pool(rng)
    specs = []
    for (bucket, lo, hi), domain, end in zip(buckets, domains, ends, strict=False):
        if bucket == "vlong":
            target = int(2200 + 7200 * vlong_u.pop())
            want = rng.randint(8, MAX_MESSAGES)
        elif bucket == "long":
            target, want = rng.randint(1150, 1750), rng.randint(5, 14)
        else:
            target, want = rng.randint(330, 900), rng.randint(2, 8)
        specs.append({"bucket": bucket, "bounds": (lo, hi), "domain": domain, "end": end, "target": target,
                      "messages": want, "header": headers[domain.name].pop()})
    return specs


def header_pool(rng: random.Random) -> dict[str, list[str]]:
    """Distinct opening lines per domain, so no two measured prompts share their first words."""
    pool: dict[str, list[str]] = {}
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
    for d in agent_domains.DOMAINS:
        names = rng.sample(agent_domains.ASSISTANT_NAMES, 14)
        pool[d.name] = [f"You are {nm}, {d.purpose}, working for {rng.choice(agent_domains.ORGS)}. "
                        f"Today is {rng.choice(days)}, 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}."
                        for nm in names]
    return pool


def build_agent(seed: int) -> dict:
    rng = random.Random(f"{seed}:agent")
    specs = agent_specs(rng, AGENT_END_USER)
    prompts = [agent_prompt(seed, n, spec) for n, spec in enumerate(specs)]
    rng.shuffle(prompts)
    bounds = {b: (lo, hi) for b, lo, hi, _ in AGENT_BUCKETS}
    for n, p in enumerate(prompts):
        p["name"] = f"a{n:03d}_{p['meta']['bucket']}_{p['meta']['domain']}"
        in_bucket(p["name"], estimate_request(p["messages"]), *bounds[p["meta"]["bucket"]])
    warm_rng = random.Random(f"{seed}:agent-warmup")
    warmup = []
    for n, (target, end) in enumerate(((1500, "tool"), (3500, "user"), (6000, "tool"))):
        domain = warm_rng.choice(agent_domains.DOMAINS)
        spec = {"bucket": "long" if target < 2000 else "vlong", "bounds": (target // 2, target * 2),
                "domain": domain, "end": end, "target": target,
                "messages": 8 + 4 * n, "header": f"Warm-up session, not measured. You are {domain.purpose}."}
        p = agent_prompt(seed, 1000 + n, spec)
        warmup.append({"name": f"w{n:02d}_{spec['bucket']}_{domain.name}", **p})
    return split_file("agent", seed, prompts, warmup)


# ---------------------------------------------------------------- files

def build(seed: int = SEED) -> dict[str, str]:
    """File name -> exact content."""
    return {"chat.json": dump(build_chat(seed)), "agent.json": dump(build_agent(seed))}


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
