"""What a running server says about itself: the models it lists, its version, whether it is ready.

`Endpoint` stands for an --endpoint server: waited for like a started one, but nothing starts or
stops it, and the cell probes it after a level to tell a dead endpoint from failed requests.
"""

from __future__ import annotations

import time

import httpx

from bench.core.result.model import ReportedVersion
from bench.run.server.answers import answer_text, refused_key
from bench.run.server.exits import ExitInfo, ServerStartError
from bench.setup.profiles import ApiKey

# Where servers report their own version: vLLM and SGLang, Ollama, llama.cpp (its build).
VERSION_ENDPOINTS = (("/version", "version"), ("/api/version", "version"), ("/props", "build_info"))


def _headers(api_key: ApiKey | None) -> dict[str, str] | None:
    return api_key.headers if api_key is not None else None


def reported_version(base_url: str, api_key: ApiKey | None = None) -> ReportedVersion | None:
    """What the running server says its version is, or None when none of the usual places answer."""
    for path, key in VERSION_ENDPOINTS:
        try:
            response = httpx.get(f"{base_url}{path}", timeout=5.0, headers=_headers(api_key))
            value = response.json().get(key) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
        if isinstance(value, str) and value:
            return {"path": path, "version": value}
    return None


def list_models(base_url: str, api_key: ApiKey | None = None) -> tuple[str, ...] | None:
    """The ids `/v1/models` lists, or None when the listing fails (never used to pick the model)."""
    try:
        response = httpx.get(f"{base_url}/v1/models", timeout=10.0, headers=_headers(api_key))
        response.raise_for_status()
        return tuple(str(m["id"]) for m in response.json().get("data", []))
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None


class Endpoint:
    """An already-running server: waited for like a started one, but nothing starts or stops it."""

    def __init__(self, base_url: str, ready_path: str, timeout_s: float, budget_s: float | None = None,
                 api_key: ApiKey | None = None):
        self.base_url = base_url
        self.ready_path = ready_path
        self.api_key = api_key
        self.refused: str | None = None
        t0 = time.monotonic()
        limit = timeout_s if budget_s is None else min(timeout_s, budget_s)
        while (last := self.probe()) is not None:
            if self.refused is not None:
                raise ServerStartError(f"endpoint {base_url} not ready on {ready_path}: {self.refused}")
            if time.monotonic() - t0 >= limit:
                capped = limit < timeout_s
                why = "cell budget reached: " if capped else ""
                raise ServerStartError(f"{why}endpoint {base_url} not ready on {ready_path} after {limit:.0f} s: "
                                       f"last {last}", capped=capped)
            time.sleep(0.25)
        self.ready_after_s: float | None = round(time.monotonic() - t0, 3)

    def probe(self) -> str | None:
        """None when the ready path answers 200, else what it did instead; a 401 or 403 says the
        server wants a key (and `refused` keeps that reason: no wait makes it answer 200)."""
        try:
            response = httpx.get(f"{self.base_url}{self.ready_path}", timeout=5.0, headers=_headers(self.api_key))
        except httpx.HTTPError as exc:
            return f"GET {self.ready_path}: {type(exc).__name__}: {exc}".rstrip(": ")
        self.refused = refused_key(response, self.api_key)
        if self.refused is not None:
            return self.refused
        return None if response.status_code == 200 else \
            f"GET {self.ready_path} answered {answer_text(response, self.api_key)}"

    def exit_reason(self) -> str | None:
        return None  # not our process: the cell probes it after a level instead

    def stop(self) -> ExitInfo:
        return ExitInfo(None, None, False)  # nothing of ours to stop
