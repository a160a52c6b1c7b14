"""One GitHub issue per model that tracks a failing nightly, opened, updated and closed with `gh`.

A night fails for a model when any of its cells ended other than ok or skipped, or a machine that
should have reported sent no result. Then the model's open tracking issue (label
`cellbench-nightly`, title `cellbench nightly: <model> is failing`) gets the night's list as its
body and a comment linking the run, or is opened with it. A green night closes the open issue
with a comment linking the green run. `gh` finds the repository from $GH_REPO or the checkout.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABEL = "cellbench-nightly"


def title(model: str) -> str:
    return f"cellbench nightly: {model} is failing"


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
    problems: dict[str, list[str]]  # model -> lines; a model with none was green

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

    def body(self, model: str) -> str:
        lines = "\n".join(f"- {line}" for line in self.problems[model])
        return (f"The nightly benchmark of **{model}** on {self.day} has failing cells or silent machines "
                f"([run]({self.run_url})):\n\n{lines}\n\nThis issue is updated each failing night and closed "
                f"by the first green one.\n")


def _open_issues() -> dict[str, int]:
    listed = json.loads(gh("issue", "list", "--label", LABEL, "--state", "open", "--json", "number,title",
                           "--limit", "200") or "[]")
    return {issue["title"]: issue["number"] for issue in listed}


def track(night: Night) -> list[str]:
    """Open, update or close each model's issue; returns what was done, one line per model."""
    gh("label", "create", LABEL, "--force", "--color", "B60205",
       "--description", "a failing cellbench nightly; closed by the first green night")
    issues = _open_issues()
    done = []
    for model, lines in sorted(night.problems.items()):
        number = issues.get(title(model))
        if lines:
            with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as body:
                body.write(night.body(model))
            try:
                if number is None:
                    gh("issue", "create", "--title", title(model), "--label", LABEL, "--body-file", body.name)
                    done.append(f"{model}: opened ({len(lines)} problems)")
                else:
                    gh("issue", "edit", str(number), "--body-file", body.name)
                    gh("issue", "comment", str(number), "--body",
                       f"Still failing on {night.day}: {len(lines)} problems ([run]({night.run_url})).")
                    done.append(f"{model}: updated #{number} ({len(lines)} problems)")
            finally:
                Path(body.name).unlink(missing_ok=True)
        elif number is not None:
            gh("issue", "close", str(number), "--comment", f"Green on {night.day} ([run]({night.run_url})).")
            done.append(f"{model}: closed #{number}")
        else:
            done.append(f"{model}: green")
    return done
