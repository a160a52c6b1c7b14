"""Capture the real guidellm outputs tests/perf/test_peer_guidellm.py reads (see README.md here).

    python tests/data/peers/guidellm/capture.py OUT_DIR

Two runs of the cached guidellm (`cellbench install guidellm`) through the peer's own
`run_guidellm`, each on a fresh paced null server (first chunk 20 ms after the request, then one
every 10 ms, each stream's first chunk naming it): `paced.json.gz`, 3 streams x 2 rounds of 5 chunks,
with the server's log of that run (`paced-server-log.json`); `killed.json.gz`, 2 streams x 3 rounds of
50 chunks with the server killed 0.7 s after its first chunk, so the first round completes, the
second breaks mid-stream and the third finds no server.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.perf.clients import Workload
from bench.perf.null_server.server import MODEL, paced_server
from bench.perf.peers.guidellm import RECIPE, run_guidellm
from bench.setup.installs.cache import cached
from bench.setup.tinymodel import ensure_tiny_model

PROMPT = "Write a short story about a lighthouse keeper and the sea."


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        found: dict = json.loads(answer.read())
    return found


def _keep(folder: Path, out: Path) -> None:
    with (folder / "guidellm.json").open("rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)


def capture(out: Path) -> None:
    install = cached(RECIPE)
    if install is None:
        raise SystemExit("guidellm is not installed: cellbench install guidellm")
    tokenizer = str(ensure_tiny_model().hf_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with paced_server(10.0, first_ms=20.0, precise=True, spread=3) as (url, _):
            work = Workload(url, MODEL, concurrency=3, requests=6, prompts=(PROMPT,), max_tokens=5, tokenizer=tokenizer)
            run_guidellm(install, work, folder, None)
            (out / "paced-server-log.json").write_text(json.dumps(_get(url + "/log")))
        _keep(folder, out / "paced.json.gz")
        with paced_server(10.0, first_ms=20.0, precise=True) as (url, server):
            def kill_after_first_chunk() -> None:
                while _get(url + "/stats")["n"] == 0:  # the pacer counts the chunks it wrote
                    time.sleep(0.01)
                time.sleep(0.7)
                server.kill()

            killer = threading.Thread(target=kill_after_first_chunk, daemon=True)
            killer.start()
            work = Workload(url, MODEL, concurrency=2, requests=6, prompts=(PROMPT,), max_tokens=50,
                            tokenizer=tokenizer)
            run_guidellm(install, work, folder, None)
        _keep(folder, out / "killed.json.gz")


if __name__ == "__main__":
    capture(Path(sys.argv[1]))
