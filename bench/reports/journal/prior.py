"""The week before: the skips and fixes of the most recent prior journals of a results folder.

Two kinds of journal are read, newest first:

- cellbench's, from its JSON twin: a cell skipped on a diagnosis (evidence `diagnosed_skip`),
  the day's `fixed` cells, and its `oom` cells;
- SiliconBench's `weekly_<date>.journal.md`, written by its weekly runbook in its Journal Format
  and with no JSON twin: the `## Frameworks — <split> split` tables (one `## Frameworks` table in
  its single-split journals, whose split is the Summary's `Split:` line), the blocks of `## Skipped
  Cells` (or `## Skipped Frameworks`) and of `## Fixes Applied`, each headed `### <framework>
  (<split>)`, with `- **Field**: value` lines. The reading is forgiving: bold or not, the colon
  inside or outside the bold, `(chat, agent)` or `(both)` for two splits, a heading without a
  split taking the journal's only split.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bench.base.defaults import SPLITS
from bench.reports.journal.names import DIAGNOSED_SKIP, journal_files

_SECTION = re.compile(r"^##\s+(?P<title>[^#].*?)\s*$")
_BLOCK = re.compile(r"^###\s+(?P<fw>[A-Za-z0-9_.\-]+)\s*(?:\((?P<splits>[^)]*)\)|[/—-]+\s*(?P<split>\w+))?")
_FIELD = re.compile(r"^\s*[-*]\s+(?:\*\*|__)?(?P<name>[^:*_]+?)(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<value>.*?)\s*$")
_ROW = re.compile(r"^\|\s*(?P<fw>[^|]+?)\s*\|\s*(?P<status>[^|]+?)\s*\|\s*(?P<notes>.*?)\s*\|?\s*$")


@dataclass(frozen=True)
class PriorSkip:
    framework: str
    split: str
    reason: str
    since: str  # the day the skip was first journaled
    source: str  # the journal file it came from


@dataclass(frozen=True)
class PriorFix:
    framework: str
    split: str
    day: str
    what: str
    reference: str | None
    commit: str | None
    source: str

    def line(self) -> str:
        ref = self.reference or "no upstream reference recorded"
        return (f"{self.day} {self.framework} / {self.split}: {self.what} (reference: {ref}"
                + (f"; commit {self.commit}" if self.commit else "") + f"; {self.source})")


@dataclass
class PriorJournal:
    day: str
    path: Path
    skips: list[PriorSkip] = field(default_factory=list)
    fixes: list[PriorFix] = field(default_factory=list)
    ran: set[tuple[str, str]] = field(default_factory=set)  # cells it benchmarked (any verdict but skipped)
    ooms: set[tuple[str, str]] = field(default_factory=set)  # cells that ended oom


def _splits_of(text: str | None, default: list[str]) -> list[str]:
    if not text:
        return default
    named = [s for s in SPLITS if re.search(rf"\b{s}\b", text, re.I)]
    return named or (list(SPLITS) if re.search(r"\b(both|all)\b", text, re.I) else default)


def _blocks(lines: list[str]) -> list[tuple[str, str | None, dict[str, str]]]:
    """(framework, the heading's split text, fields) of each `### ` block of a section."""
    found: list[tuple[str, str | None, dict[str, str]]] = []
    for line in lines:
        head = _BLOCK.match(line)
        if head:
            found.append((head["fw"], head["splits"] or head["split"], {}))
            continue
        item = _FIELD.match(line)
        if item and found:
            found[-1][2][item["name"].strip().lower()] = item["value"].strip()
    return found


def parse_markdown(text: str, path: Path, day: str) -> PriorJournal:
    """A journal page in SiliconBench's Journal Format (or cellbench's own page)."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        head = _SECTION.match(line)
        if head:
            current = head["title"].lower()
            sections.setdefault(current, [])
        elif current:
            sections[current].append(line)
    title = day  # the file's name says the day, as the runbook names it
    summary = " ".join(line for line in sections.get("summary", [])
                       if re.match(r"^\s*-\s*splits?( run)?\s*:", line, re.I))
    only = _splits_of(summary.split(":", 1)[-1] if summary else None, ["chat"])
    prior = PriorJournal(title, path)
    skips: dict[tuple[str, str], PriorSkip] = {}
    for name, lines in sections.items():
        if name.startswith("frameworks"):  # the tables: a skipped row counts even without a block
            splits = _splits_of(name.removeprefix("frameworks"), only)
            for line in lines:
                row = _ROW.match(line)
                status = row["status"].strip().lower() if row else ""
                if row and status not in ("skipped", "status") and not set(status) <= set("-: "):
                    prior.ran |= {(row["fw"], split) for split in splits}
                if row and status == "oom":
                    prior.ooms |= {(row["fw"], split) for split in splits}
                if row and status == "skipped":
                    for split in splits:
                        skips.setdefault((row["fw"], split), PriorSkip(row["fw"], split, row["notes"].strip(" —-")
                                                                       or "skipped", title, path.name))
    for name, lines in sections.items():
        if name.startswith("skipped"):
            for fw, heading, fields in _blocks(lines):
                reason = fields.get("why skipped") or fields.get("reason") or fields.get("error") or "skipped"
                for split in _splits_of(heading, only):
                    skips[(fw, split)] = PriorSkip(fw, split, reason, title, path.name)
        elif name.startswith(("fixes applied", "auto-fixes")):
            for fw, heading, fields in _blocks(lines):
                what = fields.get("fix") or fields.get("what") or fields.get("diagnosis") or "fixed"
                ref = fields.get("reference")
                ref = None if not ref or ref.strip('"').lower() in ("none found", "none", "(none recorded)") else ref
                for split in _splits_of(heading, only):
                    prior.fixes.append(PriorFix(fw, split, title, what, ref, fields.get("commit"), path.name))
    prior.skips = list(skips.values())
    return prior


def from_state(state: dict, path: Path) -> PriorJournal:
    """A cellbench journal's JSON twin: its diagnosed skips and its day's fixes."""
    day = str(state.get("day") or "")
    prior = PriorJournal(day, path)
    for cell in state.get("cells", []):
        if cell.get("verdict") != "skipped":
            prior.ran.add((cell["framework"], cell["split"]))
        if cell.get("verdict") == "oom":
            prior.ooms.add((cell["framework"], cell["split"]))
        skip = (cell.get("evidence") or {}).get(DIAGNOSED_SKIP)
        if cell.get("verdict") == "skipped" and skip:
            prior.skips.append(PriorSkip(cell["framework"], cell["split"], skip["reason"], skip.get("since") or day,
                                         skip.get("source") or path.name))
    for cell in state.get("fixes", []):
        fix = (cell.get("evidence") or {}).get("fix") or {}
        what = fix.get("what") or f"edited {fix.get('adapter')}"
        prior.fixes.append(PriorFix(cell["framework"], cell["split"], day, what, fix.get("reference"),
                                    fix.get("commit"), path.name))
    return prior


def recent(directory: Path, before_day: str, count: int = 2) -> list[PriorJournal]:
    """The `count` most recent journals of days before `before_day`, newest first. A journal that
    cannot be read is passed over (it is named in no decision)."""
    found: list[PriorJournal] = []
    for files in journal_files(directory):
        if files.day >= before_day or len(found) == count:
            continue
        try:
            if files.state is not None:
                found.append(from_state(json.loads(files.state.read_text()), files.state))
            elif files.md is not None:
                found.append(parse_markdown(files.md.read_text(encoding="utf-8"), files.md, files.day))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found
