"""The README and the user guide in docs/: every relative link lands on a file and, with an anchor,
on a heading of that file as GitHub names it; the README stays a front door (under 150 lines);
every entry of docs/measurements.md names the command that reproduces its figures and the day
they were measured; and the README's two opening commands are the ones the Makefile and CI
define, so what a newcomer types is what CI runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
PAGES = [README, *sorted((PROJECT_ROOT / "docs").glob("*.md")), PROJECT_ROOT / "tests" / "README.md"]
README_MAX_LINES = 149
MEASUREMENTS = PROJECT_ROOT / "docs" / "measurements.md"

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code spans blanked: what GitHub renders as text."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lowercase, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(path: Path) -> list[str]:
    return [target for line in prose_lines(path.read_text()) for target in LINK.findall(line)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto: are not checked


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            shown = dest.relative_to(PROJECT_ROOT) if dest.is_relative_to(PROJECT_ROOT) else dest
            broken.append(f"{target}: no file {shown}")
        elif anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading of {dest.name} has the anchor #{anchor}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_relative_link_resolves(page: Path):
    assert broken_links(page) == [], f"{page.relative_to(PROJECT_ROOT)}: broken links"


def test_the_link_check_is_real(tmp_path: Path):
    """A missing file, a missing anchor and a heading slugged GitHub's way, checked on a page of its own."""
    (tmp_path / "other.md").write_text("# The client's CPUs\n\n## Frameworks and the `cellbench` command\n"
                                       "## Options\n## Options\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#the-clients-cpus) [b](other.md#frameworks-and-the-cellbench-command)\n"
                    "[c](other.md#options-1) [d](#here) [e](https://example.com/x) `[f](gone.md)`\n"
                    "## Here\n```\n[g](gone.md)\n```\n"
                    "[h](gone.md) [i](other.md#not-a-heading) [j](other.md#options-2)\n")
    assert broken_links(page) == [f"gone.md: no file {(tmp_path / 'gone.md').resolve()}",
                                  "other.md#not-a-heading: no heading of other.md has the anchor #not-a-heading",
                                  "other.md#options-2: no heading of other.md has the anchor #options-2"]


def test_the_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def measurement_entries(text: str) -> dict[str, str]:
    """Each `###` entry of a measurements page, by its heading: its text up to the next heading."""
    entries: dict[str, str] = {}
    heading = None
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m:
            heading = m.group(2) if len(m.group(1)) == 3 else None
            if heading is not None:
                entries[heading] = ""
        elif heading is not None:
            entries[heading] += line + "\n"
    return entries


COMMAND = re.compile(r"^\*\*Command:\*\* .*`[^`]+`", re.M)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def entries_without(text: str) -> list[str]:
    """The entries that lack a **Command:** line with a command in it, or a day."""
    return [f"{heading}: no {what}" for heading, body in measurement_entries(text).items()
            for what, pattern in (("command", COMMAND), ("date", DATE)) if not pattern.search(body)]


def test_every_measurement_names_its_command_and_day():
    text = MEASUREMENTS.read_text()
    assert len(measurement_entries(text)) >= 10, "docs/measurements.md holds the project's measurements"
    assert entries_without(text) == []


def test_the_measurement_check_is_real():
    text = ("# M\n## Group\n### Good\n**Command:** `make bench`  \n**Measured:** 2026-12-01\n"
            "### No command\n**Measured:** 2026-12-01, `make bench`\n### No day\n**Command:** `make test`\n"
            "### Empty command\n**Command:** by hand, 2026-12-01\n")
    assert list(measurement_entries(text)) == ["Good", "No command", "No day", "Empty command"]
    assert entries_without(text) == ["No command: no command", "No day: no date", "Empty command: no command"]


def opening_commands() -> list[str]:
    """The README's first code block, its commands without their comments."""
    text = README.read_text()
    m = re.search(r"^```(?:sh|bash|console)?\n(.*?)^```", text, re.M | re.S)
    assert m, "README.md opens with no code block"
    return [line.split("#", 1)[0].strip() for line in m.group(1).splitlines() if line.split("#", 1)[0].strip()]


def test_the_readme_opens_with_the_two_commands_make_and_ci_define():
    commands = opening_commands()
    assert commands == ["make bench", "make test"], commands
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    for cmd in commands:
        target = shlex.split(cmd)[1]
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"the Makefile has no target {target!r}"
    ci_commands = [line.strip() for line in (PROJECT_ROOT / ".ci" / "run").read_text().splitlines()
                   if line.strip() and not line.lstrip().startswith("#")]
    assert ci_commands[-1] == commands[1], f".ci/run ends in {ci_commands[-1]!r}, not the README's {commands[1]!r}"
    assert "pytest -m chat" in makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0], "make bench runs the chat split"
