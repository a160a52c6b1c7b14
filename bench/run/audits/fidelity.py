"""The fidelity run (--fidelity; docs/metrics.md, Fidelity): after a cell's last level, on the server
that served it, a fixed set of the split's prompts, greedy, twice; each answer kept, as the
checkpoint's tokenizer splits it, in `<cell>.fidelity.jsonl` beside the result, and compared with
the cell's own second pass and with the reference stack's answers (bench.core.lenses.fidelity).

The prompts: PROMPTS of the shipped split's, evenly spaced through it (the same ones every week, on
every stack), each sent as the load generator sends it but with `temperature` 0, `max_tokens`
MAX_TOKENS, not streamed, and `logprobs` with the top 2 asked for: a server that offers them shows
how close its first differing token was to a tie (`margin`); one that refuses them (HTTP 400 or
422) is asked again without, and the block says it does not offer them. No `ignore_eos`: an answer
that ends early is a difference like any other.

The reference: the newest result of the reference framework (`--fidelity-reference`, default
hf_transformers) in the cell's folder that has a fidelity run, this run's or an earlier one's; none
yet (the reference runs after this stack in the session, or never ran here) is said, and REPORT.md
compares them once both are there (bench.reports.lenses).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from bench.core.lenses.fidelity import MAX_TOKENS, Answer, Fidelity, Forced, agreement, flagged, read_answers
from bench.run.audits import forcing
from bench.setup.prompts import Prompt
from bench.setup.tinymodel.template import render_template
from bench.setup.traces import TokenizerMissing, tokenizer_path

PROMPTS = 16  # per split: enough for the median's interval (it needs 6) and a share to within about 0.25
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "seed", "ignore_eos", "max_tokens", "stream",
                 "stream_options", "logprobs", "top_logprobs")
SUFFIX = ".fidelity.jsonl"
TIMEOUT_S = 300.0


@dataclass
class FidelityRun:
    """A cell's fidelity run: the reference's newest result with a fidelity run, as the cell's history
    held it at the start (its path and block; None: none yet), then the block and the first pass."""

    reference: tuple[Path, Fidelity] | None = None
    block: Fidelity | None = None
    answers: list[Answer] = field(default_factory=list)


def chosen(prompts: Sequence[Prompt], n: int = PROMPTS) -> list[Prompt]:
    """n of the split's prompts, evenly spaced from its first."""
    step = max(1, len(prompts) // n)
    return list(prompts[::step][:n])


class Tokens:
    """Answers into units: the checkpoint tokenizer's token ids, or characters (code points)."""

    def __init__(self, tokenizer_json: Path | None) -> None:
        self.tokenizer: Any = None
        self.template: str | None = None  # the checkpoint's chat template, where it lies beside the tokenizer
        if tokenizer_json is not None and tokenizer_json.is_file():
            from tokenizers import Tokenizer  # imported on use

            self.tokenizer = Tokenizer.from_file(str(tokenizer_json))
            if (template := tokenizer_json.parent / "chat_template.jinja").is_file():
                self.template = template.read_text(encoding="utf-8")
        self.unit: Literal["tokens", "characters"] = "tokens" if self.tokenizer is not None else "characters"

    def of(self, text: str) -> tuple[int, ...]:
        if self.tokenizer is None:
            return tuple(ord(c) for c in text)
        return tuple(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, token: int) -> str:
        return str(self.tokenizer.decode([token], skip_special_tokens=False))


def _body(prompt: Prompt, model: str, extra_body: Mapping[str, Any], logprobs: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": list(prompt.messages),
                            **{k: v for k, v in extra_body.items() if k not in SAMPLING_KEYS},
                            "temperature": 0, "max_tokens": MAX_TOKENS, "stream": False}
    if logprobs:
        body.update(logprobs=True, top_logprobs=2)
    if prompt.tools is not None:
        body["tools"] = list(prompt.tools)
    return body


def _margins(choice: Mapping[str, Any]) -> list[float | None] | None:
    """Per answer token, its logprob less the runner-up's, where the server sent top-2 logprobs."""
    content = ((choice.get("logprobs") or {}).get("content")) or None
    if not content:
        return None
    out = []
    for entry in content:
        top = sorted((t.get("logprob") for t in entry.get("top_logprobs") or [] if t.get("logprob") is not None),
                     reverse=True)
        out.append(round(top[0] - top[1], 6) if len(top) >= 2 else None)
    return out


def run(base_url: str, model: str, prompts: Sequence[Prompt], extra_body: Mapping[str, Any],
        headers: Mapping[str, str], tokens: Tokens, answers_path: Path,
        reference: str) -> tuple[Fidelity, list[Answer]]:
    """Both passes on the server at `base_url`; the block (without the reference) and the first pass."""
    passes: list[list[Answer]] = [[], []]
    logprobs = True
    error = None
    with httpx.Client(base_url=base_url, headers=dict(headers), timeout=TIMEOUT_S) as client, \
            answers_path.open("w") as out:
        for k in (0, 1):
            for prompt in prompts:
                response = client.post("/v1/chat/completions", json=_body(prompt, model, extra_body, logprobs))
                if logprobs and response.status_code in (400, 422):  # it refuses logprobs: ask without
                    logprobs = False
                    response = client.post("/v1/chat/completions", json=_body(prompt, model, extra_body, False))
                if response.status_code != 200:
                    error = f"HTTP {response.status_code} to a fidelity request: {response.text[:200]}"
                    break
                choice = response.json()["choices"][0]
                text = (choice.get("message") or {}).get("content") or ""
                answer = Answer(prompt.name, tokens.of(text), choice.get("finish_reason"))
                passes[k].append(answer)
                out.write(json.dumps({"pass": k + 1, "prompt": prompt.name, "text": text, "tokens": list(answer.tokens),
                                      "finish_reason": answer.finish_reason, "margins": _margins(choice)}) + "\n")
            if error:
                break
    block: Fidelity = {"prompts": len(passes[0]), "max_tokens": MAX_TOKENS, "unit": tokens.unit,
                       "answers": answers_path.name, "logprobs": logprobs, "self": agreement(passes[0], passes[1]),
                       "reference_framework": reference}
    if error:
        block["error"] = error
    return block, passes[0]


def against(block: Fidelity, ours: Sequence[Answer], reference: tuple[Path, Mapping[str, Any]] | None,
            framework: str) -> Fidelity:
    """`block` with its comparison with the reference result (its path and its `fidelity` block), or a note."""
    if reference is None:
        return {**block, "note": f"no result of the reference ({framework}) with a fidelity run in this folder yet"}
    path, theirs = reference
    if theirs.get("unit") != block["unit"] or theirs.get("max_tokens") != block["max_tokens"]:
        return {**block, "note": f"{path.name} was compared in other units or lengths"}
    reference_answers = read_answers(path.parent / str(theirs["answers"]))
    if not reference_answers:
        return {**block, "note": f"{path.name}'s answers file {theirs['answers']} cannot be read"}
    vs = agreement(ours, reference_answers)
    return {**block, "reference": path.name, "vs_reference": vs, "flagged": flagged(vs, theirs["self"])}


def _wanted(cell: Any) -> bool:
    return bool(cell.cfg.load.fidelity and cell.summaries and not (cell.capped or cell.server_exit or cell.oom))


def needs_own_server(cell: Any) -> bool:
    """Whether the run, wanted and not stopped early, gets a server of its own after the levels: the
    framework's server keeps its first request's sampling (Capabilities.sampling_per_request), so on
    a server that served the levels a greedy request would be sampled as they were."""
    return _wanted(cell) and not cell.adapter.capabilities.sampling_per_request and cell.cfg.server.endpoint is None


def after_group(cell: Any, server: Any, model_id: str, *, last_point: Any, own_server: bool = False) -> None:
    """With --fidelity, the run on `server` once the group of levels it served is done, when that group
    held the cell's last level and the cell did not stop early, or on the server of its own
    (`own_server`, needs_own_server), then the reference's answers fed back (`fed`): into `cell.fidelity`
    (bench.run.levels.cell_run.CellRun); nothing otherwise."""
    cfg = cell.cfg
    if not _wanted(cell) or needs_own_server(cell) != own_server:
        return
    if not own_server and (cell.plan.search is not None or (not cell.shared and last_point != cell.plan.steps()[-1])):
        return  # a later level, on a server of its own, is the cell's last (a sweep's is known only after)
    try:
        tokenizer: Path | None = tokenizer_path(cfg.profile.builtin, cfg.profile.name)
    except TokenizerMissing:  # a profile without a tokenizer cellbench can load: compare characters
        tokenizer = None
    key = cfg.server.api_key
    headers, tokens = key.headers if key else {}, Tokens(tokenizer)
    prompts = chosen(cell.prompt_set.prompts)
    state: FidelityRun = cell.fidelity
    state.block, state.answers = run(server.base_url, model_id, prompts, cell.extra_body, headers, tokens,
                                     cell.paths.split_dir / (cell.paths.stem + SUFFIX), cfg.load.fidelity_reference)
    if "error" not in state.block:
        forced = fed(server.base_url, headers, model_id, prompts, state, tokens)
        if forced is not None:
            state.block["forced"] = forced


def fed(base_url: str, headers: Mapping[str, str], model_id: str, prompts: Sequence[Prompt], state: FidelityRun,
        tokens: Tokens) -> Forced | None:
    """The reference's answers fed back to the stack (bench.run.audits.forcing); None where there are none
    to feed (no reference result yet, or one in other units)."""
    if state.reference is None or state.reference[1].get("unit") != "tokens" or tokens.unit != "tokens":
        return None
    path, theirs = state.reference
    reference = read_answers(path.parent / str(theirs["answers"]))
    if not reference:
        return None
    if tokens.template is None:
        return {"offered": False, "reference": path.name,
                "note": "no chat template beside the checkpoint's tokenizer to build the prompts' token ids"}
    template = tokens.template

    def render(messages: list[Mapping[str, Any]], tools: list[Any] | None) -> str:
        return render_template(template, [dict(m) for m in messages], tools, add_generation_prompt=True)

    with httpx.Client(base_url=base_url, headers=dict(headers), timeout=TIMEOUT_S) as client:
        return forcing.run(client, model_id, prompts, state.answers, reference,
                           forcing.template_ids(tokens.tokenizer, render), tokens.decode, path.name)
