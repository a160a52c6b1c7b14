"""Tool-call validity on cellbench's agent prompts, through the request's `tools` parameter.

Usage:
    python benchmarks/eval/benchmark_toolcall.py --model tiny --port 8001 \\
        --output-dir results/eval/toolcall --max-samples 50 --concurrency 4
    python benchmarks/eval/benchmark_toolcall.py --tool-choice auto ...

The set is cellbench's agent split, prompts/agent.json (100 multi-turn conversations, each with
its own tools; --max-samples N takes the first N). Each conversation is sent as recorded, with its
tools in `tools`, `tool_choice` (default "required") and the system prompt the split provides for
that case (meta.system_for_tools_param, which drops the tool listing from the text). Every
response goes through the funnel tool_call -> known_name -> json_args -> schema_valid -> valid
described in README.md. Writes toolcall_results.json into --output-dir.

Server needs: llama-server must run with Jinja templates (the default in recent builds; older
builds need --jinja, and --no-jinja answers HTTP 500 "tools param requires --jinja flag"), and
a context per slot above the longest prompt (~9.3K tokens of the tiny model's tokenizer).

Reference Results

Reproducibility references for the named config and subset (Source: n=samples, c=concurrency), NOT CI thresholds.

Validity (summary)

| Model | Config        | valid_rate | tool_call_rate | known_name_rate | json_args_rate | schema_valid_rate | total_samples | failed_requests | Source                                |
| ----- | ------------- | ---------- | -------------- | --------------- | -------------- | ----------------- | ------------- | --------------- | ------------------------------------- |
| tiny  | llamacpp, c=4 | 0.00%      | 0.00%          | 0.00%           | 0.00%          | 0.00%             | 50            | 0               | main 5a5f61f [Intel Xeon, n=50, c=4]  |

Speed (speed)

| Model | Config        | latency_mean_s | latency_p50_s | latency_p95_s | throughput_qps | output_tok_per_s | Source                                |
| ----- | ------------- | -------------- | ------------- | ------------- | -------------- | ---------------- | ------------------------------------- |
| tiny  | llamacpp, c=4 | 5.044          | 4.676         | 7.531         | 0.78           | 199.3            | main 5a5f61f [Intel Xeon, n=50, c=4]  |
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, cast

import jsonschema
from jsonschema.validators import validator_for

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

NAME = "toolcall"
DATASET = Path(__file__).resolve().parents[2] / "prompts" / "agent.json"
TEXT_CHARS = 200  # content and arguments kept per sample are cut to this length
# The funnel: a sample counts at a level only if it passes that check and every earlier one.
LEVELS = ("tool_call", "known_name", "json_args", "schema_valid", "valid")
ANY_OBJECT = {"type": "object"}  # the schema of a tool that declares no `parameters`


def tool_validators(tools: list[dict]) -> dict[str, Any]:
    """name -> a jsonschema validator for that tool's `parameters` (checked to be a valid schema)."""
    out = {}
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TypeError(f"not a function tool: {json.dumps(tool)[:120]}")
        schema = fn.get("parameters", ANY_OBJECT)
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        out[fn["name"]] = cls(schema)
    return out


def check_tool_calls(message: dict | None, validators: dict[str, Any]) -> dict:
    """Score one assistant message against the offered tools.

    Every check applies to every call in the message (a message with two calls passes a check
    only if both do), and each level requires the ones before it:
      tool_call     `tool_calls` is a non-empty list;
      known_name    each call's function.name is one of the offered tools;
      json_args     each call's function.arguments is a string holding valid JSON (OpenAI
                    sends arguments JSON-encoded; an already-decoded object fails here);
      schema_valid  each decoded arguments value validates against its tool's JSON schema;
      valid         and each call is well-formed for a client to answer it: type "function"
                    and a non-empty string id, unique within the message.
    """
    checks = dict.fromkeys(LEVELS, False)
    errors: list[str] = []
    calls = (message or {}).get("tool_calls")
    names: list[str | None] = []
    arguments: list[str] = []
    if not isinstance(calls, list) or not calls:
        errors.append("no tool call in the response")
        return {"checks": checks, "errors": errors, "names": names, "arguments": arguments}
    checks["tool_call"] = True
    fns = [c.get("function") if isinstance(c, dict) else None for c in calls]
    for fn in fns:
        names.append(fn.get("name") if isinstance(fn, dict) else None)
        raw = fn.get("arguments") if isinstance(fn, dict) else None
        arguments.append((raw if isinstance(raw, str) else json.dumps(raw))[:TEXT_CHARS])

    unknown = [n for n in names if n not in validators]
    if unknown:
        errors.append(f"unknown tool name(s): {', '.join(repr(n) for n in unknown)}")
        return {"checks": checks, "errors": errors, "names": names, "arguments": arguments}
    checks["known_name"] = True

    decoded = []
    for name, fn in zip(names, fns, strict=True):
        raw = fn.get("arguments") if isinstance(fn, dict) else None
        if not isinstance(raw, str):
            errors.append(f"{name}: arguments is {type(raw).__name__}, not a JSON string")
            continue
        try:
            decoded.append(json.loads(raw))
        except json.JSONDecodeError as exc:
            errors.append(f"{name}: arguments are not JSON ({exc.msg} at column {exc.colno})")
    if errors:
        return {"checks": checks, "errors": errors, "names": names, "arguments": arguments}
    checks["json_args"] = True

    for name, value in zip(cast(list[str], names), decoded, strict=True):  # all known names by now
        problem = jsonschema.exceptions.best_match(validators[name].iter_errors(value))
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "(root)"
            errors.append(f"{name}: arguments violate the schema at {where}: {problem.message}"[:TEXT_CHARS])
    if errors:
        return {"checks": checks, "errors": errors, "names": names, "arguments": arguments}
    checks["schema_valid"] = True

    ids = [c.get("id") for c in calls]
    for call, name in zip(calls, names, strict=True):
        if call.get("type") != "function":
            errors.append(f"{name}: type is {call.get('type')!r}, not 'function'")
        if not isinstance(call.get("id"), str) or not call["id"]:
            errors.append(f"{name}: no call id")
    if len(set(map(str, ids))) != len(ids):
        errors.append("duplicate call ids")
    checks["valid"] = not errors
    return {"checks": checks, "errors": errors, "names": names, "arguments": arguments}


def load_prompts(path: Path) -> list[dict]:
    """The split's measured prompts (not its warm-up), with their tools and validators."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        prompts = data["prompts"] if isinstance(data, dict) else data
        out = []
        for i, p in enumerate(prompts):
            messages = [dict(m) for m in p["messages"]]
            tools = p.get("tools") or []
            if not tools:
                raise ValueError(f"prompt {i} ({p.get('name')}) offers no tools")
            system = (p.get("meta") or {}).get("system_for_tools_param")
            if system and messages[0].get("role") == "system":
                messages[0]["content"] = system
            out.append({"name": p.get("name", f"prompt_{i:03d}"), "domain": (p.get("meta") or {}).get("domain"),
                        "messages": messages, "tools": tools, "validators": tool_validators(tools)})
    except (OSError, ValueError, KeyError, TypeError, jsonschema.SchemaError) as exc:
        raise ClientError(f"cannot use the prompt file {path}: {type(exc).__name__}: {exc}", 2) from None
    if not out:
        raise ClientError(f"{path}: no prompts", 2)
    return out


def score(prompts: list[dict], replies: list) -> tuple[dict, list[dict]]:
    per_sample = []
    for prompt, reply in zip(prompts, replies, strict=True):
        if reply.ok:
            verdict = check_tool_calls(reply.message, prompt["validators"])
        else:
            verdict = {"checks": dict.fromkeys(LEVELS, False), "errors": ["request failed"], "names": [],
                       "arguments": []}
        per_sample.append({
            "id": prompt["name"],
            "domain": prompt["domain"],
            "offered_tools": [t["function"]["name"] for t in prompt["tools"]],
            **verdict["checks"],
            "called": verdict["names"],
            "arguments": verdict["arguments"],
            "errors": verdict["errors"],
            "content": reply.content[:TEXT_CHARS],
            "finish_reason": reply.finish_reason,
            "latency_s": round(reply.latency_s, 4),
            "completion_tokens": reply.completion_tokens,
            "error": reply.error,
        })
    total = len(per_sample)
    counts = {level: sum(s[level] for s in per_sample) for level in LEVELS}

    def rate(n: int) -> float:
        return round(n / total, 4) if total else 0.0

    summary = {
        "valid_rate": rate(counts["valid"]),
        "tool_call_rate": rate(counts["tool_call"]),
        "known_name_rate": rate(counts["known_name"]),
        "json_args_rate": rate(counts["json_args"]),
        "schema_valid_rate": rate(counts["schema_valid"]),
        "valid_samples": counts["valid"],
        "tool_call_samples": counts["tool_call"],
        "known_name_samples": counts["known_name"],
        "json_args_samples": counts["json_args"],
        "schema_valid_samples": counts["schema_valid"],
        "total_samples": total,
        "failed_requests": sum(not r.ok for r in replies),
        "finish_reasons": dict(sorted(Counter(str(s["finish_reason"]) for s in per_sample
                                              if s["error"] is None).items())),
    }
    return summary, per_sample


def run(args) -> int:
    dataset = Path(args.dataset)
    prompts = load_prompts(dataset)
    selected = prompts[: args.max_samples] if args.max_samples else prompts
    url = base_url(args)
    wait_for_server(url, args.server_wait_s)
    bodies = [chat_body(args, p["messages"], tools=p["tools"], tool_choice=args.tool_choice) for p in selected]
    replies, wall_s = run_requests(url, bodies, concurrency=args.concurrency, timeout_s=args.timeout_s)
    summary, per_sample = score(selected, replies)
    speed = speed_block(replies, wall_s)
    config = config_block(args, client=NAME, dataset_size=len(prompts), samples_run=len(selected),
                          dataset_sha256=hashlib.sha256(dataset.read_bytes()).hexdigest())
    result = {"summary": summary, "speed": speed, "config": config, "per_sample": per_sample}

    print(f"toolcall: {summary['total_samples']} samples from {dataset.name} against {url} "
          f"(model {args.model}, tool_choice {args.tool_choice})")
    print(f"  valid      {summary['valid_rate']:.2%} ({summary['valid_samples']}/{summary['total_samples']}); "
          f"tool call {summary['tool_call_samples']}, known name {summary['known_name_samples']}, "
          f"JSON args {summary['json_args_samples']}, schema-valid {summary['schema_valid_samples']}")
    print_speed(speed)
    if speed["failed_requests"]:
        print(f"  failures   {first_errors(replies)}")
    return finish(NAME, args, result, replies)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("Tool-call validity on the agent split over /v1/chat/completions.", max_tokens=256,
                          output_dir="results/eval/toolcall")
    parser.add_argument("--dataset", default=str(DATASET), help="the agent prompt file (cellbench format)")
    parser.add_argument("--tool-choice", choices=("required", "auto"), default="required",
                        help="the request's tool_choice")
    args = parser.parse_args(argv)
    return main_wrapper(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
