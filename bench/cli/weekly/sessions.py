"""The pytest sessions of a weekly run: one per split, in order, and the retry sessions.

Each session streams to the terminal and into `weekly_<date>.log`; its exit code says whether
it ran its cells (0, or 1 for failing cells, which the journal accounts for), was interrupted
(pytest's 2, or a signal) or could not run them (3 internal error, 4 usage error, 5 nothing
collected). An interrupted session ends the run: no later split, no retry. So does Ctrl-C (or
SIGTERM) of the weekly run itself, which passes the signal on to the session and waits for it
to close its journal and reports.

After the chat split, when every chat cell that ran failed, whatever the reasons (the seed's
"all frameworks fail: something systemic is wrong"), the agent split is not started.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import adapters
from bench.base.paths import PROJECT_ROOT
from bench.cli.weekly.start import all_failed
from bench.reports.journal import JOURNAL_DAY_ENV, Journal
from bench.run.fixes import FIX_REFERENCE_ENV

INTERRUPTING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)


@dataclass(frozen=True)
class Session:
    """One pytest session of the run: its exit code and the last lines of its output."""

    split: str
    exit_code: int
    tail: tuple[str, ...] = ()
    run_id: str = ""

    @property
    def interrupted(self) -> bool:
        """Ctrl-C, or a signal that stops a run: pytest's exit 2, or the session killed by one."""
        return self.exit_code == pytest.ExitCode.INTERRUPTED or -self.exit_code in INTERRUPTING

    @property
    def failure(self) -> str | None:
        """Why the session ended without running its cells, or None when it ran them (exit 0, or 1
        from failing cells, which the journal's cells account for)."""
        if self.exit_code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return None
        if self.exit_code < 0:
            how = f"was killed by {signal.Signals(-self.exit_code).name}"
        else:
            try:
                name = pytest.ExitCode(self.exit_code).name.lower().replace("_", " ")
            except ValueError:
                name = "not one of pytest's exit codes"
            how = f"exited {self.exit_code} ({name})"
        return f"pytest -m {self.split} {how}: {self.last_error()}"

    def last_error(self) -> str:
        """The session's last line that names an error, else its last line (pytest's summary)."""
        lines = [line.strip() for line in self.tail if line.strip()]
        errors = [line for line in lines if "error" in line.lower() or "interrupted" in line.lower()]
        return (errors or lines or ["no output"])[-1].strip("= ")

    @property
    def weekly_exit_code(self) -> int:
        """The session's own code for the weekly run's exit (128 + N for a signal, as shells say)."""
        return self.exit_code if self.exit_code > 0 else 128 - self.exit_code


def split_marker(split: str, frameworks: Sequence[str] | None, left_out: Sequence[str] = ()) -> str:
    """The `-m` expression of one split's session: `chat`, `chat and (llamacpp or vllm)`, and
    `and not (...)` for the cells a held skip or a refused fix attempt leaves out."""
    marker = f"{split} and ({' or '.join(frameworks)})" if frameworks else split
    return f"{marker} and not ({' or '.join(left_out)})" if left_out else marker


def session_command(split: str, args: argparse.Namespace, run_id: str, log: Path, marker: str) -> list[str]:
    """The argv of one session: the split's marker, the run's model choice (bench.cli.choice),
    run id and results root, its pytest-html page unless the user's pytest arguments name one, and
    --fidelity unless --no-fidelity."""
    html = [] if any(a == "--html" or a.startswith("--html=") for a in args.pytest_args) else [
        f"--html={log.parent / f'weekly_{args.date}_{split}.html'}", "--self-contained-html"]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", marker, *args.choice.session_args(),
            f"--run-id={run_id}", f"--results-dir={args.results_dir}", *html,
            *(["--pinned"] if args.pinned else []), *(["--fidelity"] if args.fidelity else []),
            *args.pytest_args]


def session_env(args: argparse.Namespace) -> dict[str, str]:
    """The sessions' environment: the run's day, and the upstream reference a fix needs."""
    env = {**os.environ, JOURNAL_DAY_ENV: args.date}
    env.pop(FIX_REFERENCE_ENV, None)  # only this run's --fix-ref makes a cell `fixed`
    return {**env, FIX_REFERENCE_ENV: args.fix_ref} if args.fix_ref else env


@contextmanager
def _sigterm_passed_on(proc: subprocess.Popen) -> Iterator[None]:
    """SIGTERM of the weekly run reaches the session too, then stops the run as Ctrl-C does."""
    def stop(signum: int, frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def run_session(split: str, args: argparse.Namespace, run_id: str, log: Path, marker: str) -> Session:
    """One pytest session; its output streams to the terminal and into the log. Ctrl-C (which the
    session gets from the terminal too) or SIGTERM waits for the session to close its journal
    and reports, then propagates as KeyboardInterrupt; a second one kills the session."""
    cmd = session_command(split, args, run_id, log, marker)
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(cmd)}\n")
        sink.flush()
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, env=session_env(args))
        assert proc.stdout is not None
        tail: deque[str] = deque(maxlen=40)
        with _sigterm_passed_on(proc):
            try:
                for line in proc.stdout:
                    sys.stdout.write(line)
                    sink.write(line)
                    tail.append(line)
            except KeyboardInterrupt:
                try:
                    for line in proc.stdout:  # the session's closing lines
                        sink.write(line)
                    proc.wait()
                except KeyboardInterrupt:
                    proc.kill()
                    proc.wait()
                raise
        return Session(split, proc.wait(), tuple(tail), run_id)


def run_splits(splits: list[str], args: argparse.Namespace, run_id: str, log: Path, journal: Journal,
               left_out: dict[str, list[str]]) -> tuple[list[Session], list[str], bool]:
    """Each split's session in order. A split is not started after an interrupted session, after
    a chat split whose every cell that ran failed, or when a held skip or a refused attempt leaves
    out every selected cell of it. Returns the sessions, the notes saying which splits were not
    started and why, and whether the run bailed out (then nothing is retried either)."""
    sessions: list[Session] = []
    notes: list[str] = []
    selected = args.frameworks or [a.name for a in adapters.registry().values() if a.benchmark_cells]
    for split in splits:
        rest = splits[splits.index(split) + 1:]
        if set(selected) <= set(left_out.get(split, [])):
            notes.append(f"Not started: {split}, because every selected cell of it is left out "
                         f"({', '.join(left_out[split])})")
            continue
        session = run_session(split, args, run_id, log, split_marker(split, args.frameworks, left_out.get(split, [])))
        sessions.append(session)
        if session.interrupted:
            return sessions, [*notes, *([f"Not started: {', '.join(rest)}, because the {split} session was "
                                         "interrupted"] if rest else [])], True
        if split != "chat" or session.failure:
            continue
        cells = Journal.open(journal.directory, model=journal.model, machine=journal.machine, day=journal.day).cells
        systemic = all_failed([c for c in cells.values() if c.split == "chat"])
        if systemic is not None:
            return sessions, [*notes, f"Bailed out: {systemic}" + (f"; not started: {', '.join(rest)}" if rest
                                                                   else "; nothing is retried")], True
    return sessions, notes, False


def runnable_frameworks(only: list[str] | None) -> list[str]:
    """The selected frameworks (every one, unselected) whose cells run on this machine."""
    return [a.name for a in adapters.registry().values()
            if a.benchmark_cells and a.runs_here() and (only is None or a.name in only)]
