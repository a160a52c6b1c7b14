"""What one OpenAI `chat.completion.chunk` payload says: `parse_chunk`, and the same as a plain
tuple on the per-event path (`read_payload`)."""

from __future__ import annotations

from typing import Any, NamedTuple

from bench.base.fastjson import fast_loads as _fast_loads
from bench.base.fastjson import stdlib_loads as _stdlib_loads
from bench.core.records import RequestRecord, error_object_text, quote_server


class SSEFormatError(ValueError):
    """The payload of a `data:` event is not a chat completion chunk (bad JSON, wrong shape)."""


class Chunk(NamedTuple):
    """What one `data:` payload says (see `parse_chunk`)."""

    output: bool  # carries output: content, reasoning or a tool-call delta
    answer: bool  # carries output that is not reasoning: content or a tool call
    text: str  # the output text, for the record's head
    finish_reason: str | None
    usage: dict[str, Any] | None
    model: str | None
    error: str | None  # message of an SSE error event


def parse_chunk(data: bytes, event: str | None = None) -> Chunk:
    """Interpret one chunk payload (not `[DONE]`).

    output  = any choice's delta has non-empty `content`, `reasoning_content`/`reasoning`, or a
              non-empty `tool_calls` list (a structured tool call is output);
    answer  = content or tool call (reasoning is output but not answer);
    usage   = the top-level `usage` object, whether on the finish chunk (transformers serve) or in
              a separate `choices: []` chunk (llama-server, vLLM, mlx-lm);
    error   = an `{"error": ...}` payload, an `event: error` event or an `error:` line, in the
              server's words (`bench.core.records.error_object_text`).
    A role-only or empty delta is neither output nor answer. Raises `SSEFormatError` when the
    payload is not a JSON object or its `choices` are malformed.
    """
    return Chunk._make(read_payload(data, event))


def read_payload(data: bytes, event: str | None) -> tuple[bool, bool, str, Any, Any, Any, str | None]:
    """A `Chunk`'s fields as a plain tuple (cheaper to build): `parse_chunk` on the per-event path."""
    try:
        try:
            obj = _fast_loads(data)
        except ValueError:  # what orjson refuses (NaN, a lone surrogate, bad JSON): the stdlib decides
            obj = _stdlib_loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        if event == "error":  # an error event in plain words
            words = quote_server(data.decode("utf-8", "replace")) or "empty error event"
            return False, False, "", None, None, None, words
        raise SSEFormatError(f"invalid JSON in SSE data ({exc}): {data[:120]!r}") from None
    if type(obj) is not dict:
        raise SSEFormatError(f"SSE data is not a JSON object: {data[:120]!r}")
    err = obj.get("error")
    if err or event == "error":
        return False, False, "", None, None, None, error_object_text(err if err else obj) or "empty error event"
    output = answer = False
    out = ""
    finish = None
    choices = obj.get("choices")
    if choices:
        try:
            for choice in choices:
                delta = choice.get("delta")
                if delta:
                    content = delta.get("content")
                    if content:
                        output = answer = True
                        out += content if type(content) is str else str(content)
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning:
                        output = True
                        out += reasoning if type(reasoning) is str else str(reasoning)
                    tool_calls = delta.get("tool_calls")
                    if tool_calls:
                        output = answer = True
                        for call in tool_calls:
                            function = call.get("function") or {}
                            out += (function.get("name") or "") + (function.get("arguments") or "")
                reason = choice.get("finish_reason")
                if reason:
                    finish = reason
        except (AttributeError, TypeError) as exc:  # a choice, delta or call that is not an object
            raise SSEFormatError(f"malformed chunk ({exc}): {data[:120]!r}") from None
    return output, answer, out, finish, obj.get("usage") or None, obj.get("model"), None




def apply_usage(usage: Any, rec: RequestRecord) -> None:
    """Keep the last usage seen (vLLM's continuous usage repeats a growing count)."""
    if not isinstance(usage, dict):
        return
    completion = usage.get("completion_tokens")
    if type(completion) is int:
        rec.usage_completion_tokens = completion
    prompt = usage.get("prompt_tokens")
    if type(prompt) is int:
        rec.usage_prompt_tokens = prompt
    asked = usage.get("prompt_tokens_details")  # servers with a prefix cache: how many prompt tokens it served
    cached = asked.get("cached_tokens") if isinstance(asked, dict) else None
    if type(cached) is int:
        rec.usage_cached_tokens = cached
    details = usage.get("completion_tokens_details")  # reasoning models: how many of the tokens were thinking
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if type(reasoning) is int:
        rec.usage_reasoning_tokens = reasoning
