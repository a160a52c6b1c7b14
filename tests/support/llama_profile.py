"""A model profile whose `openai` server is llama-server on a GGUF file of the test's choosing: the
built-in tiny model's results folder and tokenizer, any weights and server flags."""

from __future__ import annotations

import json
from pathlib import Path

from bench.setup import profiles

PROFILE = """\
name: {name}
results_name: tiny
builtin: tiny
sampling: {{temperature: 1.0}}
ignore_eos: true
formats:
  gguf: {{served_id: tiny}}
openai:
  command: {command}
"""


def llama_profile(folder: Path, name: str, server: str, gguf: Path, *flags: str) -> profiles.ModelProfile:
    """The profile `name`, written into `folder`: `server -m gguf` on 127.0.0.1, four slots, `flags` added."""
    command = [server, "-m", str(gguf), "--host", "127.0.0.1", "--port", "{port}", "--parallel", "4", *flags,
               "--no-webui", "--alias", "tiny"]
    path = folder / f"{name}.yaml"
    path.write_text(PROFILE.format(name=name, command=json.dumps(command)))
    return profiles.load_profile(str(path))
