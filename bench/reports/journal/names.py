"""What a journal's files are called, and finding them again: `weekly_<day>.journal.md` beside its
JSON twin `weekly_<day>.journal.json`, the names SiliconBench's weekly runbook gives its journal.

Runs before 2026-12 wrote `journal_<day>.md` and `journal_<day>.json`; every reader here finds
those too, so a results folder keeps its history across the rename. Where a day has both, the
new name wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# evidence keys of a journal's cell entries
IMPORTED_COMPARISON = "imported_comparison"  # bench.core.result.imported.comparison_line of the cell
DIAGNOSED_SKIP = "diagnosed_skip"  # a skip on a person's diagnosis (cellbench weekly skip, a prior journal)
TELEMETRY = "telemetry"  # what a failed cell's resource samples and OOM evidence say (journal.telemetry)
LAST_PASS = "last_pass"  # the failed cell's last passing result: its file and framework versions
RETRIED = "retried"  # a transient failure's first attempt (verdict, result file, why), on the retry's entry
FIX_REVERTED = "fix_reverted"  # a failed fix attempt's reverted files and where its edit is kept (a patch)
OOM_BLOCK = "oom"  # an oom cell's run window, likely cause, prior OOMs and mitigation (journal.telemetry.oom_block)

_DAY = r"(\d{4}-\d{2}-\d{2})"
_NAME = re.compile(rf"^(?:weekly_{_DAY}\.journal|journal_{_DAY})\.(md|json)$")


def md_name(day: str) -> str:
    return f"weekly_{day}.journal.md"


def state_name(day: str) -> str:
    return f"weekly_{day}.journal.json"


def legacy_state_name(day: str) -> str:
    return f"journal_{day}.json"


@dataclass(frozen=True)
class JournalFiles:
    """One day's journal in a folder: its page and its JSON twin, either of which may be absent
    (SiliconBench writes only the page)."""

    day: str
    md: Path | None
    state: Path | None


def parse_name(name: str) -> tuple[str, bool, str] | None:
    """(day, legacy name?, "md" or "json") of a journal file's name, None for any other file."""
    found = _NAME.match(name)
    if found is None:
        return None
    return found.group(1) or found.group(2), found.group(2) is not None, found.group(3)


def journal_files(directory: Path) -> list[JournalFiles]:
    """Every day's journal in `directory`, newest day first."""
    days: dict[str, dict[str, tuple[bool, Path]]] = {}
    for path in directory.glob("*journal*"):
        parsed = parse_name(path.name)
        if parsed is None or not path.is_file():
            continue
        day, legacy, kind = parsed
        kept = days.setdefault(day, {}).get(kind)
        if kept is None or (kept[0] and not legacy):  # the new name wins over the legacy one
            days[day][kind] = (legacy, path)
    return [JournalFiles(day, kinds["md"][1] if "md" in kinds else None,
                         kinds["json"][1] if "json" in kinds else None)
            for day, kinds in sorted(days.items(), reverse=True)]
