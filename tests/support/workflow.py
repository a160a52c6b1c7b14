"""Runs a GitHub Actions job's steps here, in order, as a runner would: `run:` steps in bash with
the workflow's, job's and step's `env:`, `if:` conditions, step outputs through $GITHUB_OUTPUT.

Only what .github/workflows/nightly.yml uses is understood: contexts (`inputs`, `matrix`,
`needs`, `steps`, `env`, `github`), string literals, `!`, `&&`, `||`, `==`, `!=`, parentheses,
and the status functions. The three actions it uses are played by the test: checkout (the
workspace is prepared), upload-artifact (copies `path` to `<artifacts>/<name>/`) and
download-artifact (copies the artifacts matching `pattern` to `path`). Anything else fails
loudly, so the workflow cannot grow a step this runner silently skips.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')"
                    r"|(?P<op>&&|\|\||==|!=|!|\(|\))"
                    r"|(?P<name>[A-Za-z_][\w.\-]*(?:\(\))?))")
_EXPR = re.compile(r"\$\{\{(.*?)\}\}")


class Unsupported(AssertionError):
    pass


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if not m:
            raise Unsupported(f"cannot read expression {text!r} at {text[pos:]!r}")
        out.append(m.group(m.lastgroup or "name"))
        pos = m.end()
    return out


class _Parser:
    """expr := or; or := and ('||' and)*; and := cmp ('&&' cmp)*; cmp := unary (('=='|'!=') unary)?"""

    def __init__(self, tokens: list[str], lookup: Any):
        self.tokens, self.lookup = tokens, lookup

    def take(self) -> str:
        return self.tokens.pop(0)

    def peek(self) -> str | None:
        return self.tokens[0] if self.tokens else None

    def parse(self) -> Any:
        value = self.or_()
        if self.tokens:
            raise Unsupported(f"left over: {self.tokens}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            value = value or right
        return value

    def and_(self) -> Any:
        value = self.cmp()
        while self.peek() == "&&":
            self.take()
            right = self.cmp()
            value = value and right
        return value

    def cmp(self) -> Any:
        left = self.unary()
        if self.peek() in ("==", "!="):
            op, right = self.take(), self.unary()
            same = _text(left).lower() == _text(right).lower()  # Actions compares strings case-insensitively
            return same if op == "==" else not same
        return left

    def unary(self) -> Any:
        token = self.take()
        if token == "!":
            return not self.unary()
        if token == "(":
            value = self.or_()
            assert self.take() == ")"
            return value
        if token.startswith("'"):
            return token[1:-1].replace("''", "'")
        return self.lookup(token)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


@dataclass
class Context:
    inputs: dict[str, Any] = field(default_factory=dict)
    matrix: dict[str, Any] = field(default_factory=dict)
    needs: dict[str, Any] = field(default_factory=dict)
    github: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    steps: dict[str, Any] = field(default_factory=dict)
    failed: bool = False  # a step of this job failed

    def lookup(self, name: str) -> Any:
        functions = {"always()": True, "cancelled()": False, "success()": not self.failed, "failure()": self.failed}
        if name in functions:
            return functions[name]
        if name in ("true", "false"):
            return name == "true"
        root, *path = name.split(".")
        value: Any = getattr(self, root, None) if root in ("inputs", "matrix", "needs", "github", "env", "steps") \
            else None
        if value is None and root not in ("inputs", "env"):
            raise Unsupported(f"unknown context {name!r}")
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def evaluate(self, expression: str) -> Any:
        return _Parser(_tokens(expression), self.lookup).parse()

    def expand(self, text: Any) -> str:
        """A value with `${{ }}` expressions replaced by their text."""
        return _EXPR.sub(lambda m: _text(self.evaluate(m.group(1))), _text(text))

    def condition(self, text: str | None) -> bool:
        if text is None:
            return not self.failed
        expression = text.strip()
        if expression.startswith("${{") and expression.endswith("}}"):
            expression = expression[3:-2]
        uses_status = any(f in expression for f in ("always()", "cancelled()", "success()", "failure()"))
        return bool(self.evaluate(expression)) and (uses_status or not self.failed)


@dataclass
class StepRun:
    name: str
    ran: bool
    returncode: int = 0
    output: str = ""


@dataclass
class JobRun:
    steps: list[StepRun]
    outputs: dict[str, str]

    @property
    def ok(self) -> bool:
        return all(s.returncode == 0 for s in self.steps)

    def log(self) -> str:
        return "\n".join(f"--- {s.name} (ran={s.ran}, rc={s.returncode})\n{s.output[-4000:]}" for s in self.steps)


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _action(step: dict[str, Any], ctx: Context, workspace: Path, artifacts: Path) -> StepRun:
    uses, given = step["uses"].split("@")[0], {k: ctx.expand(v) for k, v in (step.get("with") or {}).items()}
    name = step.get("name", uses)
    if uses == "actions/checkout":
        return StepRun(name, True)
    if uses == "actions/upload-artifact":
        source = workspace / given["path"]
        if source.exists():
            shutil.copytree(source, artifacts / given["name"], dirs_exist_ok=True)
        return StepRun(name, True, 0, f"uploaded {source} as {given['name']}" if source.exists() else "no files")
    if uses == "actions/download-artifact":
        target = workspace / given["path"]
        for artifact in sorted(artifacts.iterdir()) if artifacts.is_dir() else []:
            if fnmatch.fnmatch(artifact.name, given.get("pattern", "*")):
                shutil.copytree(artifact, target / artifact.name, dirs_exist_ok=True)
        return StepRun(name, True)
    raise Unsupported(f"no stand-in for action {uses}")


def run_job(workflow: dict[str, Any], job_id: str, ctx: Context, workspace: Path, artifacts: Path,
            extra_env: dict[str, str], timeout_s: float = 1800) -> JobRun:
    """Run `job_id`'s steps in `workspace`; returns each step's outcome and the job's outputs."""
    job = workflow["jobs"][job_id]
    ctx.env = {k: ctx.expand(v) for k, v in {**(workflow.get("env") or {}), **(job.get("env") or {})}.items()}
    runs: list[StepRun] = []
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        if not ctx.condition(step.get("if")):
            runs.append(StepRun(name, False))
            continue
        if "uses" in step:
            runs.append(_action(step, ctx, workspace, artifacts))
            continue
        runs.append(_run_step(step, name, ctx, workspace, extra_env, timeout_s))
        ctx.failed = ctx.failed or runs[-1].returncode != 0
    outputs = {k: ctx.expand(v) for k, v in (job.get("outputs") or {}).items()}
    return JobRun(runs, outputs)


def _run_step(step: dict[str, Any], name: str, ctx: Context, workspace: Path, extra_env: dict[str, str],
              timeout_s: float) -> StepRun:
    step_env = {k: ctx.expand(v) for k, v in (step.get("env") or {}).items()}
    files = workspace.parent / "runner"
    files.mkdir(exist_ok=True)
    script, output, summary = files / "step.sh", files / "output", files / "summary"
    script.write_text(ctx.expand(step["run"]))
    output.write_text("")
    env = {**os.environ, **extra_env, **ctx.env, **step_env, "GITHUB_OUTPUT": str(output),
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(workspace), "CI": "true"}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    if "id" in step:
        pairs = (line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        ctx.steps[step["id"]] = {"outputs": dict(pairs)}
    return StepRun(name, True, done.returncode, done.stdout + done.stderr)
