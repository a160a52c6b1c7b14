"""Framework updates: the newest release installed beside the pinned one, recorded, and used.

An adapter pins a version so results are reproducible; the weekly run exists to notice when a
framework moves. `update_frameworks` asks each framework's own source for its newest release
(bench.setup.installs.upstream), installs a newer one into the versioned cache beside the old (a new cache
key, so the old install stays usable), and records before, after, how it was resolved and when in
`<frameworks cache>/updates.json`. Cells read that record through `install_selected`: the recorded
update unless `--pinned`, which keeps the adapters' versions. The record is keyed by the adapter's
pinned cache key, so a newer pin (an adapter edit) starts from its own version again, and a CPU and
a GPU build of one framework are updated apart.

Brew installs have one version on the machine: they are upgraded in place with the adapter's
`update_commands`. A user's own install (an env var, PATH) is what cells use, and is never touched.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from filelock import FileLock

from bench.base import clock
from bench.base.files import atomic_write
from bench.base.git import git, head_commit
from bench.base.paths import frameworks_dir
from bench.core.result.model import Result
from bench.core.result.store import LoadedResult, load_results
from bench.setup.adapter import Adapter
from bench.setup.installs.cache import Installation, InstallError, Recipe, cached, ensure_installed
from bench.setup.installs.commands import run_logged
from bench.setup.installs.scripted import ScriptedInstall
from bench.setup.installs.upstream import (
    COMMIT_IN_VERSION,
    Resolution,
    at_version,
    is_newer,
    pinned_upstream,
    resolve,
    source_of,
    upstream_changes,
)

STATE_FILE = "updates.json"
HISTORY_KEPT = 500
PINNED, UPDATED, OWN = "pinned", "updated", "own"  # OWN: a user's own install, which cells use
PASSING = ("ok", "fixed")  # the verdicts of a cell that passed (`fixed`: ok after an adapter fix)


@dataclass(frozen=True)
class UpdateRecord:
    """One framework's update: what cells used before, what they use after, and how that was decided."""

    framework: str
    platform: str
    pinned: str  # the adapter's version (its cache key)
    before: str | None  # the installed version cells used; None when nothing was installed
    after: str | None  # the version cells use from now on; None when the install failed (or a dry run)
    newest: str | None  # the newest release as a cache key (`b11500`); None when unresolved
    resolution: Resolution
    at: str = field(default_factory=clock.now_iso)
    choice: str = PINNED  # what cells use after this: the adapter's version, the recorded update, or OWN
    upstream: str | None = None  # the release `after` was built from, in its source's terms (`11500.0.0`)
    error: str | None = None
    note: str = ""
    dry_run: bool = False

    def to_json(self) -> dict:
        return {"framework": self.framework, "platform": self.platform, "pinned": self.pinned,
                "before": self.before, "after": self.after, "newest": self.newest,
                "resolved_by": self.resolution.to_json(), "at": self.at, "choice": self.choice,
                "upstream": self.upstream, "error": self.error, "note": self.note, "dry_run": self.dry_run}

    @classmethod
    def from_json(cls, data: dict) -> UpdateRecord:
        how = data["resolved_by"]
        resolution = Resolution(how["source"], how["command"], how.get("newest"), how.get("unresolved", ""))
        return cls(data["framework"], data["platform"], data["pinned"], data.get("before"), data.get("after"),
                   data.get("newest"), resolution, data["at"], data.get("choice", PINNED), data.get("upstream"),
                   data.get("error"), data.get("note", ""), data.get("dry_run", False))


# ------------------------------------------------------------------ the record in the cache


def state_path() -> Path:
    return frameworks_dir() / STATE_FILE


def _state() -> dict:
    try:
        data = json.loads(state_path().read_text())
    except FileNotFoundError:
        return {"selected": {}, "history": []}
    return {"selected": dict(data.get("selected", {})), "history": list(data.get("history", []))}


def recorded(framework: str, pinned: str) -> UpdateRecord | None:
    """The update cells of this framework use over the adapter's `pinned` version, or None."""
    entry = _state()["selected"].get(framework, {}).get(pinned)
    return UpdateRecord.from_json(entry) if entry else None


def history(framework: str | None = None) -> list[UpdateRecord]:
    """Every update run that was not a dry run, oldest first (failures included)."""
    return [UpdateRecord.from_json(e) for e in _state()["history"] if framework in (None, e["framework"])]


def _keep(record: UpdateRecord) -> None:
    """Append to the history; an update that cells should now use also becomes the selected one."""
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        state = _state()
        state["history"] = [*state["history"], record.to_json()][-HISTORY_KEPT:]
        if record.choice == UPDATED and record.error is None and record.upstream is not None:
            state["selected"].setdefault(record.framework, {})[record.pinned] = record.to_json()
        atomic_write(path, json.dumps(state, indent=1))


# ------------------------------------------------------------------ which version a cell uses


@dataclass(frozen=True)
class Selected:
    recipe: Recipe  # the recipe a cell installs and serves from
    choice: str  # PINNED or UPDATED
    pinned: str  # the adapter's version
    upstream: str | None  # the release it is built from, in its source's terms (None: a moving target)


def select(recipe: Recipe, *, pinned: bool) -> Selected:
    """The adapter's recipe, or (unless `pinned`) the recorded update of it."""
    record = None if pinned else recorded(recipe.framework, recipe.version)
    if record is not None and record.upstream is not None:
        try:
            return Selected(at_version(recipe, record.upstream), UPDATED, recipe.version, record.upstream)
        except ValueError:
            pass  # the adapter's install changed kind since (say, from git to brew): its own version
    return Selected(recipe, PINNED, recipe.version, pinned_upstream(recipe))


def install_selected(recipe: Recipe, *, pinned: bool, allow_install: bool) -> Installation:
    """The installation a cell uses: a user's own when there is one, else the selected recipe's
    cached install (built now when allowed), labelled pinned or updated for the result."""
    chosen = select(recipe, pinned=pinned)
    install = ensure_installed(chosen.recipe, allow_install=allow_install)
    if install.source != "cache":
        return install  # the user's own: neither the adapter's pin nor cellbench's update
    return replace(install, version_choice=chosen.choice,
                   pinned_version=chosen.pinned if chosen.choice == UPDATED else None)


# ------------------------------------------------------------------ running updates


def update_frameworks(registry: Iterable[Adapter], only: list[str] | None = None, *, pinned: bool = False,
                      dry_run: bool = False, pre: bool = False) -> list[UpdateRecord]:
    """Update every framework of `registry` that runs here and has cells (or those named in `only`).
    With `pinned`, each is only installed at its adapter's version, as before updates existed."""
    records = []
    for adapter in registry:
        tag = adapter.platform_here()
        if tag is None or adapter.bind is not None or not adapter.benchmark_cells:
            continue
        if only is not None and adapter.name not in only:
            continue
        records.append(update_one(adapter.recipe_for(tag), tag, pinned=pinned, dry_run=dry_run, pre=pre))
    return records


def update_one(recipe: Recipe, platform: str, *, pinned: bool = False, dry_run: bool = False,
               pre: bool = False) -> UpdateRecord:
    if pinned:
        return _install_pinned(recipe, platform, dry_run=dry_run)
    chosen = select(recipe, pinned=False)
    resolution = resolve(recipe, pre=pre)
    newest = _as_key(recipe, resolution.newest)
    base = UpdateRecord(recipe.framework, platform, recipe.version, None, None, newest, resolution,
                        choice=chosen.choice, upstream=chosen.upstream, dry_run=dry_run)
    try:
        current = chosen.recipe.external() or cached(chosen.recipe)
    except InstallError as exc:
        return replace(base, error=str(exc))
    base = replace(base, before=current.version if current else None, after=current.version if current else None)
    kind = source_of(recipe).kind
    brew = kind == "brew"
    if current is not None and current.source != "cache" and not brew:
        own = f"cells use your own install ({current.source}); cellbench leaves it as it is"
        return _finish(replace(base, choice=OWN, note=own))
    target, installed = resolution.newest, _current_upstream(chosen, current, brew)
    if target is None or not is_newer(target, installed, kind):
        note = ""
        if target is not None:  # not newer: the same release, or the source lags behind the pin
            same = installed is None or not is_newer(installed, target, kind)
            note = "up to date" if same else f"nothing newer: the newest there is {target}, older than {installed}"
        if current is not None:
            return _finish(replace(base, note=note))
        if dry_run:
            missing = f"not installed (would install {chosen.recipe.version})"
            return replace(base, note=f"{note}, {missing}" if note else missing)
        return _finish(_install(base, chosen.recipe, chosen.choice, chosen.upstream, note or "installed"))
    if dry_run:
        return replace(base, after=None, note=f"would install {newest}" + (f" beside {base.before}" if current else ""))
    if brew:
        return _finish(_upgrade_in_place(base, recipe, target) if current else _install(base, recipe, PINNED, None,
                                                                                        "installed"))
    beside = f"installed beside {base.before}" if current else "installed"
    return _finish(_install(base, at_version(recipe, target), UPDATED, target, beside))


def _install_pinned(recipe: Recipe, platform: str, *, dry_run: bool) -> UpdateRecord:
    how = Resolution("adapter", f"adapters/{recipe.framework}.py (--pinned)", newest=pinned_upstream(recipe))
    try:
        current = recipe.external() or cached(recipe)
    except InstallError as exc:
        return UpdateRecord(recipe.framework, platform, recipe.version, None, None, recipe.version, how,
                            error=str(exc), dry_run=dry_run)
    base = UpdateRecord(recipe.framework, platform, recipe.version, current.version if current else None,
                        current.version if current else None, recipe.version, how, dry_run=dry_run,
                        upstream=pinned_upstream(recipe))
    if current is not None or dry_run:
        return replace(base, note="pinned" if current else "pinned; not installed")
    return _install(base, recipe, PINNED, pinned_upstream(recipe), "pinned")


def _install(base: UpdateRecord, recipe: Recipe, choice: str, upstream: str | None, note: str) -> UpdateRecord:
    try:
        return replace(base, after=ensure_installed(recipe).version, choice=choice, upstream=upstream, note=note)
    except InstallError as exc:
        return replace(base, after=None, error=str(exc), note=f"{recipe.version} failed to install")


def _upgrade_in_place(base: UpdateRecord, recipe: Recipe, target: str) -> UpdateRecord:
    """A brew install: the adapter's update commands, then the version it now reports."""
    assert isinstance(recipe, ScriptedInstall)
    log_path = frameworks_dir() / recipe.framework / f"update-{time.strftime('%Y%m%dT%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log_path.open("w") as log:
            for step in recipe.update_commands:
                run_logged(step.argv({"prefix": str(frameworks_dir() / recipe.framework / recipe.version)}), log)
        now = recipe.external()
    except (OSError, subprocess.CalledProcessError, InstallError) as exc:
        return replace(base, after=None, error=f"{exc}; update log: {log_path}")
    return replace(base, after=now.version if now else None, choice=UPDATED, upstream=None,
                   note=f"upgraded in place to {target}; update log: {log_path}")


def _finish(record: UpdateRecord) -> UpdateRecord:
    if not record.dry_run:
        _keep(record)
    return record


def _as_key(recipe: Recipe, version: str | None) -> str | None:
    """A release as the cache key (and result version) it installs under: `11500.0.0` -> `b11500`."""
    if version is None:
        return None
    try:
        return at_version(recipe, version).version
    except ValueError:
        return version


def _current_upstream(chosen: Selected, current: Installation | None, brew: bool) -> str | None:
    """What cells use now in its source's terms: the installed brew version, the selected release,
    else the installed commit (from its version, else its checkout); None: nothing to compare with."""
    if brew:
        return current.version if current else None
    if chosen.upstream is not None:
        return chosen.upstream
    if current is None:
        return None
    if match := COMMIT_IN_VERSION.search(current.version):
        return match.group(1)
    clone = chosen.recipe.git_clone() if isinstance(chosen.recipe, ScriptedInstall) else None
    return head_commit(current.prefix / clone[1]) if clone is not None else current.version


# ------------------------------------------------------------------ what changed since a cell last passed


def last_passing(split_dir: Path, framework: str, *, machine: str | None = None, model: str | None = None,
                 before_run_id: str | None = None) -> LoadedResult | None:
    """The newest `ok` (or `fixed`) result of `framework` in a split directory, of `machine` and
    `model` when given, from a run before `before_run_id` when given (the failing run itself)."""
    loaded, _ = load_results(split_dir)
    passing = [r for r in loaded if r.framework == framework and r.data["verdict"]["verdict"] in PASSING
               and machine in (None, r.machine) and model in (None, r.model)
               and (before_run_id is None or r.run_id < before_run_id)]
    return max(passing, key=LoadedResult.recency, default=None)


def adapter_changes(repo: Path, framework: str, since_commit: str | None) -> str:
    """The commits to `adapters/<framework>.py` since `since_commit` (the harness commit of the
    last passing result), and whether the file has changes not committed yet."""
    path = f"adapters/{framework}.py"
    if since_commit is None:
        last = git(repo, "log", "-1", "--oneline", "--", path).stdout.strip()
        text = f"no harness commit to compare {path} from (its last commit: {last or 'none'})"
    else:
        done = git(repo, "log", "--oneline", f"{since_commit}..HEAD", "--", path)
        if done.returncode != 0:
            text = f"{path}: git log since {since_commit[:12]} failed: {(done.stderr or done.stdout).strip()}"
        elif not done.stdout.strip():
            text = f"no commit changed {path} since {since_commit[:12]}"
        else:
            commits = done.stdout.strip().splitlines()
            text = f"{len(commits)} commit(s) changed {path} since {since_commit[:12]}:\n" + "\n".join(commits)
    status = git(repo, "status", "--porcelain", "--", path)
    if status.returncode == 0 and status.stdout.strip():
        stat = git(repo, "diff", "--stat", "HEAD", "--", path).stdout.strip().splitlines()
        text += f"\n{path} has uncommitted changes" + (f" ({stat[-1].strip()})" if stat else " (not yet tracked)")
    return text


def since_last_pass(recipe: Recipe, repo: Path, split_dir: Path, current: Result) -> str:
    """For a failing cell's journal entry: its last passing result, and what changed upstream and in
    its adapter since. `recipe` is the adapter's (pinned) recipe for the result's platform."""
    framework = current["framework"]["name"]
    last = last_passing(split_dir, framework, machine=current["machine"]["slug"],
                        model=current["model"]["results_name"], before_run_id=current["run_id"])
    if last is None:
        return f"no earlier ok result of {framework} in {split_dir}: nothing to compare with"
    old, new = last.data["framework"]["version"], current["framework"]["version"]
    harness = last.data.get("harness")
    return "\n".join([
        f"last ok: {last.path.name} ({framework} {old})",
        f"upstream: {upstream_changes(recipe, old, new)}",
        f"adapter: {adapter_changes(repo, framework, harness['commit'] if harness else None)}",
    ])
