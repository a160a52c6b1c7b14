"""A framework's newest release, asked at its own source, and what changed upstream between two.

Each recipe kind has one source: a pip venv and a llama.cpp-style sdist build ask the package index
through pip itself (`pip index versions`), so the user's own index, extra indexes, find-links and
proxies apply and cellbench names no index host; a build from git asks the remote's branch head
(`git ls-remote`); a brew install asks `brew info --json=v2`. A source that cannot be reached says
so (`Resolution.why`), and nothing is guessed from a cache or a pin. Pre-releases are skipped
unless asked for.

A "version" here is in the source's own terms: an index release (`11500.0.0`), a commit, a brew
version. `at_version` turns one into the recipe built from it, whose `version` is its cache key.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from bench.base.paths import frameworks_dir
from bench.setup.installs.cache import Recipe
from bench.setup.installs.recipes import PipVenv, SdistCMakeBuild
from bench.setup.installs.scripted import ScriptedInstall

PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input")
QUERY_TIMEOUT_S = 300.0  # pip: its own retries and timeouts (the user's configuration) come first
GIT_TIMEOUT_S = 60.0
NOTES_LABEL = re.compile(r"change|release|news|history|what.?s new", re.IGNORECASE)
COMMIT_IN_VERSION = re.compile(r"(?:^|-g|\+git\.)([0-9a-f]{7,40})$")
MAX_LOG_LINES = 40


class Unresolved(Exception):
    """The source could not be asked, or did not answer; the message says why."""


@dataclass(frozen=True)
class ReleaseSource:
    """Where a recipe's new releases are published: a package index, a git repository, a brew formula."""

    kind: str  # "package index", "git", "brew", or "none"
    name: str = ""  # the package, the repository URL, the formula
    sdist_only: bool = False  # only releases with a source distribution count (the recipe builds one)
    why: str = ""  # kind "none": why no source is known


@dataclass(frozen=True)
class Resolution:
    """The newest release at a recipe's source and the command that found it, or why none was found."""

    source: str
    command: str
    newest: str | None = None
    why: str = ""

    @property
    def resolved(self) -> bool:
        return self.newest is not None

    def describe(self) -> str:
        if not self.resolved:
            return f"unresolved: {self.why}"
        return f"{self.source}: {self.command}"

    def to_json(self) -> dict:
        out = {"source": self.source, "command": self.command, "newest": self.newest}
        if self.why:
            out["unresolved"] = self.why
        return out


def source_of(recipe: Recipe) -> ReleaseSource:
    """Where this recipe's releases come from, read off the recipe (the adapter's data)."""
    if isinstance(recipe, SdistCMakeBuild):
        return ReleaseSource("package index", recipe.package, sdist_only=True)
    if isinstance(recipe, PipVenv):
        return ReleaseSource("package index", recipe.main_requirement.name)
    if isinstance(recipe, ScriptedInstall):
        if url := recipe.git_url():
            return ReleaseSource("git", url)
        if formula := recipe.brew_formula():
            return ReleaseSource("brew", formula)
        return ReleaseSource("none", why=f"{recipe.framework}'s install runs a script ({recipe.install_commands()[0]}) "
                                  "that names no upstream this can ask")
    return ReleaseSource("none", why=f"cellbench does not install {recipe.framework}, so it has no release to update")


def pinned_upstream(recipe: Recipe) -> str | None:
    """The release the adapter pins, in its source's terms; None for a moving target (git, brew)."""
    if isinstance(recipe, SdistCMakeBuild):
        return recipe.package_version
    if isinstance(recipe, PipVenv):
        return recipe.version
    return None


def at_version(recipe: Recipe, version: str) -> Recipe:
    """The same recipe built from `version`; ValueError when its kind updates in place (brew)."""
    if isinstance(recipe, (SdistCMakeBuild, PipVenv, ScriptedInstall)):
        return recipe.with_version(version)
    raise ValueError(f"{recipe.framework}: cellbench does not install it, so it has no other version")


def is_newer(candidate: str, current: str | None, kind: str) -> bool:
    """Whether the source's newest `candidate` is newer than `current`: a later release for the
    index and brew, any other commit for git (the branch head is the newest by definition)."""
    if current is None:
        return True
    if kind == "git":
        return not (candidate.startswith(current) or current.startswith(candidate))
    try:
        return Version(candidate) > Version(current)
    except InvalidVersion:
        return candidate != current


def resolve(recipe: Recipe, *, pre: bool = False) -> Resolution:
    source = source_of(recipe)
    if source.kind == "none":
        return Resolution("none", "", why=source.why)
    if source.kind == "package index":
        command = _index_command(source, pre=pre)
        try:
            versions = index_versions(source, pre=pre)
        except Unresolved as exc:
            return Resolution(source.kind, _shown(command), why=str(exc))
        if not versions:
            return Resolution(source.kind, _shown(command), why=f"the index lists no {'' if pre else 'final '}"
                                                                f"release of {source.name}")
        return Resolution(source.kind, _shown(command), newest=str(max(versions)))
    if source.kind == "git":
        command = ["git", "ls-remote", "--exit-code", source.name, "HEAD"]
        try:
            return Resolution("git", shlex.join(command), newest=_git_head(command))
        except Unresolved as exc:
            return Resolution("git", shlex.join(command), why=str(exc))
    command = ["brew", "info", "--json=v2", source.name]
    try:
        return Resolution("brew", shlex.join(command), newest=_brew_stable(command))
    except Unresolved as exc:
        return Resolution("brew", shlex.join(command), why=str(exc))


# ------------------------------------------------------------------ the package index, through pip


def _index_command(source: ReleaseSource, *, pre: bool) -> list[str]:
    command = [sys.executable, *PIP, "index", "versions", "--json"]
    if pre:
        command.append("--pre")
    if source.sdist_only:
        command += ["--no-binary", source.name]
    return [*command, source.name]


def _shown(command: list[str]) -> str:
    """A command as a user would type it: `python -m pip ...` rather than this venv's path."""
    shown = ["python", *command[1:]] if command and command[0] == sys.executable else command
    return shlex.join(c for c in shown if c not in ("--disable-pip-version-check", "--no-input"))


def index_versions(source: ReleaseSource, *, pre: bool = False) -> list[Version]:
    """Every release of the package the index offers this interpreter (final ones unless `pre`)."""
    command = _index_command(source, pre=pre)
    done = _run(command)
    if done.returncode != 0 and "--json" in done.stderr:  # a pip older than `index versions --json`
        command.remove("--json")
        done = _run(command)
    if done.returncode != 0:
        raise Unresolved(f"pip index versions {source.name} failed: {_last_error(done)}")
    versions = []
    for text in _listed(done.stdout):
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if pre or not (version.is_prerelease or version.is_devrelease):
            versions.append(version)
    return versions


def _listed(stdout: str) -> list[str]:
    """The versions `pip index versions` printed, as JSON (`{"versions": [...]}`) or as its text
    (`Available versions: 1.2, 1.1`)."""
    try:
        data = json.loads(stdout)
        return [str(v) for v in data["versions"]]
    except (ValueError, KeyError, TypeError):
        pass
    match = re.search(r"^Available versions:\s*(.*)$", stdout, re.MULTILINE)
    if match is None:
        raise Unresolved(f"pip index versions printed no version list: {stdout.strip()[-200:]!r}")
    return [part.strip() for part in match.group(1).split(",") if part.strip()]


def _run(command: list[str], env: dict[str, str] | None = None,
         timeout: float = QUERY_TIMEOUT_S) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env)
    except FileNotFoundError:
        return subprocess.CompletedProcess(command, 127, "", f"{command[0]} is not installed")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"no answer within {timeout:g} s")


def _last_error(done: subprocess.CompletedProcess) -> str:
    """The line that says what went wrong: the last ERROR/fatal line, else the last line."""
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith(("error", "fatal"))]
    return (errors or lines or [f"exit status {done.returncode}"])[-1]


# ------------------------------------------------------------------ git and brew


def _git_head(command: list[str]) -> str:
    if not shutil.which("git"):
        raise Unresolved("git is not installed")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never"}  # never wait for a password
    done = _run(command, env=env, timeout=GIT_TIMEOUT_S)
    if done.returncode != 0:
        raise Unresolved(f"{command[-2]} did not answer: {_last_error(done)}")
    for line in done.stdout.splitlines():
        commit, _, ref = line.partition("\t")
        if ref == command[-1]:
            return commit
    raise Unresolved(f"{command[-2]} has no {command[-1]}")


def _brew_stable(command: list[str]) -> str:
    if not shutil.which("brew"):
        raise Unresolved("brew is not installed (not on PATH)")
    done = _run(command)
    if done.returncode != 0:
        raise Unresolved(f"brew info {command[-1]} failed: {_last_error(done)}")
    try:
        return str(json.loads(done.stdout)["formulae"][0]["versions"]["stable"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise Unresolved(f"brew info {command[-1]} named no stable version") from None


# ------------------------------------------------------------------ what changed between two versions


def upstream_changes(recipe: Recipe, old_version: str | None, new_version: str) -> str:
    """What changed upstream between two installed versions (as results record them: a cache key
    such as `b11434`, a pip version, a `git describe`): the releases in between and the project's
    release-notes link, or `git log --oneline`. Says plainly what could not be read."""
    if old_version is None:
        return f"no earlier version to compare {new_version} with"
    if old_version == new_version:
        return f"no upstream change: both ran {new_version}"
    source = source_of(recipe)
    if source.kind == "package index":
        return _index_changes(recipe, source, old_version, new_version)
    if source.kind == "git":
        return _git_changes(recipe, source, old_version, new_version)
    if source.kind == "brew":
        return (f"{source.name} {old_version} -> {new_version} (brew); release notes are not fetched: "
                f"`brew info {source.name}` names the project's homepage")
    return f"{old_version} -> {new_version}; {source.why}"


def _index_changes(recipe: Recipe, source: ReleaseSource, old: str, new: str) -> str:
    try:
        versions = sorted(index_versions(source, pre=True))
    except Unresolved as exc:
        return f"{source.name} {old} -> {new}; the releases in between cannot be listed: {exc}"
    by_key = {_key(recipe, v): v for v in versions}
    old_v, new_v = by_key.get(old), by_key.get(new)
    if old_v is None or new_v is None:
        unknown = " and ".join(v for v, found in ((old, old_v), (new, new_v)) if found is None)
        return f"{source.name} {old} -> {new}; {unknown} is not a release the index lists, so nothing is listed"
    between = [str(v) for v in versions if old_v < v <= new_v]
    lines = [f"{source.name} {old_v} -> {new_v}: {len(between)} release(s) after {old_v}: {', '.join(between)}"]
    lines.append(_release_notes(source, str(new_v)))
    return "\n".join(lines)


def _key(recipe: Recipe, version: Version) -> str:
    try:
        return at_version(recipe, str(version)).version
    except ValueError:
        return str(version)


def _release_notes(source: ReleaseSource, version: str) -> str:
    """The release-notes link of `version` from its package metadata, read without building anything."""
    command = [sys.executable, *PIP, "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed",
               "--only-binary", ":all:", "--report", "-", f"{source.name}=={version}"]
    done = _run(command)
    if done.returncode != 0:
        why = _last_error(done)
        if source.sdist_only or "no matching distribution" in why.lower():
            why = f"the index has no wheel of {source.name} {version} to read metadata from, and reading a " \
                  "source distribution's means building it"
        return f"release notes cannot be fetched: {why}"
    try:
        metadata = json.loads(done.stdout)["install"][0]["metadata"]
    except (ValueError, KeyError, IndexError, TypeError):
        return "release notes cannot be fetched: pip's report named no metadata"
    links = [tuple(part.strip() for part in entry.split(",", 1)) for entry in metadata.get("project_url", [])]
    links = [link for link in links if len(link) == 2]
    notes = [url for label, url in links if NOTES_LABEL.search(label)]
    if notes:
        return f"release notes: {' '.join(notes)}"
    named = ", ".join(f"{label} {url}" for label, url in links) or metadata.get("home_page") or "none"
    return f"release notes: the package metadata names no changelog or release notes (its links: {named})"


def _git_changes(recipe: Recipe, source: ReleaseSource, old: str, new: str) -> str:
    old_commit, new_commit = _commit_of(old), _commit_of(new)
    if old_commit is None or new_commit is None:
        return f"{old} -> {new}: the versions name no commit, so no git log ({source.name})"
    clone = recipe.git_clone() if isinstance(recipe, ScriptedInstall) else None
    trees = sorted((frameworks_dir() / recipe.framework).glob(f"*/{clone[1]}/.git")) if clone else []
    for dot_git in trees:
        tree = dot_git.parent
        done = _run(["git", "-C", str(tree), "log", "--oneline", f"{old_commit}..{new_commit}"])
        if done.returncode == 0:
            lines = done.stdout.splitlines()
            more = f"\n... and {len(lines) - MAX_LOG_LINES} more" if len(lines) > MAX_LOG_LINES else ""
            return (f"git log --oneline {old_commit}..{new_commit} ({len(lines)} commit(s), in {tree}):\n"
                    + "\n".join(lines[:MAX_LOG_LINES]) + more)
    where = "no git checkout in the cache holds both" if clone else "the install keeps no git checkout"
    return f"{old} -> {new}: no git log, {where} ({source.name})"


def _commit_of(version: str) -> str | None:
    match = COMMIT_IN_VERSION.search(version)
    return match.group(1) if match else None
