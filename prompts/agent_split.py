"""The agent split: multi-turn tool-use traces, cut from long conversations and sized by their
tool results, in SiliconBench's buckets and shapes.

Each trace is a domain's (agent_domains.py) system prompt with its tool schemas, then episodes of
a user request, the assistant's tool calls, the tools' results and its answer, cut near a wanted
length where it ends on a tool result or a user message; the tool results share what is left of
the trace's token target.
"""

from __future__ import annotations

import json
import random
from typing import Any

import agent_domains
from agent_domains import Domain, Task  # (types only)
from provenance import LICENSE, provenance
from token_estimate import CHARS_PER_TOKEN, estimate_request, estimate_tokens, in_bucket

# Agent buckets by input tokens, with SiliconBench's counts (5 medium, 17 long, 78 very long).
AGENT_BUCKETS = (("medium", 250, 1000, 5), ("long", 1000, 2000, 17), ("vlong", 2000, 10000, 78))
AGENT_END_USER = 35         # the rest end on a tool result, as 64 of SiliconBench's 100 do
MAX_MESSAGES = 20

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
                     "provenance": provenance(f"agent/{domain.name}", "tools and payloads: prompts/agent_domains.py"),
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


def build_agent(seed: int) -> tuple[list[dict], list[dict]]:
    """The agent split's measured prompts and its warm-up prompts."""
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
    return prompts, warmup
