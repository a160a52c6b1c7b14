"""`--memory-limit`: run a server inside a fresh memory cgroup with a hard limit (Linux only).

Where the cgroup goes, in order of preference:
- cgroup v2, when this process's cgroup2 has `memory` enabled in its `cgroup.subtree_control`
  (a delegated subtree): `<own cgroup>/cellbench-<pid>-<n>` with `memory.max` and
  `memory.swap.max = 0`. We never enable a controller ourselves: that changes the host.
- cgroup v1 otherwise: a child of this process's own memory cgroup (so a limit the session itself
  runs under still applies, and nothing escapes its accounting), else of the hierarchy's root:
  `.../cellbench-<pid>-<n>` with `memory.limit_in_bytes` and, when the kernel accounts swap,
  `memory.memsw.limit_in_bytes` at the same value, so swap cannot dodge the limit.

How the server gets in: `wrap(argv)` prefixes a `/bin/sh` that writes its own pid to
`cgroup.procs` and then `exec`s the server, so the server is inside from its first byte, children
included, and the pid Popen returns is the server's. Not `preexec_fn`: the benchmark has threads
(the resource sampler, HTTP clients), and Python documents `preexec_fn` as unsafe with threads.
Not "write the pid after Popen": the server could allocate before the write lands.

When the machine cannot do it (not root, no memory controller, no delegation) `create()` raises
`MemoryLimitUnavailable` naming what is missing: a cell asked to run limited must fail with that
reason, never run unlimited. This module uses the standard library only.

Size: one file on purpose: standard library only, it imports alone, as tests/host/test_oom.py runs it for
an unprivileged user who cannot read the checkout.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "cellbench-"
_counter = itertools.count(1)

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


class MemoryLimitUnavailable(RuntimeError):
    """This machine cannot enforce a memory limit; `str()` names what is missing."""


def parse_size(text: str | int) -> int:
    """Bytes in `512M`, `2G`, `1.5GiB`, `64k`, `1073741824`.

    Units are binary whatever the spelling (K = KB = KiB = 1024), as systemd and Docker read
    memory limits; a limit is never parsed as decimal gigabytes by surprise.
    """
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text))
        if not m or (m.group(3) and m.group(3).lower() == "ib" and not m.group(2)):
            raise ValueError(f"not a memory size: {text!r} (use e.g. 512M, 2G, 1.5GiB or a byte count)")
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise ValueError(f"a memory limit must be positive, not {text!r}")
    return value


def format_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{n} B"


@dataclass
class MemoryCgroup:
    """One cgroup made for one server. `remove()` after the server's processes are gone."""

    path: Path  # the directory
    relpath: str  # as the kernel names it in OOM reports (`task_memcg=`), from the hierarchy's root
    version: int  # 1 or 2
    limit_bytes: int
    swap_limited: bool  # swap is capped too (v1 memsw / v2 swap.max), or the machine has no swap
    removed: bool = False

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def wrap(self, argv: list[str], env_path: str | None = None) -> list[str]:
        """`argv`, started inside this cgroup: sh joins it, then execs the server (same pid)."""
        exe = argv[0]
        if "/" not in exe:  # fail as Popen would (FileNotFoundError), not as a shell's exit 127
            found = shutil.which(exe, path=env_path)
            if found is None:
                raise FileNotFoundError(2, "No such file or directory", exe)
            exe = found
        script = (
            'echo $$ > "$1" || { echo "cellbench: cannot join memory cgroup $1" >&2; exit 125; }; '
            'shift; exec "$@"'
        )
        return ["/bin/sh", "-c", script, "cellbench-memlimit", str(self.procs_file), exe, *argv[1:]]

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def oom_kills(self) -> int | None:
        """How many processes the kernel OOM-killed in this cgroup (None: not readable)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _read_keyed(self.path / name).get("oom_kill")

    def usage_bytes(self) -> int | None:
        return _read_int(self.path / ("memory.current" if self.version == 2 else "memory.usage_in_bytes"))

    def peak_bytes(self) -> int | None:
        return _read_int(self.path / ("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"))

    def kill_all(self) -> None:
        """SIGKILL whatever is still inside: every process here was started for this server."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, timeout_s: float = 5.0) -> bool:
        """rmdir once the cgroup is empty (exiting processes take a moment to leave it)."""
        if self.removed:
            return True
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
                self.removed = True
                return True
            except FileNotFoundError:
                self.removed = True
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)

    def effective_limit_bytes(self) -> int | None:
        """The limit that binds, a parent's included (v1 `hierarchical_memory_limit`)."""
        if self.version == 1:
            return _read_keyed(self.path / "memory.stat").get("hierarchical_memory_limit")
        return None

    def to_json(self) -> dict:
        return {
            "cgroup": str(self.path),
            "version": self.version,
            "limit_bytes": self.limit_bytes,
            "effective_limit_bytes": self.effective_limit_bytes(),
            "swap_limited": self.swap_limited,
            "peak_bytes": self.peak_bytes(),
            "oom_kills": self.oom_kills(),
        }


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    return out


# --- where the hierarchies are ------------------------------------------------------------------


@dataclass(frozen=True)
class _Mount:
    version: int
    mountpoint: Path
    root: str  # the mount's root inside the hierarchy (a container sees a subtree)


def _mounts(mountinfo: Path) -> tuple[_Mount | None, _Mount | None]:
    """(v1 memory mount, v2 mount) from /proc/self/mountinfo."""
    v1 = v2 = None
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            fstype, options = rfields[0], rfields[2].split(",")
            mount = Path(fields[4].replace("\\040", " "))
            if fstype == "cgroup2" and v2 is None:
                v2 = _Mount(2, mount, fields[3])
            elif fstype == "cgroup" and "memory" in options and v1 is None:
                v1 = _Mount(1, mount, fields[3])
    return v1, v2


def _own_cgroups(proc_cgroup: Path) -> tuple[str | None, str | None]:
    """(v1 memory path, v2 path) of this process, from /proc/self/cgroup."""
    v1 = v2 = None
    with contextlib.suppress(OSError):
        for line in proc_cgroup.read_text().splitlines():
            hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
            if hid == "0" and controllers == "":
                v2 = path
            elif "memory" in controllers.split(","):
                v1 = path
    return v1, v2


def _inside(mount: _Mount, cgroup_path: str) -> tuple[Path, str] | None:
    """The directory of `cgroup_path` under `mount`, and its path from the hierarchy's root."""
    root = mount.root.rstrip("/")  # "" when the whole hierarchy is mounted
    if root and not (cgroup_path == root or cgroup_path.startswith(root + "/")):
        return None
    directory = mount.mountpoint / cgroup_path[len(root):].lstrip("/")
    return (directory, cgroup_path) if directory.is_dir() else None


def _v2_parent(mount: _Mount | None, own: str | None) -> tuple[Path, str] | str:
    """A cgroup2 directory we may create a memory-limited child in, or why there is none."""
    if mount is None:
        return "no cgroup2 mount"
    if own is None:
        return "this process has no cgroup2 path"
    found = _inside(mount, own)
    if found is None:
        return f"this process's cgroup2 {own} is not under {mount.mountpoint}"
    directory, rel = found
    try:
        enabled = (directory / "cgroup.subtree_control").read_text().split()
    except OSError as exc:
        return f"cannot read {directory / 'cgroup.subtree_control'}: {exc.strerror}"
    if "memory" not in enabled:
        return (f"the memory controller is not delegated in cgroup2 {directory} "
                f"(cgroup.subtree_control: {' '.join(enabled) or 'empty'})")
    if not os.access(directory, os.W_OK):
        return f"cgroup2 {directory} is not writable by uid {os.geteuid()}"
    return directory, rel


def _v1_parent(mount: _Mount | None, own: str | None) -> tuple[Path, str] | str:
    if mount is None:
        return "no cgroup v1 memory controller mounted"
    candidates = []
    if own is not None and (found := _inside(mount, own)) is not None:
        candidates.append(found)  # nested: the session's own limit still applies
    candidates.append((mount.mountpoint, mount.root if mount.root != "/" else "/"))
    for directory, rel in candidates:
        if os.access(directory, os.W_OK) and (directory / "memory.limit_in_bytes").exists():
            return directory, rel
    return (f"no writable memory cgroup under {mount.mountpoint} for uid {os.geteuid()} "
            "(needs root or a delegated hierarchy)")


def _parent(proc: Path = Path("/proc/self")) -> tuple[int, Path, str] | str:
    if not sys.platform.startswith("linux"):
        return f"memory limits need Linux cgroups; this is {sys.platform}"
    v1_mount, v2_mount = _mounts(proc / "mountinfo")
    v1_own, v2_own = _own_cgroups(proc / "cgroup")
    v2 = _v2_parent(v2_mount, v2_own)
    if not isinstance(v2, str):
        return (2, *v2)
    v1 = _v1_parent(v1_mount, v1_own)
    if not isinstance(v1, str):
        return (1, *v1)
    return f"{v2}; {v1}"


def unavailable() -> str | None:
    """Why `create()` would fail here, or None when it can work (cheap: creates nothing)."""
    found = _parent()
    return found if isinstance(found, str) else None


def create(limit_bytes: int) -> MemoryCgroup:
    """A fresh cgroup with a hard memory limit of `limit_bytes`; raises MemoryLimitUnavailable."""
    found = _parent()
    if isinstance(found, str):
        raise MemoryLimitUnavailable(f"cannot enforce a memory limit: {found}")
    version, parent, parent_rel = found
    name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
    path = parent / name
    try:
        path.mkdir()
    except OSError as exc:
        raise MemoryLimitUnavailable(f"cannot create memory cgroup {path}: {exc.strerror or exc}") from exc
    rel = f"{parent_rel.rstrip('/')}/{name}"
    try:
        if version == 2:
            _write(path / "memory.max", limit_bytes)
            swap = path / "memory.swap.max"
            if swap.exists():
                _write(swap, 0)
            swap_limited = swap.exists() or _no_swap()
        else:
            # memsw (memory + swap) must stay >= the memory limit: set the memory limit first.
            _write(path / "memory.limit_in_bytes", limit_bytes)
            memsw = path / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                _write(memsw, limit_bytes)
            swap_limited = memsw.exists() or _no_swap()
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.rmdir()
        raise MemoryLimitUnavailable(f"cannot set a memory limit on {path}: {exc.strerror or exc}") from exc
    return MemoryCgroup(path, rel, version, limit_bytes, swap_limited)


def _write(path: Path, value: int) -> None:
    with open(path, "w") as f:  # one write(2): cgroup files reject partial writes
        f.write(str(value))


def _no_swap() -> bool:
    try:
        return len(Path("/proc/swaps").read_text().splitlines()) <= 1
    except OSError:
        return False


def reap_stale() -> list[str]:
    """Remove empty cellbench cgroups whose creating process is gone (a hard-killed session).

    Only directories named `cellbench-<pid>-<n>` are considered, and rmdir of a cgroup that still
    has processes fails, so a live server's cgroup is never touched.
    """
    found = _parent()
    if isinstance(found, str):
        return []
    _, parent, _ = found
    removed = []
    for entry in parent.glob(f"{PREFIX}*-*"):
        m = re.fullmatch(rf"{PREFIX}(\d+)-\d+", entry.name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            entry.rmdir()
            removed.append(str(entry))
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
