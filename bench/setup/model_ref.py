"""The model as a framework's server sees it: which format, which local artefact, which id.

Profiles produce a `ModelRef` and adapters consume one, so it sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ModelFormat = Literal["gguf", "hf", "mlx", "ollama"]


@dataclass(frozen=True)
class ModelRef:
    """The model as one framework sees it: the local artefact and the id the server must list."""

    path: Path | None  # a GGUF file or a model directory; None for registry tags (ollama)
    served_id: str  # the id `/v1/models` must list and every request sends
    alias: str | None = None  # what the serve command names it, when the adapter can choose
