"""Framework installs in a per-user cache, keyed by framework and version.

An install is idempotent (a finished one leaves `install.json` and is reused), locked against a
second concurrent install of the same version (file lock), and all-or-nothing (the marker is
written last, so an interrupted build is redone from scratch). Every build step writes to a kept log; a failed step
raises `InstallError` naming that log.

What a recipe is (`Recipe`) is declared here; the generic recipes are in bench.setup.installs.recipes
and bench.setup.installs.scripted, and which framework uses which recipe with which arguments is
declared in its adapter module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from filelock import FileLock

from bench.base.files import atomic_write
from bench.base.paths import frameworks_dir

MARKER = "install.json"
UNKNOWN_VERSION = "unknown"  # nothing installed: the running server is asked for its version


class InstallError(RuntimeError):
    """An install step failed; the message names the build log."""


class NotInstalled(LookupError):
    """The framework is not installed and installing was not allowed, or cellbench has no installer
    for it here (`installable` False: `--install` would change nothing); the message says how."""

    def __init__(self, message: str, *, installable: bool = True):
        super().__init__(message)
        self.installable = installable


class NoInstaller(NotInstalled, InstallError):
    """Not installed, and cellbench has nothing to install it with: a cell skips (NotInstalled),
    while an install that was asked for (`cellbench update`, the weekly run) fails (InstallError)."""

    def __init__(self, message: str):
        super().__init__(message, installable=False)


@dataclass(frozen=True)
class Installation:
    framework: str
    version: str
    prefix: Path
    executables: dict[str, str]
    source: str  # "cache", or where an external install came from ("$LLAMA_SERVER", "PATH")
    details: dict = field(default_factory=dict)
    # Set by bench.setup.installs.updates for a cached install a cell selected: "pinned" (the adapter's
    # version) or "updated" (a newer release `cellbench update` installed), with the pinned
    # version beside an updated one. Never in the cache's marker: the choice is the run's, not the install's.
    version_choice: str | None = None
    pinned_version: str | None = None

    def executable(self, name: str) -> str:
        return self.executables[name]

    def to_json(self) -> dict:
        out = {
            "framework": self.framework,
            "version": self.version,
            "prefix": str(self.prefix),
            "executables": self.executables,
            "source": self.source,
            "details": self.details,
        }
        if self.version_choice is not None:
            out["version_choice"] = self.version_choice
        if self.pinned_version is not None:
            out["pinned_version"] = self.pinned_version
        return out

    @classmethod
    def from_json(cls, data: dict) -> Installation:
        return cls(
            framework=data["framework"],
            version=data["version"],
            prefix=Path(data["prefix"]),
            executables=dict(data["executables"]),
            source=data["source"],
            details=dict(data.get("details", {})),
        )


class Recipe(Protocol):
    @property
    def framework(self) -> str: ...

    @property
    def version(self) -> str: ...

    def external(self) -> Installation | None:
        """An install the user already has (an env var, PATH), or None."""

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        """Install into `prefix` (a fresh directory), writing every command's output to `log`."""

    def install_hint(self) -> str:
        """The one command a user runs to install this framework by hand."""


def install_dir(recipe: Recipe) -> Path:
    return frameworks_dir() / recipe.framework / recipe.version


def build_log_path(recipe: Recipe) -> Path:
    return frameworks_dir() / recipe.framework / f"{recipe.version}.build.log"


def cached(recipe: Recipe) -> Installation | None:
    marker = install_dir(recipe) / MARKER
    if not marker.is_file():
        return None
    return Installation.from_json(json.loads(marker.read_text()))


def ensure_installed(recipe: Recipe, *, allow_install: bool = True) -> Installation:
    """The framework's installation: external if the user has one, else cached, else built now."""
    found = recipe.external() or cached(recipe)
    if found is not None:
        return found
    if not getattr(recipe, "has_installer", True):  # a user's own binary only (scripted.OwnBinary)
        raise NoInstaller(f"{recipe.framework} is not installed: {recipe.install_hint()}")
    if not allow_install:
        raise NotInstalled(f"{recipe.framework} {recipe.version} is not installed: {recipe.install_hint()}")
    final = install_dir(recipe)
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final.parent / f"{recipe.version}.lock")):
        found = cached(recipe)  # another process may have finished it while we waited
        if found is not None:
            return found
        # Build in place; the marker is written last, so a killed build is simply redone.
        shutil.rmtree(final, ignore_errors=True)
        final.mkdir()
        log_path = build_log_path(recipe)
        started = time.monotonic()
        with log_path.open("w") as log:
            try:
                built = recipe.build(final, log)
            except (subprocess.CalledProcessError, OSError) as exc:
                raise InstallError(
                    f"installing {recipe.framework} {recipe.version} failed ({exc}); build log: {log_path}"
                ) from exc
        built.details.setdefault("install_seconds", round(time.monotonic() - started, 1))
        built.details.setdefault("build_log", str(log_path))
        atomic_write(final / MARKER, json.dumps(built.to_json(), indent=2))
        return built
