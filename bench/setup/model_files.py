"""Where a profile's model is on this machine: the built-in tiny model built here, or a repository
of the Hugging Face Hub, taken from the local cache (a cached copy always wins) and downloaded
when allowed.

A model that cannot be had raises `ProfileUnavailable` with the command that pre-downloads it.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.base.paths import models_dir
from bench.setup.model_ref import ModelRef
from bench.setup.profiles import BUILTINS, FormatEntry, ModelProfile, ProfileUnavailable


def resolve(profile: ModelProfile, fmt: str, *, download: bool = True) -> ModelRef:
    """The model as framework format `fmt` needs it: a local path (building or downloading it) and ids."""
    entry = profile.formats.get(fmt)
    if entry is None:
        raise ProfileUnavailable(
            f"model profile {profile.name!r} ({profile.source}) has no {fmt!r} format;"
            f" it has {', '.join(profile.formats)}"
        )
    if fmt == "ollama":
        path = None  # the Ollama server pulls the tag itself
    elif profile.builtin is not None:
        path = BUILTINS[profile.builtin][1](fmt)
    else:
        path = _hub_path(profile, entry, download=download)
    return ModelRef(path=path, served_id=entry.served_id, alias=entry.alias or entry.served_id)


def hub_cache() -> Path:
    return models_dir() / "hub"


def _offline_by_env() -> bool:
    # huggingface_hub reads HF_HUB_OFFLINE once, at import; reading it here honours later changes.
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return any((flag or "").strip().upper() in {"1", "ON", "YES", "TRUE"} for flag in flags)


def _hub_path(profile: ModelProfile, entry: FormatEntry, *, download: bool) -> Path:
    # Imported on use: huggingface_hub is slow to import.
    from huggingface_hub.errors import EntryNotFoundError

    offline = _offline_by_env()
    try:
        return _hub_fetch(entry, local_only=True)  # a cached copy wins: no network, and the bytes never move under us
    except (OSError, EntryNotFoundError) as exc:
        miss: Exception = exc
    if download and not offline:
        try:
            return _hub_fetch(entry, local_only=False)
        except (OSError, EntryNotFoundError) as exc:  # network down, missing repo or file, no permission
            miss = exc
    if offline:
        cause = "HF_HUB_OFFLINE is set and it is not in the cache"
    elif not download:
        cause = "downloads are off and it is not in the cache"
    else:
        cause = f"the download failed ({type(miss).__name__}: {' '.join(str(miss).split())[:200]})"
    what = f"{entry.repo} ({entry.file})" if entry.file else entry.repo
    files = [entry.file] if entry.file else []
    fetch = " ".join(["hf download", str(entry.repo), *files, f"--cache-dir {hub_cache()}"])
    raise ProfileUnavailable(
        f"model profile {profile.name!r}: cannot get {what}: {cause}; pre-download it with "
        f"`{fetch}` where the network allows, then rerun (HF_HUB_OFFLINE=1 then uses that cache)"
    ) from miss


def _hub_fetch(entry: FormatEntry, *, local_only: bool) -> Path:
    from huggingface_hub import hf_hub_download, snapshot_download

    assert entry.repo is not None  # the schema requires a repo for every downloaded format
    if entry.file is not None:
        return Path(hf_hub_download(entry.repo, entry.file, cache_dir=hub_cache(), local_files_only=local_only))
    return Path(snapshot_download(entry.repo, cache_dir=hub_cache(), local_files_only=local_only))
