"""One GitHub issue per model that tracks a failing or regressed nightly, opened, updated and closed
with `gh`.

A night fails for a model when any of its cells ended other than ok or skipped, or a machine that
should have reported sent no result; it regressed when a figure of a cell is a significant
regression against the previous night's result of that cell (`cellbench compare`'s engine; the
lines come from the caller). Then the model's open tracking issue (label `cellbench-nightly`,
title `cellbench nightly: <model> is failing`, `... regressed: <cells>` or both) gets the night's
lists as its body, its title and a comment linking the run, or is opened with them. A green night
(no failure, no regression) closes the open issue with a comment linking the green run. `gh`
finds the repository from $GH_REPO or the checkout.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LABEL = "cellbench-nightly"
PREFIX = "cellbench nightly: "
SHOWN_CELLS = 3  # cells a title names before "+N more"


def title(model: str, *, failing: bool = True, regressed: Sequence[str] = ()) -> str:
    """`cellbench nightly: tiny is failing`, `... tiny regressed: llamacpp/chat on linux-cpu`, or
    `... tiny is failing and regressed: ...`; `regressed` names the cells."""
    cells = list(dict.fromkeys(regressed))
    named = ", ".join(cells[:SHOWN_CELLS]) + (f" +{len(cells) - SHOWN_CELLS} more" if len(cells) > SHOWN_CELLS else "")
    if cells:
        return f"{PREFIX}{model} {'is failing and regressed' if failing else 'regressed'}: {named}"
    return f"{PREFIX}{model} is failing"


def model_of(issue_title: str) -> str | None:
    """The model an issue of `title`'s making tracks, else None."""
    if not issue_title.startswith(PREFIX):
        return None
    rest = issue_title[len(PREFIX):]
    for tail in (" is failing and regressed: ", " is failing", " regressed: "):
        if tail in rest:
            return rest[:rest.index(tail)]
    return None


@dataclass(frozen=True)
class Regression:
    """One regressed figure of one cell against the previous night: `cell` names the cell
    ("llamacpp/chat on linux-cpu"), `line` says which figure and by how much."""

    cell: str
    line: str


class GhError(RuntimeError):
    pass


def gh(*args: str) -> str:
    """`gh ARGS`; raises GhError with gh's own message when it fails."""
    try:
        done = subprocess.run(["gh", *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise GhError("gh is not installed (https://cli.github.com)") from None
    if done.returncode != 0:
        raise GhError(f"gh {' '.join(args[:2])}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


@dataclass(frozen=True)
class Night:
    """What the merged report says failed, per model: one line per failing cell or silent machine."""

    day: str
    run_url: str
    problems: dict[str, list[str]]  # model -> lines; a model with none (and no regression) was green
    regressions: dict[str, list[Regression]] = field(default_factory=dict)  # model -> regressed figures
    compared_with: str = ""  # what the regressions are against, or why there are none

    @classmethod
    def from_merged(cls, merged: dict[str, Any], *, day: str, run_url: str, models: Sequence[str] = ()) -> Night:
        """Every model of the report, and of `models` (those scheduled: a model no machine reported
        on at all has no table, and fails as `no result from any machine`)."""
        problems: dict[str, list[str]] = {table["model"]: [] for table in merged["tables"]}  # green until shown not
        for f in merged["failures"]:
            line = f"{f['machine']}: {f['framework']}/{f['split']} {f['verdict']}: {f['reason']}"
            problems.setdefault(f["model"], []).append(line)
        for m in merged["missing"]:
            problems.setdefault(m["model"], []).append(f"{m['machine']}: no {m['split']} result ({m['reason']})")
        for model in models:
            problems.setdefault(model, ["no result from any machine"])
        return cls(day, run_url, {model: sorted(lines) for model, lines in problems.items()})

    def with_regressions(self, regressions: dict[str, list[Regression]], compared_with: str) -> Night:
        return Night(self.day, self.run_url, {m: self.problems.get(m, []) for m in {*self.problems, *regressions}},
                     {m: lines for m, lines in regressions.items() if lines}, compared_with)

    def bad(self, model: str) -> bool:
        return bool(self.problems.get(model) or self.regressions.get(model))

    def title(self, model: str) -> str:
        return title(model, failing=bool(self.problems.get(model)),
                     regressed=[r.cell for r in self.regressions.get(model, [])])

    def count(self, model: str) -> str:
        failing, regressed = len(self.problems.get(model, [])), len(self.regressions.get(model, []))
        said = ([f"{failing} problems"] if failing else []) + ([f"{regressed} regressions"] if regressed else [])
        return ", ".join(said)

    def body(self, model: str) -> str:
        parts = [f"The nightly benchmark of **{model}** on {self.day} ([run]({self.run_url})):"]
        if self.problems.get(model):
            listed = "\n".join(f"- {line}" for line in self.problems[model])
            parts.append(f"Failing cells or silent machines:\n\n{listed}")
        if self.regressions.get(model):
            parts.append(f"Significant regressions against {self.compared_with}:\n\n"
                         + "\n".join(f"- {r.cell}: {r.line}" for r in self.regressions[model]))
        elif self.compared_with:
            parts.append(f"Regressions: none against {self.compared_with}.")
        parts.append("This issue is updated each failing or regressed night and closed by the first green one.")
        return "\n\n".join(parts) + "\n"


def _open_issues() -> dict[str, int]:
    listed = json.loads(gh("issue", "list", "--label", LABEL, "--state", "open", "--json", "number,title",
                           "--limit", "200") or "[]")
    return {model: issue["number"] for issue in listed if (model := model_of(issue["title"])) is not None}


def track(night: Night) -> list[str]:
    """Open, update or close each model's issue; returns what was done, one line per model."""
    gh("label", "create", LABEL, "--force", "--color", "B60205",
       "--description", "a failing cellbench nightly; closed by the first green night")
    issues = _open_issues()
    done = []
    for model in sorted(night.problems):
        number = issues.get(model)
        if night.bad(model):
            with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as body:
                body.write(night.body(model))
            try:
                if number is None:
                    gh("issue", "create", "--title", night.title(model), "--label", LABEL, "--body-file", body.name)
                    done.append(f"{model}: opened ({night.count(model)})")
                else:
                    gh("issue", "edit", str(number), "--title", night.title(model), "--body-file", body.name)
                    gh("issue", "comment", str(number), "--body",
                       f"Still not green on {night.day}: {night.count(model)} ([run]({night.run_url})).")
                    done.append(f"{model}: updated #{number} ({night.count(model)})")
            finally:
                Path(body.name).unlink(missing_ok=True)
        elif number is not None:
            gh("issue", "close", str(number), "--comment", f"Green on {night.day} ([run]({night.run_url})).")
            done.append(f"{model}: closed #{number}")
        else:
            done.append(f"{model}: green")
    return done
