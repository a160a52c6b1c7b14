"""A real llama-server's own error reaches the record, the verdict's reason and the journal.

llama-server started with a context of 256 tokens is sent a prompt far over it, through the load
generator's own client (`ChatClient`, streaming as a level does). It answers 400 with an OpenAI
error body before any stream begins; the record's message must be its words, and so must the
reason of the all-failed cell and the journal's Failures section.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core import metrics
from bench.core.records import ErrorType, RequestRecord
from bench.core.verdicts import Evidence, Identity, Verdict, classify
from bench.load.request import ChatClient, Flight
from bench.reports.journal import CellEntry, Journal
from bench.setup.tinymodel import ensure_tiny_model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CTX = 256
WORDS = "exceeds the available context size (256 tokens), try increasing it (type exceed_context_size_error)"
READY_TIMEOUT_S = 120.0  # a bound on a broken start, not a guess at how fast a good one is


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def small_context_server(binary: str, log: Path) -> Iterator[str]:
    """llama-server on the tiny model with --ctx-size 256, one slot; stopped by its pid."""
    port = _free_port()
    argv = [binary, "-m", str(ensure_tiny_model().gguf_path), "--ctx-size", str(CTX), "-np", "1",
            "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            assert time.monotonic() < deadline, f"not ready in {READY_TIMEOUT_S:g} s: {log.read_text()[-2000:]}"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def over_context_requests(base_url: str, n: int) -> list[RequestRecord]:
    body = json.dumps({"model": "tiny", "stream": True, "max_tokens": 8, "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": " ".join(["hello world"] * 200)}]}).encode()

    async def main() -> list[RequestRecord]:
        client = ChatClient(base_url, 60.0, on_output=lambda n: None, on_lost=lambda: None)
        records = []
        try:
            for i in range(n):
                flight = Flight(RequestRecord(index=i, prompt_name=f"long-{i}", t_sched=time.perf_counter()))
                await client.exchange(flight, body)
                records.append(flight.record)
        finally:
            client.close()
        return records

    return asyncio.run(main())


def test_llama_servers_over_context_error_keeps_its_words_to_the_journal(llama_server, tmp_path):
    with small_context_server(llama_server, tmp_path / "llama-server.log") as base_url:
        records = over_context_requests(base_url, 3)
    for rec in records:
        assert rec.error is not None and rec.error.type is ErrorType.HTTP_4XX and rec.http_status == 400
        assert rec.error.message.startswith("HTTP 400 Bad Request: request (") and rec.error.message.endswith(WORDS)

    level = {"concurrency": 1, "successful": 0, "failed": len(records), "client": {},
             "output_throughput_tps": None, "dominant_error": metrics.dominant_error(records),
             "error_samples": metrics.error_samples(records)}
    verdict = classify(Evidence(levels=(level,), identity=Identity("tiny", None, ())))
    assert verdict.verdict is Verdict.ALL_FAILED
    assert verdict.reason.startswith("3/3 requests failed, mostly http_4xx 400 (3x): HTTP 400 Bad Request: request (")
    assert verdict.reason.endswith(WORDS)

    journal = Journal.open(tmp_path / "results", model="tiny", machine="here", day="2026-01-05")
    journal.record(CellEntry("llamacpp", "chat", verdict.verdict.value, verdict.reason,
                             evidence={"dominant_error": level["dominant_error"]}))
    failures = journal.md_path.read_text().split("## Failures", 1)[1]
    assert f"### llamacpp / chat: all-failed\n- Reason: {verdict.reason}\n" in failures
