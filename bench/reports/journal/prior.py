"""The week before: the skips and fixes of the most recent prior journals of a results folder.

Two kinds of journal are read, newest first, from the results folder and from the folder where
SiliconBench's own scripts keep this machine's journals (`siliconbench_folder`: its legacy root
results/<model>/ on the M2 Max, results/<model>/<APPLEBENCH_RESULTS_SUBDIR>/ where that is set),
so a SiliconBench user's last weeks count without copying them into cellbench's folder:

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
from bench.host.machine import MachineSlugError, detect, siliconbench_subdir, slugify
from bench.reports.journal.names import DIAGNOSED_SKIP, JournalFiles, journal_files

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
    machine: str | None = None  # the machine its page names (SiliconBench's `Machine:` line), if any
    siliconbench_folder: bool = False  # read from SiliconBench's own folder, not cellbench's


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
    named = re.search(r"^\s*(?:-\s*)?\**machine\**\s*:\**\s*(?P<name>.+?)\s*$", text, re.I | re.M)
    prior.machine = named["name"].strip("*_ ") if named else None
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


def siliconbench_folder(directory: Path) -> Path | None:
    """SiliconBench's own folder of this machine's journals beside cellbench's `directory`
    (results/<model>/<machine>): results/<model>/[<subdir>/] as its config.sh chooses it
    (bench.host.machine.siliconbench_subdir); None where it has none, or it is `directory` itself."""
    found = siliconbench_subdir()
    if found is None:
        return None
    folder = directory.parent / found[0] if found[0] else directory.parent
    return None if folder.resolve() == Path(directory).resolve() else folder


def _names_another_machine(prior: PriorJournal) -> bool:
    """Whether a SiliconBench journal's `Machine:` line names a machine other than this one."""
    if not prior.machine:
        return False
    try:
        here = detect()
    except MachineSlugError:
        return False
    return slugify(prior.machine) not in {here.slug, slugify(here.chip or here.cpu)}


def _candidates(directory: Path) -> list[tuple[JournalFiles, bool]]:
    """This folder's journals, and SiliconBench's page-only ones in its own folder (for a day that
    has none of cellbench's), newest day first; True marks SiliconBench's folder."""
    own = journal_files(directory)
    days = {files.day for files in own}
    theirs = siliconbench_folder(directory)
    extra = [f for f in journal_files(theirs) if f.state is None and f.md is not None and f.day not in days] \
        if theirs is not None and theirs.is_dir() else []
    return sorted([*((f, False) for f in own), *((f, True) for f in extra)], key=lambda c: c[0].day, reverse=True)


def recent(directory: Path, before_day: str, count: int = 2) -> list[PriorJournal]:
    """The `count` most recent journals of days before `before_day`, newest first: this folder's,
    and SiliconBench's own weekly_<date>.journal.md where SiliconBench keeps them
    (`siliconbench_folder`; one whose `Machine:` line names another machine is not this one's). A
    journal that cannot be read is passed over (it is named in no decision)."""
    found: list[PriorJournal] = []
    for files, theirs in _candidates(Path(directory)):
        if files.day >= before_day or len(found) == count:
            continue
        try:
            if files.state is not None:
                prior = from_state(json.loads(files.state.read_text()), files.state)
            elif files.md is not None:
                prior = parse_markdown(files.md.read_text(encoding="utf-8"), files.md, files.day)
            else:
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if theirs and _names_another_machine(prior):
            continue
        prior.siliconbench_folder = theirs
        found.append(prior)
    return found
