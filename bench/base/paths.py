"""Where cellbench keeps what outlives a checkout: framework installs and built models.

The cache sits outside the checkout so that CI on the same machine reuses a llama.cpp build
(~10 min on 2 cores) across fresh clones. `CELLBENCH_CACHE` overrides it.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    explicit = os.environ.get("CELLBENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cellbench"


def frameworks_dir() -> Path:
    return cache_root() / "frameworks"


def models_dir() -> Path:
    return cache_root() / "models"


def host_lock_path() -> Path:
    """One file per host: every cell holds it so two cells never share the machine."""
    return cache_root() / "host.lock"
