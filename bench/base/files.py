"""The one way cellbench replaces a file: whole, durable, and never half-written.

`atomic_write` writes a temp file beside the target, fsyncs it, renames it over the target and
fsyncs the directory, so a reader (or a crash) sees either the old file or the new one. The temp
file is removed on any exception, KeyboardInterrupt included. An existing file keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, *, check: Callable[[], None] | None = None) -> None:
    """Replace `path` with `data` (str is written as UTF-8); `check` runs just before the rename
    and may raise to abandon the write (the table editor re-checks that nobody edited the file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        if check is not None:
            check()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable (a no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
