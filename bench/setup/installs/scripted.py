"""Installs that are a few shell commands on their platform (clone and build, brew, a project script).

A `ScriptedInstall` is those commands as data: `git clone` then `cargo build`, `brew install`, a
`uv pip install "git+..."` into a venv, a project's own install script. `build` runs them in order
inside the install prefix, each command's output going to the build log, then asks what was
installed for its version (`git describe`, `ollama --version`, the package's metadata) and records
the answer: for a moving target such as git main or brew, the cache key says nothing about what
was actually built. `update_commands` are the matching update steps, kept as data for the
weekly pipeline. A user's own install (an env var, PATH, or a known location) wins over building.
An `OwnBinary` is the case with no commands at all: a framework cellbench has no installer for on
a platform (Ollama on Linux), run only from the user's own binary.

Commands may name `{prefix}` (the install directory); the version probe may also name `{dir}` (the
directory of the main executable) and `{<executable>}` (its path), so one probe serves both a
cached build and a user's own install.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from bench.setup.installs.cache import Installation, InstallError, install_dir
from bench.setup.installs.commands import run_logged

# A release number (`0.12.3`, `0.7.0-123-gabc1234` from `git describe`, `0.2.5+git.abc1234`) or a
# bare commit hash: what the probe output's first match of this becomes the installed version.
VERSION_PATTERN = r"\d+\.\d+(?:\.\d+)?[\w.+-]*|\b[0-9a-f]{7,40}\b"


@dataclass(frozen=True)
class Step:
    """One install command: an argv, or a bash script (pipes, `$(...)`) run with `-euo pipefail`."""

    command: tuple[str, ...] | str
    cwd: str = ""  # relative to the install prefix
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self, values: Mapping[str, str]) -> list[str]:
        if isinstance(self.command, str):
            return ["bash", "-euo", "pipefail", "-c", fill(self.command, values)]
        return [fill(arg, values) for arg in self.command]

    def render(self, values: Mapping[str, str]) -> str:
        """The step as a user would type it."""
        if isinstance(self.command, str):
            text = fill(self.command, values)
            if ";" in text:  # several statements: one group, so a `&&` chain around it reads right
                text = "{ " + text.rstrip("; ") + "; }"
        else:
            text = shlex.join(self.argv(values))
        if self.env:
            text = " ".join(f"{k}={shlex.quote(fill(v, values))}" for k, v in self.env.items()) + " " + text
        if self.cwd:
            text = f"cd {shlex.quote(fill('{prefix}/' + self.cwd, values))} && {text}"
        return text


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace `{name}` for the names in `values` only, so shell braces (`${HOME}`) pass through."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def dist_version_probe(python: str, dist: str) -> tuple[str, ...]:
    """A probe printing `<version>+git.<commit>` of an installed distribution (the commit when pip
    or uv installed it from git, as recorded in its direct_url.json)."""
    script = (
        "import importlib.metadata as m, json\n"
        f"d = m.distribution({dist!r})\n"
        "vcs = json.loads(d.read_text('direct_url.json') or '{}').get('vcs_info', {})\n"
        "commit = vcs.get('commit_id', '')[:10]\n"
        "print(d.version + ('+git.' + commit if commit else ''))"
    )
    return (python, "-c", script)


@dataclass(frozen=True)
class ScriptedInstall:
    framework: str
    version: str  # the cache key: what the commands fetch ("git-main", "brew", "release")
    steps: tuple[Step, ...]
    executables: Mapping[str, str]  # name -> path under the prefix, `~/...`, or a bare name on PATH
    version_probe: tuple[str, ...]  # argv; its output's first version-looking token is recorded
    update_commands: tuple[Step, ...] = ()
    env_var: str | None = None  # points at a user's own main executable
    path_name: str | None = None  # the main executable's name on PATH
    env_aliases: tuple[str, ...] = ()  # older names of `env_var`, still honoured after it
    search_paths: tuple[str, ...] = ()  # where a user's own install usually lives (`~/...`)
    external_probe: tuple[str, ...] = ("{exe}", "--version")

    @property
    def main(self) -> str:
        return next(iter(self.executables))

    # --- where its releases come from (read off the steps: the adapter says it once) -------------

    def git_clone(self) -> tuple[str, str] | None:
        """(url, checkout directory under the prefix) of a `git clone URL {prefix}/DIR` step, or None."""
        for step in self.steps:
            cmd = step.command
            if isinstance(cmd, tuple) and cmd[:2] == ("git", "clone") and len(cmd) >= 4:
                return cmd[-2], cmd[-1].removeprefix("{prefix}/")
        return None

    def git_url(self) -> str | None:
        """The git repository the steps build from: a clone, or a `git+URL` requirement."""
        if clone := self.git_clone():
            return clone[0]
        for arg in self._args():
            if arg.startswith("git+"):
                return _without_ref(arg.removeprefix("git+"))
        return None

    def brew_formula(self) -> str | None:
        for step in self.steps:
            cmd = step.command
            if isinstance(cmd, tuple) and cmd[:2] == ("brew", "install"):
                return cmd[-1]
        return None

    def with_version(self, commit: str) -> ScriptedInstall:
        """This install at one upstream commit, under its own cache key (`git-main-<commit>`): the
        clone is checked out at it, a `git+URL` requirement names it. Only a git source has versions
        to choose; brew and install scripts update in place (`update_commands`)."""
        clone = self.git_clone()
        if clone is None and not any(arg.startswith("git+") for arg in self._args()):
            raise ValueError(f"{self.framework}: only an install from git can be built at another version")
        steps: list[Step] = []
        for step in self.steps:
            if isinstance(step.command, tuple):
                step = replace(step, command=tuple(_at_commit(arg, commit) for arg in step.command))
            steps.append(step)
            if clone is not None and isinstance(step.command, tuple) and step.command[:2] == ("git", "clone"):
                steps.append(Step(("git", "-C", f"{{prefix}}/{clone[1]}", "checkout", "--quiet", commit)))
        return replace(self, version=f"{self.version}-{commit[:12]}", steps=tuple(steps))

    def _args(self) -> list[str]:
        return [arg for step in self.steps if isinstance(step.command, tuple) for arg in step.command]

    # --- what a user reads ---------------------------------------------------------------------

    def install_commands(self) -> list[str]:
        return [step.render(self._values(install_dir(self))) for step in self.steps]

    def update_script(self) -> list[str]:
        return [step.render(self._values(install_dir(self))) for step in self.update_commands]

    def install_hint(self) -> str:
        own = []
        if self.env_var:
            also = "".join(f" or ${name}" for name in self.env_aliases)
            own.append(f"set ${self.env_var}{also} to your own {self.main}")
        if self.path_name:
            own.append(f"put `{self.path_name}` on PATH")
        suffix = f"; or {' or '.join(own)}" if own else ""
        return f"cellbench install {self.framework} (runs: {' && '.join(self.install_commands())}){suffix}"

    # --- a user's own install ------------------------------------------------------------------

    def external(self) -> Installation | None:
        if found := own_binary(self.env_var, self.env_aliases, self.path_name):
            return self._external(*found)
        for candidate in self.search_paths:
            path = Path(candidate).expanduser()
            if path.is_file():
                return self._external(path, candidate)
        return None

    def _external(self, binary: Path, source: str) -> Installation:
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise InstallError(f"{source} points at {binary}, which is not an executable file")
        values = {"exe": str(binary), "dir": str(binary.parent), self.main: str(binary)}
        version, output = _probe([fill(arg, values) for arg in self.external_probe], cwd=binary.parent)
        return Installation(
            framework=self.framework,
            version=version or "unknown",
            prefix=binary.parent,
            executables={self.main: str(binary)},
            source=source,
            details={"version_output": output},
        )

    # --- building ------------------------------------------------------------------------------

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        values = self._values(prefix)
        for step in self.steps:
            cwd = (prefix / step.cwd).resolve()
            if not cwd.is_relative_to(prefix.resolve()):
                raise InstallError(f"{self.framework}: step cwd {step.cwd!r} leaves the install prefix")
            env = {**os.environ, **{k: fill(v, values) for k, v in step.env.items()}}
            run_logged(step.argv(values), log, cwd=cwd, env=env)
        executables = {name: self._locate(name, where, prefix) for name, where in self.executables.items()}
        main = Path(executables[self.main])
        probe_values = {**values, "dir": str(main.parent), **executables}
        probe = [fill(arg, probe_values) for arg in self.version_probe]
        log.write(f"\n$ {shlex.join(probe)}\n")
        version, output = _probe(probe, cwd=prefix)
        log.write("\n".join(output) + "\n")
        if version is None:
            raise InstallError(f"{self.framework}: the version probe printed no version: {output[-3:]}")
        return Installation(
            framework=self.framework,
            version=version,
            prefix=prefix,
            executables=executables,
            source="cache",
            details={"recipe": self.version, "commands": [s.render(values) for s in self.steps],
                     "version_output": output},
        )

    def _locate(self, name: str, where: str, prefix: Path) -> str:
        if "/" not in where:  # installed onto PATH (brew)
            found = shutil.which(where)
            if found is None:
                raise InstallError(f"{self.framework}: the install finished, but `{where}` is not on PATH")
            return found
        path = Path(where).expanduser()
        path = path if path.is_absolute() else prefix / path
        if not path.is_file():
            raise InstallError(f"{self.framework}: the install finished without {path}")
        return str(path)

    @staticmethod
    def _values(prefix: Path) -> dict[str, str]:
        return {"prefix": str(prefix)}


def own_binary(env_var: str | None, aliases: tuple[str, ...], path_name: str | None) -> tuple[Path, str] | None:
    """(the binary, where it was named) of a user's own install: the first of `env_var` and its
    `aliases` that is set, else `path_name` on PATH; None when none names one."""
    for name in (env_var, *aliases) if env_var else ():
        if os.environ.get(name):
            return Path(os.environ[name]), f"${name}"
    if path_name and (found := shutil.which(path_name)):
        return Path(found), "PATH"
    return None


@dataclass(frozen=True)
class OwnBinary:
    """A framework cellbench cannot install on a platform, run from the user's own binary.

    Cells run wherever the binary is found (`env_var`, an alias, or `path_name` on PATH) and skip
    otherwise with `install_hint`, which says what is missing and how to point at it; there is
    nothing to build, so `--install` changes nothing (`has_installer` is False). The version is
    asked of the binary (`version_probe`, `{exe}` its path), as for a ScriptedInstall's own install.
    """

    framework: str
    env_var: str
    path_name: str
    why_no_installer: str  # "no installer for it on Linux here", said in the skip reason
    env_aliases: tuple[str, ...] = ()
    version_probe: tuple[str, ...] = ("{exe}", "--version")
    version: str = "own"  # a cache key is never made: nothing is installed
    has_installer = False

    @classmethod
    def beside(cls, recipe: ScriptedInstall, why_no_installer: str) -> OwnBinary:
        """The user's own binary where `recipe` cannot install, found the way `recipe` finds one
        (the same variables and PATH name), so a user sets one name on every platform."""
        if recipe.env_var is None or recipe.path_name is None:
            raise ValueError(f"{recipe.framework}: the recipe names no variable and PATH name of an own binary")
        return cls(framework=recipe.framework, env_var=recipe.env_var, env_aliases=recipe.env_aliases,
                   path_name=recipe.path_name, why_no_installer=why_no_installer)

    def install_hint(self) -> str:
        also = "".join(f" (or ${name})" for name in self.env_aliases)
        return (f"{self.why_no_installer}: set {self.env_var}=/path/to/{self.path_name}{also} "
                f"or put `{self.path_name}` on PATH")

    def external(self) -> Installation | None:
        found = own_binary(self.env_var, self.env_aliases, self.path_name)
        if found is None:
            return None
        binary, source = found
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise InstallError(f"{source} points at {binary}, which is not an executable file")
        version, output = _probe([fill(arg, {"exe": str(binary)}) for arg in self.version_probe], cwd=binary.parent)
        return Installation(framework=self.framework, version=version or "unknown", prefix=binary.parent,
                            executables={self.path_name: str(binary)}, source=source,
                            details={"version_output": output})

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        raise InstallError(f"{self.framework}: {self.install_hint()}")


def _without_ref(url: str) -> str:
    """`URL@ref` -> URL; the `@` of `ssh://git@host/...` is not a ref (a path follows it)."""
    return re.sub(r"@[^/@]+$", "", url)


def _at_commit(arg: str, commit: str) -> str:
    """A `git+URL` requirement pinned to `commit`; any other argument unchanged."""
    return f"{_without_ref(arg)}@{commit}" if arg.startswith("git+") else arg


def _probe(argv: list[str], *, cwd: Path) -> tuple[str | None, list[str]]:
    """Run a version probe: (the version it names or None, its last output lines)."""
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, [f"{type(exc).__name__}: {exc}"]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    if done.returncode != 0:
        return None, lines[-5:]
    for line in lines:
        if match := re.search(VERSION_PATTERN, line):
            return match.group(0), lines[-5:]
    return None, lines[-5:]
