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


def rootdir_of(start: Path) -> Path:
    """The checkout a cellbench command started in `start` works on: the nearest folder, from `start`
    upward, that holds a pytest.ini (the rootdir pytest itself takes there); else the project root."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "pytest.ini").is_file():
            return folder
    return PROJECT_ROOT


def results_root(given: Path | None, invoked_in: Path, rootdir: Path | None = None) -> Path:
    """The results root, one rule for the cells and for `cellbench report`, `clean` and `import`:
    `given` (--results-dir, relative to `invoked_in`, where the command was started), else
    `<rootdir>/results`. A pytest session passes its own rootdir; a command finds it with
    `rootdir_of(invoked_in)`, so both land on the same folder from anywhere in the checkout."""
    if given is not None:
        return invoked_in / given
    return (rootdir if rootdir is not None else rootdir_of(invoked_in)) / "results"
