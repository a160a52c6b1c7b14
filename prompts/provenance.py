"""What every prompt records about where its text came from: the licence and the provenance line.

All of it is self-written for cellbench (corpus.py, agent_domains.py) and released as CC0-1.0.
"""

from __future__ import annotations

LICENSE = "CC0-1.0"


def provenance(template: str, sources: str) -> str:
    """The provenance line of a prompt made from `template`, its text taken from `sources`."""
    return f"self-written: cellbench prompts/build_splits.py, template {template} ({sources})"
