"""Shared plumbing for cellbench's eval clients (`benchmark_*.py` in this folder).

Standard library plus httpx only: no import from the `bench` package, so every client stays a
standalone script that can run against any OpenAI-compatible server.

What lives here: the common command-line arguments, waiting for the server, a concurrency-limited
async chat client (non-streaming), the speed block computed from the responses, atomic result
writing and the exit-code convention:

    0  the run completed (whatever the accuracy)
    2  bad arguments (argparse)
    3  the server could not be reached (nothing answered before --server-wait-s ran out)
    4  every request failed (the result JSON is still written, for the evidence)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

EXIT_OK = 0
EXIT_UNREACHABLE = 3
EXIT_ALL_FAILED = 4

ERROR_CHARS = 300  # an error message kept per sample is cut to this length


class ClientError(Exception):
    """A run that cannot go on; `code` is the process exit status, `str()` the reason."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------- arguments


def json_object(text: str) -> dict:
    """argparse type for --extra-body: a JSON object, nothing else."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {type(value).__name__}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def build_parser(description: str, *, max_tokens: int, output_dir: str) -> argparse.ArgumentParser:
    """The arguments every client shares; a client adds its own afterwards."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="tiny", help="served model id, sent as the request's `model`")
    p.add_argument("--host", default="127.0.0.1", help="server host")
    p.add_argument("--port", type=int, default=8001, help="server port")
    p.add_argument("--base-url", default=None,
                   help="full server URL (e.g. http://127.0.0.1:8001); overrides --host/--port")
    p.add_argument("--output-dir", default=output_dir, help="where the result JSON is written")
    p.add_argument("--max-samples", type=_non_negative_int, default=0,
                   help="evaluate the first N samples of the fixed set; 0 = the full set")
    p.add_argument("--concurrency", type=_positive_int, default=4, help="requests in flight at most")
    p.add_argument("--max-tokens", type=_positive_int, default=max_tokens, help="max_tokens of each request")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of each request")
    p.add_argument("--seed", type=int, default=0, help="the request's `seed` (sampling seed on the server)")
    p.add_argument("--timeout-s", type=_positive_float, default=300.0, help="timeout of one request, seconds")
    p.add_argument("--server-wait-s", type=_positive_float, default=60.0,
                   help="how long to wait for the server to answer /health before giving up, seconds")
    p.add_argument("--extra-body", type=json_object, default={},
                   help='JSON object merged into every request body last, e.g. \'{"ignore_eos": false}\'; '
                        'a key set to null removes that field')
    return p


def base_url(args: argparse.Namespace) -> str:
    if args.base_url:
        return args.base_url.rstrip("/")
    return f"http://{args.host}:{args.port}"


def config_block(args: argparse.Namespace, **extra: Any) -> dict:
    """Every argument as given (defaults included), the URL used, plus the client's own facts."""
    config = {key: value for key, value in sorted(vars(args).items())}
    config["base_url_resolved"] = base_url(args)
    config.update(extra)
    return config


# ---------------------------------------------------------------- the server


def wait_for_server(url: str, wait_s: float) -> str:
    """Poll until the server is ready; returns what answered. Raises ClientError(EXIT_UNREACHABLE).

    Ready: `GET /health` answers 200. A server without /health (404 or 405) counts as ready once
    `GET /v1/models` answers 200. Any other status (llama-server answers 503 while loading) waits.
    """
    deadline = time.monotonic() + wait_s
    last = "no answer"
    with httpx.Client(timeout=min(5.0, max(wait_s, 0.5)), trust_env=False) as client:
        while True:
            try:
                r = client.get(url + "/health")
                if r.status_code == 200:
                    return "/health"
                if r.status_code in (404, 405):
                    m = client.get(url + "/v1/models")
                    if m.status_code == 200:
                        return "/v1/models"
                    last = f"/health answered {r.status_code}, /v1/models answered {m.status_code}"
                else:
                    last = f"/health answered {r.status_code}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if time.monotonic() >= deadline:
                raise ClientError(f"could not reach the server at {url} within {wait_s:g} s ({last})",
                                  EXIT_UNREACHABLE)
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0.05)))


# ---------------------------------------------------------------- requests


@dataclass
class Reply:
    """One request's outcome. `ok` False: a failed request (`error` says why, no message)."""

    ok: bool
    latency_s: float
    status: int | None = None
    error: str | None = None
    message: dict = field(default_factory=dict)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def content(self) -> str:
        value = self.message.get("content")
        return value if isinstance(value, str) else ""


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        err = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(err, dict):
            err = err.get("message", err)
        detail = err if isinstance(err, str) else json.dumps(err)
    except ValueError:
        detail = response.text
    return _short(f"HTTP {response.status_code}: {detail}")


def _read_reply(response: httpx.Response, latency_s: float) -> Reply:
    if response.status_code != 200:
        return Reply(False, latency_s, response.status_code, _error_text(response))
    try:
        body = response.json()
        choice = body["choices"][0]
        message = choice["message"]
        if not isinstance(message, dict):
            raise TypeError("message is not an object")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return Reply(False, latency_s, 200, _short(f"malformed response ({type(exc).__name__}: {exc}): "
                                                   f"{response.text}"))
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return Reply(True, latency_s, 200, None, message, choice.get("finish_reason"),
                 count("prompt_tokens"), count("completion_tokens"))


async def _send_all(url: str, bodies: Sequence[dict], concurrency: int, timeout_s: float) -> list[Reply]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    replies: list[Reply | None] = [None] * len(bodies)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits, trust_env=False) as client:

        async def one(i: int, body: dict) -> None:
            async with gate:
                started = time.perf_counter()
                try:
                    response = await client.post(url + "/v1/chat/completions", json=body)
                    reply = _read_reply(response, time.perf_counter() - started)
                except httpx.TimeoutException:
                    reply = Reply(False, time.perf_counter() - started, None, f"timed out after {timeout_s:g} s")
                except httpx.HTTPError as exc:
                    reply = Reply(False, time.perf_counter() - started, None,
                                  _short(f"{type(exc).__name__}: {exc}"))
            replies[i] = reply

        await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))
    return [r for r in replies if r is not None]


def chat_body(args: argparse.Namespace, messages: list[dict], **fields: Any) -> dict:
    """A non-streaming chat request. `--extra-body` is merged last, so it may override anything;
    a key it sets to null is removed instead (for servers that reject a field, e.g. `seed`)."""
    body = {
        "model": args.model,
        "messages": messages,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "stream": False,
        **fields,
    }
    for key, value in args.extra_body.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def run_requests(url: str, bodies: Sequence[dict], *, concurrency: int,
                 timeout_s: float) -> tuple[list[Reply], float]:
    """Send every body (at most `concurrency` in flight); returns the replies in order and wall_s."""
    started = time.perf_counter()
    replies = asyncio.run(_send_all(url, bodies, concurrency, timeout_s))
    return replies, time.perf_counter() - started


# ---------------------------------------------------------------- metrics and results


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def speed_block(replies: Sequence[Reply], wall_s: float) -> dict:
    """Latency over completed requests; throughput over the run's wall time; tokens from `usage`.

    `output_tokens_total` sums `usage.completion_tokens`; replies without it are counted in
    `usage_missing` and add nothing, so the token rates are then lower bounds.
    """
    done = [r for r in replies if r.ok]
    latencies = [r.latency_s for r in done]
    out_tokens = [r.completion_tokens for r in done if r.completion_tokens is not None]
    in_tokens = [r.prompt_tokens for r in done if r.prompt_tokens is not None]
    per_req = [r.completion_tokens / r.latency_s for r in done
               if r.completion_tokens is not None and r.latency_s > 0]
    total_out = sum(out_tokens)
    return {
        "completed_requests": len(done),
        "failed_requests": len(replies) - len(done),
        "latency_mean_s": _r(sum(latencies) / len(latencies)) if latencies else None,
        "latency_p50_s": _r(percentile(latencies, 50)),
        "latency_p95_s": _r(percentile(latencies, 95)),
        "latency_p99_s": _r(percentile(latencies, 99)),
        "latency_max_s": _r(max(latencies)) if latencies else None,
        "throughput_qps": _r(len(done) / wall_s) if wall_s > 0 else None,
        "output_tokens_total": total_out,
        "output_tokens_mean": _r(total_out / len(out_tokens), 2) if out_tokens else None,
        "output_tok_per_s": _r(total_out / wall_s, 2) if wall_s > 0 else None,
        "output_tok_per_req_s": _r(sum(per_req) / len(per_req), 2) if per_req else None,
        "prompt_tokens_total": sum(in_tokens),
        "usage_missing": len(done) - len(out_tokens),
        "wall_s": _r(wall_s),
    }


def write_json_atomic(path: Path, data: dict) -> None:
    """Write `path` so a reader sees the old file or the whole new one, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def fmt(value: Any, spec: str = "", unit: str = "") -> str:
    return "n/a" if value is None else format(value, spec) + unit


def print_speed(speed: dict) -> None:
    print(f"  requests   {speed['completed_requests']} completed, {speed['failed_requests']} failed "
          f"in {fmt(speed['wall_s'], '.2f', ' s')} ({fmt(speed['throughput_qps'], '.2f', ' req/s')})")
    print(f"  latency    mean {fmt(speed['latency_mean_s'], '.3f', ' s')}, "
          f"p50 {fmt(speed['latency_p50_s'], '.3f', ' s')}, p95 {fmt(speed['latency_p95_s'], '.3f', ' s')}")
    print(f"  tokens     {speed['output_tokens_total']} out, {fmt(speed['output_tok_per_s'], '.1f', ' tok/s')}")


def first_errors(replies: Sequence[Reply], limit: int = 3) -> str:
    seen: list[str] = []
    for r in replies:
        if not r.ok and r.error and r.error not in seen:
            seen.append(r.error)
            if len(seen) == limit:
                break
    return "; ".join(seen)


def main_wrapper(run: Callable[[], int]) -> int:
    """Run a client's body; a ClientError becomes its exit code and one line on stderr."""
    try:
        return run()
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def finish(name: str, args: argparse.Namespace, result: dict, replies: Sequence[Reply]) -> int:
    """Write `<name>_results.json`; the exit code says whether the run counts."""
    path = Path(args.output_dir) / f"{name}_results.json"
    write_json_atomic(path, result)
    print(f"  results    {path}")
    if replies and all(not r.ok for r in replies):
        print(f"error: every request failed ({len(replies)} of {len(replies)}): {first_errors(replies)}",
              file=sys.stderr)
        return EXIT_ALL_FAILED
    return EXIT_OK
