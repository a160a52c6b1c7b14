"""Teacher forcing against a server that is not there: recorded as not offered, with why; the
cell's fidelity block stands (bench.run.audits.forcing)."""

from __future__ import annotations

import socket

import httpx

from bench.core.lenses.fidelity import Answer
from bench.run.audits import forcing
from bench.setup.prompts import Prompt


def test_a_server_gone_before_the_first_position_is_not_offered_and_says_why():
    with socket.socket() as held:  # a port nothing answers on: bound, never listening
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        prompt = Prompt(name="p", messages=({"role": "user", "content": "hi"},), max_tokens=4)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=2.0) as client:
            forced = forcing.run(client, "tiny", [prompt], [Answer("p", (1, 2))], [Answer("p", (1, 2))],
                                 lambda _: [7, 8], str, "ref.json")
    assert forced["offered"] is False and forced["note"].startswith("ConnectError")
