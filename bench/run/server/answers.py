"""A server's HTTP answer as a reason quotes it, and what a 401 or 403 means: readiness (a started
server's and an --endpoint's) and the endpoint's probes name what they got, not only that it was
not 200."""

from __future__ import annotations

import httpx

from bench.core.verdicts import KEY_STATUSES, wants_key
from bench.setup.profiles import ApiKey

_BODY_LINE = 120  # characters of an answer's first body line quoted in a reason


def answer_text(response: httpx.Response, api_key: ApiKey | None = None) -> str:
    """`HTTP 401 Unauthorized: {"error": ...}`: an answer's status and the first line of its body,
    shortened (and the key, should a server echo it, redacted), as reasons quote it."""
    text = response.text[:4096]
    lines = (api_key.redact(text) if api_key is not None else text).strip().splitlines()
    line = lines[0] if lines else ""
    line = line if len(line) <= _BODY_LINE else line[:_BODY_LINE - 3] + "..."
    status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    return f"{status}: {line}" if line else status


def refused_key(response: httpx.Response, api_key: ApiKey | None) -> str | None:
    """For a 401 or 403: the reason that says the server wants a key, and how to give it; else None."""
    if response.status_code not in KEY_STATUSES:
        return None
    return f"{wants_key(response.status_code, api_key.source if api_key else None)} ({answer_text(response, api_key)})"
