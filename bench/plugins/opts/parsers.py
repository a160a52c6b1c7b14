"""The parsers of single options: a value as typed -> the value its Settings field holds.

Each turns a bad value into a pytest.UsageError, one line before any server starts; the words are
the option's own (most come from the bench.run.parsing, bench.host and bench.eval parsers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bench.base.defaults import SPLITS, levels_text
from bench.eval import gpus
from bench.host.memory import memlimit
from bench.run.parsing import cell_budgets, comma_list, concurrency_levels, hang_seconds
from bench.run.scrape.scraper import INTERVAL_S


def levels(text: str | None) -> tuple[int, ...]:
    """--concurrency `1,8,16` -> (1, 8, 16); not given, or `sweep[:START]` (a search: the load plan
    holds it), the default levels."""
    if text is not None and text.strip().lower().split(":")[0] == "sweep":
        text = None
    try:
        return concurrency_levels(text or levels_text())
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def endpoint(text: str | None) -> str | None:
    """`http://127.0.0.1:8080` (a trailing `/` or `/v1` dropped: requests add `/v1/...` themselves)."""
    if text is None:
        return None
    url = text.rstrip("/").removesuffix("/v1")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.path:
        raise pytest.UsageError(f"--endpoint takes a server's base URL such as http://127.0.0.1:8080, got {text!r}")
    return url


def _per_split(parse: Callable[[str], dict[str, float]]) -> Callable[[str | None], dict[str, float]]:
    def per_split(text: str | None) -> dict[str, float]:
        try:
            return {} if text is None else parse(text)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None

    return per_split


hang = _per_split(hang_seconds)  # --hang-minutes -> seconds per split
cell_budget = _per_split(cell_budgets)  # --cell-budget -> seconds per split it names


def memory_limit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return memlimit.parse_size(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--memory-limit: {exc}") from None


def gpu_pool(text: str | None) -> tuple[int, ...] | None:
    try:
        return None if text is None else gpus.parse_pool(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def hours_to_s(hours: float | None) -> float | None:
    return None if hours is None else hours * 3600.0


def prompt_files(text: str | None) -> dict[str, Path]:
    """--prompts: split -> its file. `PATH` serves every split (as it always did); `chat=PATH,...`
    gives each split it names its own, the others keep their shipped file; not given: {}.

    A value is a bare path when it names a file, or holds no `=`: so `a=b.json` that exists is
    still one file. A split that is not one of SPLITS, a split named twice or a file that is not
    there is a usage error naming it (the files' contents are checked when they are read)."""
    if text is None:
        return {}
    if "=" not in text or Path(text).is_file():
        return dict.fromkeys(SPLITS, Path(text))
    takes = f"--prompts takes a file, or split=file pairs such as chat=mine.json,agent=theirs.json, got {text!r}"
    try:
        pairs = [part.split("=", 1) for part in comma_list(text)]
    except ValueError:
        raise pytest.UsageError(takes) from None
    files: dict[str, Path] = {}
    for pair in pairs:
        split, path = (pair[0].strip(), pair[1].strip()) if len(pair) == 2 else ("", "")
        if not split or not path:
            raise pytest.UsageError(takes)
        if split not in SPLITS:
            raise pytest.UsageError(f"--prompts {split}={path}: no split {split!r}; the splits are {', '.join(SPLITS)}")
        if split in files:
            raise pytest.UsageError(f"--prompts names {split} twice: {files[split]} and {path}")
        if not Path(path).is_file():
            raise pytest.UsageError(f"--prompts {split}={path}: no such file")
        files[split] = Path(path)
    return files


def scrape_interval(text: str) -> float | None:
    """--server-metrics: `on` -> the scraper's interval (2 s), `off` -> None, `0.5` -> 0.5 s."""
    if text in ("on", "off"):
        return INTERVAL_S if text == "on" else None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise pytest.UsageError(f"--server-metrics takes on, off or the seconds between scrapes (more than 0), "
                                f"got {text!r}")
    return seconds
